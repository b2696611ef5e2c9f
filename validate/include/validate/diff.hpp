// The diff report of two aligned op sequences (predicted against measured; align.hpp): ops missing
// on either side, resized ops (compared at the precision the log prints), swapped neighbours, and
// for matched ops the time error by op, phase and step, with a verdict against a tolerance.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "formats/measured_logs.hpp"
#include "validate/align.hpp"
#include "validate/noise.hpp"

namespace zerosim {

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
    // False when the alignment is not a minimum one (align.hpp's limits): the reports say so.
    bool alignment_exact = true;
    // Not empty when the two logs cannot be of the same run (most ops unmatched, or a different
    // world or model size where both logs state it): the sentence the verdict prints. Such a
    // verdict fails whatever the scope (--what ops included) and tolerance.
    std::string mismatch;
    // Repeat statistics (validate/noise.hpp), filled by the caller when the measured logs hold
    // repeats: their verdict replaces the single median's (usable() false: the old rule).
    RepeatReport repeats;
    // PASS, FAIL or INCONCLUSIVE (the repeats cannot tell); pass() is verdict() == "PASS".
    std::string verdict() const;
    bool pass() const;
};

// Ops shorter than `min_time_ms` on both sides, or smaller than `min_bytes`, are left out of the
// time error (their structure is still compared).
DiffReport diff_logs(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, DiffScope scope,
                     double min_time_ms = 0.0, double min_bytes = 0.0);
// nccl-tests against nccl-tests: row by row by size.
DiffReport diff_nccl_tables(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance);

// Why the verdict is what it is, as the text report's verdict line says in parentheses: the
// sentence of logs that cannot be of one run, else the structure and the time error against the
// tolerance (each as the scope judges it).
std::string verdict_reason(const DiffReport& r);
void write_diff_text(std::ostream& out, const DiffReport& r);
void write_diff_markdown(std::ostream& out, const DiffReport& r);
void write_diff_json(std::ostream& out, const DiffReport& r);
// One tab-separated line for scripts: matched missing extra resized swapped median_error
// step_comm_pred_ms step_comm_meas_ms step_comm_error verdict (with repeats, the op error and the
// step figures are the repeats'; verdict PASS, FAIL or INCONCLUSIVE); unless --what ops, then
// repeats op_error_lo op_error_hi noise_floor op_spread step_error_lo step_error_hi step_floor
// repeats_needed (zeros without repeats), and with validate --prediction-error: prediction_se
// joint_repeats_needed calibration_rounds calibration_rounds_needed; for logs that cannot be of the
// same run, verdict FAIL and a last column with the sentence.
void write_diff_row(std::ostream& out, const DiffReport& r);

}  // namespace zerosim
