// The measurement's own noise, measured from repeats, and a verdict that knows it (issue 20).
//
// A measured op time is one draw of a noisy process: the same op varies within a run, and the
// median of a run moves from one run to the next (another moment of a shared machine, another
// placement on a cluster). An error against one run cannot tell a wrong model from a noisy
// measurement. Given repeats (several measured logs of one configuration, or one log's training
// steps), this measures:
//   - per op kind and size ("key"), the spread of single ops (median absolute deviation from the
//     key's median, relative) and the noise floor (the standard deviation over repeats of the
//     repeat's median, relative: how far one run's median typically lands from another's);
//   - the prediction's error of each key against the repeats' medians (paired: per repeat the
//     ratio of the measured to the predicted median, so a prediction that follows the
//     measurement carries none of its noise), with a 95%
//     Student-t interval from the repeats (its standard error never below what the single ops'
//     spread implies for that many ops), and the op-weighted median of those errors (the op
//     error) with its interval (the op-weighted medians of the per-key bounds);
//   - the same for the communication time per step (per repeat, the median over its steps of the
//     measured over the predicted step sum).
// The verdict (docs/validate.md derives it): PASS when the whole interval of the op error is within
// the tolerance; FAIL when the whole interval is outside it (the error cannot be the measurement's
// noise); INCONCLUSIVE otherwise, with the number of repeats whose interval would fall on one side,
// the error and the floor staying as measured.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "formats/measured_logs.hpp"

namespace zerosim {

struct RepeatKey {
    std::string op;             // the record ("all_reduce")
    int64_t bytes = 0;
    size_t ops = 0;             // matched measured ops of this key, over every repeat
    size_t repeats = 0;         // repeats in which it occurs
    double pred_ms = 0;         // mean over repeats of the repeat's median prediction
    double meas_ms = 0;         // mean over repeats of the repeat's median
    double error = 0;           // pred / meas - 1
    double error_lo = 0, error_hi = 0;   // 95% interval of the error (hi may be +inf)
    double mad = 0;             // spread: median |x - median x| of x = log(measured / predicted) per op
    double floor = 0;           // noise floor: sd over repeats of the repeat's median / meas_ms
    double paired_floor = 0;    // sd over repeats of log(repeat's measured median / predicted median)
    // The prediction's own standard error (log scale; a calibrated prediction is fitted from noisy
    // rounds), combined with the measurement's in quadrature; 0 when not given.
    double pred_se = 0;
    // The error against the key's fastest calls: pred / (measured at the 10th percentile of the
    // per-op ratio measured / predicted) - 1. Where the median is slow but the fastest calls
    // match, the slow calls are the machine's (preempted, contended), not the model's.
    double fast_error = 0;
    // The calibration rounds pred_se was measured from (0: unknown, as for a uniform fraction).
    size_t pred_rounds = 0;
};

struct RepeatReport {
    size_t logs = 0;
    size_t repeats = 0;           // units: logs when several were given, else the log's steps
    std::string unit = "runs";    // "runs" or "steps"
    double tolerance = 0.15;
    std::vector<RepeatKey> keys;  // keys seen in at least two repeats
    size_t ops_without_repeats = 0;   // matched ops of keys seen in one repeat only (not judged)
    // Op-weighted medians over keys: |error|, its interval, the floor, the per-op spread.
    double error = 0, error_lo = 0, error_hi = 0, floor = 0, mad = 0;
    // Communication per step: predicted and measured (mean over repeats of the median step), the
    // error, its interval and the floor of the per-repeat ratio.
    double step_pred_ms = 0, step_meas_ms = 0, step_error = 0, step_lo = 0, step_hi = 0, step_floor = 0;
    std::string verdict;          // PASS, FAIL, INCONCLUSIVE; "" when there are fewer than 2 repeats
    // INCONCLUSIVE: the repeats whose interval would settle it as measured now (0 when more than
    // kMaxRepeats would be needed).
    size_t repeats_needed = 0;
    // The prediction's standard error as given (validate --prediction-error): the op-weighted
    // median over keys; `prediction_error_given` says whether it was. With it, an interval may
    // stay on both sides of the tolerance however many repeats: `needs_calibration` then says
    // that only a more exact prediction (more calibration rounds) would settle it.
    double pred_se = 0;
    bool prediction_error_given = false;
    bool needs_calibration = false;
    // needs_calibration: the repeats and the calibration rounds that would settle it together,
    // both grown by the same factor (the main job's rounds run between its steps, so more steps
    // bring more rounds): `joint_repeats_needed` repeats, the prediction's standard error divided
    // by sqrt(`calibration_factor`), i.e. `calibration_rounds_needed` rounds where the fewest
    // behind a judged key are `calibration_rounds` now (0 when unknown). Zeros when more than
    // kMaxRepeats repeats would be needed.
    // The op-weighted median of the keys' fast_error (signed); `fast_explains` when the verdict is
    // FAIL with the measurement slower than the prediction while the fastest calls are within
    // the tolerance: the meaning then says so (the verdict stays FAIL: the median is what is judged).
    double fast_error = 0;
    bool fast_explains = false;
    size_t joint_repeats_needed = 0;
    double calibration_factor = 0;
    size_t calibration_rounds = 0, calibration_rounds_needed = 0;
    bool usable() const { return !verdict.empty(); }
};

constexpr size_t kMaxRepeats = 1000;

// Two-sided 95% quantile of Student's t with `dof` degrees of freedom (table to 30, then an
// expansion within 0.002 of it).
double student_t975(size_t dof);

// `meas`: the measured logs of one configuration (each aligned with `pred` as diff_logs aligns);
// ops shorter than `min_time_ms` on both sides or smaller than `min_bytes` are left out.
RepeatReport repeat_stats(const MeasuredLog& pred, const std::vector<const MeasuredLog*>& meas, double tolerance,
                          double min_time_ms = 0.0, double min_bytes = 0.0);

// PASS / FAIL / INCONCLUSIVE and the repeats needed, from the report's keys (each key's interval
// recomputed from its statistics and pred_se); repeat_stats calls it, and again whoever sets the
// keys' pred_se.
void judge_repeats(RepeatReport& r);

// One sentence: what the verdict means for this measurement.
std::string repeat_verdict_meaning(const RepeatReport& r);
void write_repeat_text(std::ostream& out, const RepeatReport& r);
void write_repeat_markdown(std::ostream& out, const RepeatReport& r);

}  // namespace zerosim
