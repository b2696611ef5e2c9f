// zerosim validate: a predicted log diffed against a measured one (DeepSpeed, zerorun, nccl-tests),
// or against repeats of one measurement, whose noise the verdict then knows (validate/noise.hpp).
#include "command.hpp"
#include "core/sizes.hpp"
#include "formats/measured_logs.hpp"
#include "validate/diff.hpp"
#include "validate/prediction_error.hpp"
#include "validate_releases.hpp"

namespace zerosim::cli {

namespace {

struct ValidateArgs {
    std::string predicted;
    std::vector<std::string> measured;   // one log, or repeats of one configuration
    double tolerance = 0.15;
    std::string what = "all";
    std::string format = "text";
    double min_ms = 0.0;
    std::string min_bytes;
    std::string output;
    std::string deepspeed;
    std::string prediction_error;   // a fraction, or calibrate --prediction-error-out's file
};

// Exit codes: 0 PASS (within tolerance), 1 FAIL or INCONCLUSIVE, 2 unreadable input.
int run_validate(const ValidateArgs& a) {
    auto pred = read_log(a.predicted);
    if (!pred) return input_error(pred.error());
    std::vector<MeasuredLog> logs;
    for (const auto& f : a.measured) {
        auto m = read_log(f);
        if (!m) return input_error(m.error());
        logs.push_back(std::move(m.value()));
    }
    const MeasuredLog* meas = &logs.front();
    if (!(a.tolerance >= 0)) return input_error(Error{"", "--tolerance", "expected a fraction such as 0.15"});
    if (int rc = note_log_releases(pred.value(), *meas, a.deepspeed)) return rc;
    if (summary_only(*meas) || summary_only(pred.value()))
        return validate_op_kinds(pred.value(), *meas, a.tolerance, a.what, a.format, a.output);
    bool tables = pred->format == LogFormat::NcclTests, tables_m = meas->format == LogFormat::NcclTests;
    if (tables != tables_m)
        return input_error(Error{a.measured.front(), "", std::string("cannot compare a ") + log_format_name(pred->format) + " log with a " +
                                                     log_format_name(meas->format) + " one"});
    DiffScope scope = a.what == "ops" ? DiffScope::Ops : a.what == "time" ? DiffScope::Time : DiffScope::All;
    double min_bytes = 0;
    if (!a.min_bytes.empty()) {
        auto mb = parse_size(a.min_bytes, "--min-bytes");
        if (!mb) return input_error(mb.error());
        min_bytes = static_cast<double>(*mb);
    }
    for (const auto& m : logs)
        if (tables || m.format == LogFormat::NcclTests) {
            if (logs.size() > 1) return input_error(Error{m.path, "", "repeats are op logs; compare nccl-tests tables one at a time"});
        }
    DiffReport r = tables ? diff_nccl_tables(pred.value(), *meas, a.tolerance)
                          : diff_logs(pred.value(), *meas, a.tolerance, scope, a.min_ms, min_bytes);
    if (!tables) {
        // Every repeat must be of the same run as the prediction, with the same structure.
        for (size_t i = 1; i < logs.size(); ++i) {
            DiffReport other = diff_logs(pred.value(), logs[i], a.tolerance, scope, a.min_ms, min_bytes);
            if (r.mismatch.empty() && !other.mismatch.empty()) r.mismatch = logs[i].path + ": " + other.mismatch;
            if (!other.structure_ok) {
                r.structure_ok = false;
                r.differences.push_back(logs[i].path + ": " + std::to_string(other.missing) + " missing, " +
                                        std::to_string(other.extra) + " extra, " + std::to_string(other.resized) + " resized, " +
                                        std::to_string(other.swapped) + " swapped");
            }
        }
        if (scope != DiffScope::Ops) {
            std::vector<const MeasuredLog*> all;
            for (const auto& m : logs) all.push_back(&m);
            r.repeats = repeat_stats(pred.value(), all, a.tolerance, a.min_ms, min_bytes);
            if (!a.prediction_error.empty()) {
                auto pe = read_prediction_error(a.prediction_error);
                if (!pe) return input_error(pe.error());
                apply_prediction_error(r.repeats, pe.value());
            }
        }
    }
    std::vector<std::string> inputs = {a.predicted};
    inputs.insert(inputs.end(), a.measured.begin(), a.measured.end());
    int rc = emit(a.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_diff_json(out, r);
        else if (a.format == "row")
            write_diff_row(out, r);
        else if (a.format == "md")
            write_diff_markdown(out, r);
        else
            write_diff_text(out, r);
    });
    if (rc) return rc;
    return r.pass() ? 0 : 1;
}

}  // namespace

Command add_validate(CLI::App& app) {
    auto a = std::make_shared<ValidateArgs>();
    auto* sub = app.add_subcommand("validate", "Diff a predicted log against measured ones (DeepSpeed, zerorun, nccl-tests)");
    sub->add_option("predicted", a->predicted, "Predicted log (zerosim predict output, or any supported log)")->required();
    sub->add_option("measured", a->measured,
                    "Measured log(s): DeepSpeed comms_logger output, zerorun log, or nccl-tests output; several logs of one "
                    "configuration are repeats whose noise the verdict weighs (one log: its steps are the repeats)")
        ->required();
    sub->add_option("--tolerance", a->tolerance, "Largest median relative time error that passes")
        ->capture_default_str()
        ->check(finite_at_least(0));
    sub->add_option("--what", a->what, "ops (structure only), time, or all")
        ->check(CLI::IsMember({"ops", "time", "all"}))
        ->capture_default_str();
    sub->add_option("--format", a->format, "text, json, md, or row (one tab-separated line for scripts)")
        ->check(CLI::IsMember({"text", "json", "md", "row"}))
        ->capture_default_str();
    sub->add_option("--min-ms", a->min_ms, "Leave ops shorter than this (on both sides) out of the time error")
        ->check(finite_at_least(0));
    sub->add_option("--min-bytes", a->min_bytes, "Leave ops smaller than this (e.g. 256K) out of the time error");
    sub->add_option("-o,--output", a->output, "Write the report to this file");
    sub->add_option("--deepspeed", a->deepspeed, "The DeepSpeed release that wrote the measured log (checked against its prefix)");
    sub->add_option("--prediction-error", a->prediction_error,
                    "The prediction's own standard error (log scale), combined with the measurement's in every interval: a "
                    "fraction such as 0.1, or the file zerosim calibrate --prediction-error-out wrote (per collective and size)");
    return {sub, [a] { return run_validate(*a); }};
}

}  // namespace zerosim::cli
