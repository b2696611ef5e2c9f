// A prediction's forward, backward and step times, its throughput and its peak memory against a
// real run's own figures (formats/wall_clock_log.hpp: wall_clock_breakdown's timer lines,
// steps_per_print's throughput line, the flops profiler's summary), with the verdict the op times
// have (validate/noise.hpp): the repeats are the log's steps.
//
// Per quantity present on both sides: the measured value of each step after the first (the
// first warms up: allocator, autotuning, stage 3's trace; kept when it is the only one), the
// predicted value (the median of the prediction's steps after its first: the simulation repeats
// itself), and per step x = log(predicted / measured). The error is exp(mean x) - 1 with the 95%
// Student-t interval of the mean, its standard error never below the printed resolution's
// (0.005 of the unit over the measured value). A quantity of one value (the peak memory, the
// profiler's one step) has that resolution for interval. Verdict per quantity: PASS when the
// interval lies within +-tolerance, FAIL when wholly outside it, INCONCLUSIVE otherwise; the
// whole: FAIL if any quantity fails, PASS if all pass. A quantity measured at 0 (the step of a
// micro step off the accumulation boundary) is shown and not judged.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "formats/wall_clock_log.hpp"

namespace zerosim {

struct PhaseRow {
    std::string quantity;        // "fwd_microstep", "samples/s", "MaxMemAllocated", "profiler fwd latency"
    std::string unit;            // "ms", "samples/s", "GiB"
    double pred = 0;             // the prediction's value
    double meas = 0;             // the median of the measured values judged
    size_t repeats = 0;          // measured values judged (steps, or 1)
    double error = 0, lo = 0, hi = 0;
    std::string verdict;         // PASS, FAIL, INCONCLUSIVE; "" = not judged (note says why)
    std::string note;
};

struct PhaseReport {
    std::string pred_name, meas_name;
    double tolerance = 0.15;
    size_t warmup_steps = 0;     // measured steps left out at the start
    std::vector<PhaseRow> rows;
    std::vector<std::string> notes;   // what is on one side only, timer names not compared
    std::string verdict;
    bool pass() const { return verdict == "PASS"; }
};

// An Error when no quantity is on both sides (naming what each log holds).
Result<PhaseReport> compare_phases(const WallClockLog& pred, const WallClockLog& meas, double tolerance);

void write_phase_text(std::ostream& out, const PhaseReport& r);
void write_phase_markdown(std::ostream& out, const PhaseReport& r);
void write_phase_json(std::ostream& out, const PhaseReport& r);
void write_phase_row(std::ostream& out, const PhaseReport& r);

}  // namespace zerosim
