// Aligning two op sequences (predicted against measured) and the diff report: ops missing on
// either side, resized ops (compared at the precision the log prints), swapped neighbours, and
// for matched ops the time error by op, phase and step, with a verdict against a tolerance.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "formats/measured_logs.hpp"

namespace zerosim {

enum class DiffKind { Match, Resized, Missing, Extra, Swapped };
const char* diff_kind_name(DiffKind k);

struct DiffEntry {
    DiffKind kind = DiffKind::Match;
    int pred = -1, meas = -1;      // indices into the two op lists (first of a swapped pair)
    int pred2 = -1, meas2 = -1;    // the second op of a swapped pair
};

// Edit-distance alignment on (op, printed size); callers are advisory (they differ between
// DeepSpeed versions) and do not break a match.
std::vector<DiffEntry> align_ops(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas);

enum class DiffScope { Ops, Time, All };

struct TimeStats {
    std::string key;
    size_t count = 0;
    double pred_ms = 0, meas_ms = 0;
    double median_abs_error = 0;   // of per-op relative errors
};

struct DiffReport {
    std::string pred_name, meas_name;
    LogFormat pred_format = LogFormat::DeepSpeed, meas_format = LogFormat::DeepSpeed;
    size_t pred_ops = 0, meas_ops = 0;
    size_t matched = 0, missing = 0, extra = 0, resized = 0, swapped = 0;
    std::vector<std::string> differences;   // one line each, in order
    TimeStats overall;
    std::vector<TimeStats> by_op, by_phase, by_step;
    // Communication time per training step (every matched op of the step, no size filter): the
    // median over steps of the predicted and the measured sums, and the median relative error.
    double step_comm_pred_ms = 0, step_comm_meas_ms = 0, step_comm_error = 0;
    double tolerance = 0.15;
    DiffScope scope = DiffScope::All;
    bool structure_ok = true, time_ok = true;
    bool pass() const;
};

// Ops shorter than `min_time_ms` on both sides, or smaller than `min_bytes`, are left out of the
// time error (their structure is still compared).
DiffReport diff_logs(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, DiffScope scope,
                     double min_time_ms = 0.0, double min_bytes = 0.0);
// nccl-tests against nccl-tests: row by row by size.
DiffReport diff_nccl_tables(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance);

void write_diff_text(std::ostream& out, const DiffReport& r);
void write_diff_markdown(std::ostream& out, const DiffReport& r);
void write_diff_json(std::ostream& out, const DiffReport& r);
// One tab-separated line for scripts: matched missing extra resized swapped median_error
// step_comm_pred_ms step_comm_meas_ms step_comm_error verdict.
void write_diff_row(std::ostream& out, const DiffReport& r);

}  // namespace zerosim
