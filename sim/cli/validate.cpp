// zerosim validate: a predicted log diffed against a measured one (DeepSpeed, zerorun, nccl-tests),
// or against repeats of one measurement, whose noise the verdict then knows (validate/noise.hpp),
// or each rank's prediction against that rank's log (validate/per_rank.hpp).
#include <filesystem>
#include <iostream>

#include "command.hpp"
#include "core/json_input.hpp"
#include "core/sizes.hpp"
#include "formats/measured_logs.hpp"
#include "formats/wall_clock_log.hpp"
#include "validate/diff.hpp"
#include "validate/per_rank.hpp"
#include "validate/phase_times.hpp"
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

// The diff of one predicted log against measured ones (one log, or repeats of one run), with
// the repeats' statistics; an Error for inputs that cannot be compared.
Result<DiffReport> diff_report(const ValidateArgs& a, const MeasuredLog& pred, const std::vector<const MeasuredLog*>& logs) {
    const MeasuredLog* meas = logs.front();
    bool tables = pred.format == LogFormat::NcclTests, tables_m = meas->format == LogFormat::NcclTests;
    if (tables != tables_m)
        return Error{meas->path, "", std::string("cannot compare a ") + log_format_name(pred.format) + " log with a " +
                                        log_format_name(meas->format) + " one"};
    DiffScope scope = a.what == "ops" ? DiffScope::Ops : a.what == "time" ? DiffScope::Time : DiffScope::All;
    double min_bytes = 0;
    if (!a.min_bytes.empty()) {
        auto mb = parse_size(a.min_bytes, "--min-bytes");
        if (!mb) return mb.error();
        min_bytes = static_cast<double>(*mb);
    }
    for (const MeasuredLog* m : logs)
        if (tables || m->format == LogFormat::NcclTests) {
            if (logs.size() > 1) return Error{m->path, "", "repeats are op logs; compare nccl-tests tables one at a time"};
        }
    DiffReport r = tables ? diff_nccl_tables(pred, *meas, a.tolerance) : diff_logs(pred, *meas, a.tolerance, scope, a.min_ms, min_bytes);
    if (tables) return r;
    // Every repeat must be of the same run as the prediction, with the same structure.
    for (size_t i = 1; i < logs.size(); ++i) {
        DiffReport other = diff_logs(pred, *logs[i], a.tolerance, scope, a.min_ms, min_bytes);
        if (r.mismatch.empty() && !other.mismatch.empty()) r.mismatch = logs[i]->path + ": " + other.mismatch;
        if (!other.structure_ok) {
            r.structure_ok = false;
            r.differences.push_back(logs[i]->path + ": " + std::to_string(other.missing) + " missing, " + std::to_string(other.extra) +
                                    " extra, " + std::to_string(other.resized) + " resized, " + std::to_string(other.swapped) +
                                    " swapped");
        }
    }
    if (scope != DiffScope::Ops) {
        r.repeats = repeat_stats(pred, logs, a.tolerance, a.min_ms, min_bytes);
        if (!a.prediction_error.empty()) {
            auto pe = read_prediction_error(a.prediction_error);
            if (!pe) return pe.error();
            apply_prediction_error(r.repeats, pe.value());
        }
    }
    return r;
}

// One predicted log against one measured log or its repeats (the report of issue 20).
// Exit codes: 0 PASS (within tolerance), 1 FAIL or INCONCLUSIVE, 2 unreadable input.
int validate_one(const ValidateArgs& a, const MeasuredLog& pred, const std::vector<const MeasuredLog*>& logs,
                 const std::vector<std::string>& inputs) {
    if (int rc = note_log_releases(pred, *logs.front(), a.deepspeed)) return rc;
    if (summary_only(*logs.front()) || summary_only(pred))
        return validate_op_kinds(pred, *logs.front(), a.tolerance, a.what, a.format, a.output, inputs);
    auto r = diff_report(a, pred, logs);
    if (!r) return input_error(r.error());
    int rc = emit(a.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_diff_json(out, *r);
        else if (a.format == "row")
            write_diff_row(out, *r);
        else if (a.format == "md")
            write_diff_markdown(out, *r);
        else
            write_diff_text(out, *r);
    });
    if (rc) return rc;
    return r->pass() ? 0 : 1;
}

// Each rank's prediction against its log, one verdict over all (docs/validate.md, "One log per
// rank"). One measured rank alone is a user's real log: that rank's full report, as validate_one.
int validate_ranks(const ValidateArgs& a, std::vector<MeasuredLog> preds, std::vector<MeasuredLog> logs,
                   const std::vector<std::string>& inputs) {
    auto pred = logs_by_rank(std::move(preds));
    if (!pred) return input_error(pred.error());
    auto meas = logs_by_rank(std::move(logs));
    if (!meas) return input_error(meas.error());
    // The side a missing rank's log belongs to: the folder or file given, else the others' folder.
    std::string meas_name = a.measured.size() == 1 ? a.measured.front()
                                                   : std::filesystem::path(a.measured.front()).parent_path().string();
    if (meas_name.empty()) meas_name = ".";
    auto paired = pair_ranks(pred.value(), meas.value(), a.predicted, meas_name);
    if (!paired) return input_error(paired.error());
    const auto& pairs = paired->pairs;
    if (pairs.size() == 1) {
        std::cerr << "zerosim: note: rank " << pairs[0].rank << "'s log alone (" << pairs[0].meas->path << ") against its prediction; "
                  << paired->unmeasured.size() << " predicted rank(s) without a log are not checked\n";
        return validate_one(a, *pairs[0].pred, {pairs[0].meas}, inputs);
    }
    if (int rc = note_log_releases(*pairs[0].pred, *pairs[0].meas, a.deepspeed)) return rc;
    PerRankReport report;
    report.scope = a.what == "ops" ? DiffScope::Ops : a.what == "time" ? DiffScope::Time : DiffScope::All;
    report.tolerance = a.tolerance;
    report.pred_name = a.predicted;
    report.meas_name = meas_name;
    for (const auto& p : pairs) {
        // Ranks are compared op by op; a summary table or an nccl-tests table has no ops of a rank.
        for (const MeasuredLog* log : {p.pred, p.meas})
            if (log->ops.empty())
                return input_error(Error{log->path, "", "holds no comm op lines of rank " + std::to_string(p.rank) +
                                                            "; per-rank validation compares each rank's ops"});
        auto r = diff_report(a, *p.pred, {p.meas});
        if (!r) return input_error(r.error());
        report.ranks.push_back({p.rank, std::move(r).value()});
    }
    int rc = emit(a.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_per_rank_json(out, report);
        else if (a.format == "row")
            write_per_rank_row(out, report);
        else if (a.format == "md")
            write_per_rank_markdown(out, report);
        else
            write_per_rank_text(out, report);
    });
    if (rc) return rc;
    return report.pass() ? 0 : 1;
}

// The files an argument names: a folder's rankN logs, else the argument itself (read_log then
// says what it is when it is no log).
std::vector<std::string> log_files(const std::string& arg, bool& folder) {
    auto files = rank_log_files(arg);
    if (files.empty()) return {arg};
    folder = true;
    return files;
}

// The prediction's forward, backward and step times, throughput and peak memory against the
// run's own lines (validate/phase_times.hpp): --what phases, or a measured log that has those
// lines and no comm op lines (a run without the comms logger).
int validate_phases(const ValidateArgs& a, const std::vector<std::string>& inputs) {
    if (a.measured.size() != 1)
        return input_error(Error{a.measured[1], "", "--what phases compares one predicted log with one measured log"});
    auto pred = read_deepspeed_figures(a.predicted);
    if (!pred) return input_error(pred.error());
    auto meas = read_deepspeed_figures(a.measured.front());
    if (!meas) return input_error(meas.error());
    if (!(a.tolerance >= 0)) return input_error(Error{"", "--tolerance", "expected a fraction such as 0.15"});
    auto r = compare_phases(pred.value(), meas.value(), a.tolerance);
    if (!r) return input_error(r.error());
    int rc = emit(a.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_phase_json(out, *r);
        else if (a.format == "row")
            write_phase_row(out, *r);
        else if (a.format == "md")
            write_phase_markdown(out, *r);
        else
            write_phase_text(out, *r);
    });
    if (rc) return rc;
    return r->pass() ? 0 : 1;
}

// Whether a file (not a folder) holds any of DeepSpeed's own figures' markers (a search, not a
// parse: a million-line log is read once more, not parsed twice).
bool has_own_figures(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed log");
    if (!text) return false;
    for (const char* marker : {"time (ms) |", "RunningAvgSamplesPerSec=", "iter time (s): ", "DeepSpeed Flops Profiler"})
        if (text->find(marker) != std::string::npos) return true;
    return false;
}

// A DeepSpeed log of a run without the comms logger: its own figures and no comm op line at all
// (a comm op line that does not read is that line's error, not this).
bool own_figures_only(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed log");
    if (!text || text->find("comm op:") != std::string::npos) return false;
    auto f = parse_deepspeed_figures(path, text.value());
    return f && !f->empty();
}

int run_validate(const ValidateArgs& a) {
    if (a.what == "phases") {
        std::vector<std::string> inputs{a.predicted};
        inputs.insert(inputs.end(), a.measured.begin(), a.measured.end());
        return validate_phases(a, inputs);
    }
    bool folders = false;
    std::vector<std::string> pred_files = log_files(a.predicted, folders), meas_files;
    for (const auto& m : a.measured)
        for (auto& f : log_files(m, folders)) meas_files.push_back(std::move(f));
    std::vector<MeasuredLog> preds, logs;
    for (const auto* files : {&pred_files, &meas_files})
        for (const auto& f : *files) {
            auto log = read_log(f);
            // A run logged without the comms logger, with its timers: its phases are what it has.
            if (!log && a.measured.size() == 1 && files == &meas_files && meas_files.size() == 1 && pred_files.size() == 1 &&
                own_figures_only(f)) {
                std::cerr << "zerosim: note: " << f << " has no comm op lines, only DeepSpeed's own timers or throughput: "
                          << "comparing those (--what phases)\n";
                return validate_phases(a, {a.predicted, f});
            }
            if (!log) return input_error(log.error());
            (files == &pred_files ? preds : logs).push_back(std::move(log.value()));
        }
    if (!(a.tolerance >= 0)) return input_error(Error{"", "--tolerance", "expected a fraction such as 0.15"});
    std::vector<std::string> inputs = pred_files;
    inputs.insert(inputs.end(), meas_files.begin(), meas_files.end());
    if (!a.prediction_error.empty()) inputs.push_back(a.prediction_error);   // a fraction names no file: no harm
    // A folder of rank logs, or logs that name two ranks or more, are a run's ranks; otherwise
    // several logs are repeats of one rank (all of DeepSpeed's rank 0, as its logger prints).
    if (folders || named_ranks(preds).size() >= 2 || named_ranks(logs).size() >= 2)
        return validate_ranks(a, std::move(preds), std::move(logs), inputs);
    std::vector<const MeasuredLog*> repeats;
    for (const auto& m : logs) repeats.push_back(&m);
    const int rc = validate_one(a, preds.front(), repeats, inputs);
    if (rc < 2 && a.what == "all" && logs.size() == 1 && has_own_figures(meas_files.front()) && has_own_figures(pred_files.front()))
        std::cerr << "zerosim: note: both logs also hold DeepSpeed's own timers or throughput, which this report leaves out; "
                     "--what phases compares them\n";
    return rc;
}

}  // namespace

Command add_validate(CLI::App& app) {
    auto a = std::make_shared<ValidateArgs>();
    auto* sub = app.add_subcommand("validate", "Diff a predicted log against measured ones (DeepSpeed, zerorun, nccl-tests)");
    sub->add_option("predicted", a->predicted,
                    "Predicted log (zerosim predict output, or any supported log), or a folder of one per rank (rankN.log: "
                    "zerosim schedule --rank all -o DIR/)")
        ->required();
    sub->add_option("measured", a->measured,
                    "Measured log(s): DeepSpeed comms_logger output, zerorun log, or nccl-tests output; several logs of one "
                    "configuration are repeats whose noise the verdict weighs (one log: its steps are the repeats); logs of "
                    "several ranks (by their \"[Rank N]\" lines, else their names rankN.log, or a folder of them) are each "
                    "paired with that rank's prediction")
        ->required();
    sub->add_option("--tolerance", a->tolerance, "Largest median relative time error that passes")
        ->capture_default_str()
        ->check(finite_at_least(0));
    sub->add_option("--what", a->what,
                    "ops (structure only), time, all, or phases (forward, backward and step times, throughput and peak "
                    "memory against the run's wall_clock_breakdown, steps_per_print and flops profiler lines)")
        ->check(CLI::IsMember({"ops", "time", "all", "phases"}))
        ->capture_default_str();
    sub->add_option("--format", a->format, "text, json, md, or row (one tab-separated line for scripts)")
        ->check(CLI::IsMember({"text", "json", "md", "row"}))
        ->capture_default_str();
    sub->add_option("--min-ms", a->min_ms, "Leave ops shorter than this (on both sides) out of the time error")
        ->check(finite_at_least(0));
    sub->add_option("--min-bytes", a->min_bytes, "Leave ops smaller than this (e.g. 256K) out of the time error");
    sub->add_option("-o,--output", a->output, "Write the report to this file")->check(output_file());
    sub->add_option("--deepspeed", a->deepspeed, "The DeepSpeed release that wrote the measured log (checked against its prefix)");
    sub->add_option("--prediction-error", a->prediction_error,
                    "The prediction's own standard error (log scale), combined with the measurement's in every interval: a "
                    "fraction such as 0.1, or the file zerosim calibrate --prediction-error-out wrote (per collective and size)");
    return {sub, [a] { return run_validate(*a); }};
}

}  // namespace zerosim::cli
