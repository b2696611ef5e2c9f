#include "validate/diff.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/comms_log.hpp"
#include "diff_json.hpp"
#include "stats.hpp"

namespace zerosim {

std::string DiffReport::verdict() const {
    if (!mismatch.empty()) return "FAIL";
    if (scope != DiffScope::Time && !structure_ok) return "FAIL";
    if (scope == DiffScope::Ops) return "PASS";
    if (repeats.usable()) return repeats.verdict;
    return time_ok ? "PASS" : "FAIL";
}

bool DiffReport::pass() const { return verdict() == "PASS"; }

namespace {

using validate_detail::median;

// What a report says when the alignment gave up its minimum (align.hpp: too many differences).
constexpr const char* kApproximateAlignment =
    "approximate: the logs differ in too many ops for a minimum edit script (validate/align.hpp); these counts are "
    "those of a valid script, an upper bound on the minimum";

std::string step_of(const std::string& phase) {
    if (phase.rfind("step", 0) != 0) return phase.empty() ? "?" : phase;
    return phase.substr(0, phase.find('.'));
}

std::string phase_of(const std::string& phase) {
    auto dot = phase.rfind('.');
    return dot == std::string::npos ? (phase.empty() ? "?" : phase) : phase.substr(dot + 1);
}

// Logs of one run share their structure: most ops match, op and printed size. Fewer than half of
// the smaller log's ops matched means another model, config or world, whatever the times say.
// (Resized ops do not count: any two all_gathers align as "resized", whatever the model.)
std::string unmatched_structure(size_t matched, size_t pred_ops, size_t meas_ops, const char* what) {
    size_t smaller = std::min(pred_ops, meas_ops);
    if (2 * matched >= smaller) return "";
    return "these logs cannot be of the same run: " + std::to_string(matched) + " of " + std::to_string(pred_ops) +
           " predicted " + what + " matched (" + std::to_string(meas_ops) + " measured)";
}

// What both logs state about their run and differs.
std::string stated_difference(const MeasuredLog& pred, const MeasuredLog& meas) {
    auto differ = [](int64_t a, int64_t b) { return a > 0 && b > 0 && a != b; };
    if (differ(pred.world, meas.world))
        return "these logs cannot be of the same run: predicted world " + std::to_string(pred.world) + ", measured world " +
               std::to_string(meas.world);
    if (differ(pred.total_params, meas.total_params))
        return "these logs cannot be of the same run: predicted model " + std::to_string(pred.total_params) +
               " parameters, measured " + std::to_string(meas.total_params);
    return "";
}

// A relative error the verdict may use: |p - m| / m over a measured time above zero, finite.
bool relative_error(double p, double m, double& e) {
    if (!(m > 0)) return false;
    e = std::fabs(p - m) / m;
    return std::isfinite(e);
}

std::string describe(const LoggedOp& op) {
    return ds_record_key(op.record, op.caller) + " " + op.size_text + " (line " + std::to_string(op.line) + ")";
}

// Per breakdown (op kind, phase, step): each key's totals and its ops' relative errors; and
// every timed op's error and each step's communication, predicted and measured.
struct DiffTimeBreakdown {
    struct Group {
        TimeStats stats;
        std::vector<double> errors;
    };
    std::map<std::string, Group> groups[3];   // by op, by phase, by step
    std::vector<double> all_err;
    std::map<std::string, std::pair<double, double>> step_comm;
    double min_time_ms = 0, min_bytes = 0;

    // A matched pair of ops: its step's communication, and its error where the op is long and
    // large enough to judge.
    void account(const LoggedOp& p, const LoggedOp& m, TimeStats& overall) {
        std::string ph = !p.phase.empty() ? p.phase : m.phase;
        if (ph.rfind("step", 0) == 0) {
            auto& sc = step_comm[step_of(ph)];
            sc.first += p.time_ms;
            sc.second += m.time_ms;
        }
        double e = 0;
        if (std::max(p.time_ms, m.time_ms) < min_time_ms || p.bytes < min_bytes || !relative_error(p.time_ms, m.time_ms, e)) return;
        std::string keys[3] = {p.record, phase_of(ph), step_of(ph)};
        for (int k = 0; k < 3; ++k) {
            Group& g = groups[k][keys[k]];
            g.stats.key = keys[k];
            g.stats.count++;
            g.stats.pred_ms += p.time_ms;
            g.stats.meas_ms += m.time_ms;
            g.errors.push_back(e);
        }
        overall.count++;
        overall.pred_ms += p.time_ms;
        overall.meas_ms += m.time_ms;
        all_err.push_back(e);
    }
};

// One entry of the alignment in the report: matched ops timed, every other one listed.
void record_diff_entry(DiffReport& r, DiffTimeBreakdown& t, const DiffEntry& e, const MeasuredLog& pred, const MeasuredLog& meas) {
    switch (e.kind) {
        case DiffKind::Match:
            ++r.matched;
            t.account(pred.ops[static_cast<size_t>(e.pred)], meas.ops[static_cast<size_t>(e.meas)], r.overall);
            break;
        case DiffKind::Resized:
            ++r.resized;
            r.differences.push_back("resized: predicted " + describe(pred.ops[static_cast<size_t>(e.pred)]) +
                                    ", measured " + describe(meas.ops[static_cast<size_t>(e.meas)]));
            break;
        case DiffKind::Missing:
            ++r.missing;
            r.differences.push_back("missing from the measured log: predicted " + describe(pred.ops[static_cast<size_t>(e.pred)]));
            break;
        case DiffKind::Extra:
            ++r.extra;
            r.differences.push_back("extra in the measured log: " + describe(meas.ops[static_cast<size_t>(e.meas)]));
            break;
        case DiffKind::Swapped:
            ++r.swapped;
            r.matched += 2;
            t.account(pred.ops[static_cast<size_t>(e.pred)], meas.ops[static_cast<size_t>(e.meas2)], r.overall);
            t.account(pred.ops[static_cast<size_t>(e.pred2)], meas.ops[static_cast<size_t>(e.meas)], r.overall);
            r.differences.push_back("swapped: predicted " + describe(pred.ops[static_cast<size_t>(e.pred)]) + " then " +
                                    describe(pred.ops[static_cast<size_t>(e.pred2)]) + "; measured the other way round");
            break;
    }
}

// The breakdown's medians into the report: overall, communication per step, and per key.
void finish_diff_breakdown(DiffReport& r, DiffTimeBreakdown& t) {
    r.overall.key = "all";
    r.overall.median_abs_error = median(t.all_err);
    {
        std::vector<double> ps, ms_, es;
        for (const auto& [k, v] : t.step_comm) {
            ps.push_back(v.first);
            ms_.push_back(v.second);
            double e = 0;
            if (relative_error(v.first, v.second, e)) es.push_back(e);
        }
        r.step_comm_pred_ms = median(ps);
        r.step_comm_meas_ms = median(ms_);
        r.step_comm_error = median(es);
    }
    std::vector<TimeStats>* out[3] = {&r.by_op, &r.by_phase, &r.by_step};
    for (int k = 0; k < 3; ++k)
        for (auto& [key, g] : t.groups[k]) {
            g.stats.median_abs_error = median(g.errors);
            out[k]->push_back(g.stats);
        }
}

}  // namespace

DiffReport diff_logs(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, DiffScope scope, double min_time_ms,
                     double min_bytes) {
    DiffReport r;
    r.pred_name = pred.path;
    r.meas_name = meas.path;
    r.pred_format = pred.format;
    r.meas_format = meas.format;
    r.pred_ops = pred.ops.size();
    r.meas_ops = meas.ops.size();
    r.tolerance = tolerance;
    r.scope = scope;
    DiffTimeBreakdown times;
    times.min_time_ms = min_time_ms;
    times.min_bytes = min_bytes;
    const Alignment a = align_ops(pred.ops, meas.ops);
    r.alignment_exact = a.exact;
    for (const auto& e : a.entries) record_diff_entry(r, times, e, pred, meas);
    finish_diff_breakdown(r, times);
    r.structure_ok = r.missing == 0 && r.extra == 0 && r.resized == 0 && r.swapped == 0;
    r.time_ok = r.overall.count > 0 && r.overall.median_abs_error <= tolerance;
    r.mismatch = stated_difference(pred, meas);
    if (r.mismatch.empty()) r.mismatch = unmatched_structure(r.matched, r.pred_ops, r.meas_ops, "ops");
    return r;
}

DiffReport diff_nccl_tables(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance) {
    DiffReport r;
    r.pred_name = pred.path;
    r.meas_name = meas.path;
    r.pred_format = r.meas_format = LogFormat::NcclTests;
    r.tolerance = tolerance;
    r.scope = DiffScope::Time;
    std::map<int64_t, double> p, m;
    for (const auto& t : pred.tables)
        for (const auto& row : t.rows) p[row.bytes] = row.time_us;
    for (const auto& t : meas.tables)
        for (const auto& row : t.rows) m[row.bytes] = row.time_us;
    r.pred_ops = p.size();
    r.meas_ops = m.size();
    std::vector<double> errs, small, large;
    TimeStats s_small{"< 1 MiB"}, s_large{">= 1 MiB"};
    for (const auto& [bytes, t] : p) {
        auto it = m.find(bytes);
        if (it == m.end()) {
            ++r.missing;
            r.differences.push_back("size " + std::to_string(bytes) + " only in " + pred.path);
            continue;
        }
        ++r.matched;
        double e = 0;
        if (!relative_error(t, it->second, e)) continue;   // a 0 us measurement has no relative error
        errs.push_back(e);
        TimeStats& s = bytes >= (1 << 20) ? s_large : s_small;
        (bytes >= (1 << 20) ? large : small).push_back(e);
        s.count++;
        s.pred_ms += t / 1e3;
        s.meas_ms += it->second / 1e3;
        r.overall.count++;
        r.overall.pred_ms += t / 1e3;
        r.overall.meas_ms += it->second / 1e3;
    }
    for (const auto& [bytes, t] : m)
        if (!p.count(bytes)) {
            ++r.extra;
            r.differences.push_back("size " + std::to_string(bytes) + " only in " + meas.path);
        }
    r.overall.key = "all";
    r.overall.median_abs_error = median(errs);
    s_small.median_abs_error = median(small);
    s_large.median_abs_error = median(large);
    if (s_small.count) r.by_op.push_back(s_small);
    if (s_large.count) r.by_op.push_back(s_large);
    r.structure_ok = true;
    r.time_ok = r.overall.count > 0 && r.overall.median_abs_error <= tolerance;
    r.mismatch = unmatched_structure(r.matched, r.pred_ops, r.meas_ops, "sizes");
    return r;
}

namespace {

using validate_detail::percent_text;

std::string ms(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

void stats_table(std::ostream& out, const char* title, const std::vector<TimeStats>& rows, bool md) {
    if (rows.empty()) return;
    char line[256];
    if (md) {
        out << "\n### " << title << "\n\n| " << title << " | ops | predicted ms | measured ms | median abs error |\n|---|---:|---:|---:|---:|\n";
        for (const auto& s : rows)
            out << "| " << s.key << " | " << s.count << " | " << ms(s.pred_ms) << " | " << ms(s.meas_ms) << " | "
                << percent_text(s.median_abs_error) << " |\n";
        return;
    }
    std::snprintf(line, sizeof line, "\n%-28s %6s %14s %14s %10s\n", title, "ops", "predicted ms", "measured ms", "median err");
    out << line;
    for (const auto& s : rows) {
        std::snprintf(line, sizeof line, "%-28s %6zu %14.3f %14.3f %10s\n", s.key.c_str(), s.count, s.pred_ms, s.meas_ms,
                      percent_text(s.median_abs_error).c_str());
        out << line;
    }
}

}  // namespace

std::string verdict_reason(const DiffReport& r) {
    if (!r.mismatch.empty()) return r.mismatch;
    std::string why;
    if (r.scope != DiffScope::Time) why += std::string("structure ") + (r.structure_ok ? "identical" : "differs");
    if (r.scope == DiffScope::All) why += "; ";
    if (r.scope != DiffScope::Ops && r.repeats.usable())
        why += "op error " + percent_text(r.repeats.error) + " [" + percent_text(r.repeats.error_lo) + ", " +
               (std::isfinite(r.repeats.error_hi) ? percent_text(r.repeats.error_hi) : std::string("inf")) + "] against tolerance " +
               percent_text(r.tolerance) + ", noise floor " + percent_text(r.repeats.floor);
    else if (r.scope != DiffScope::Ops)
        why += "median time error " + percent_text(r.overall.median_abs_error) + " against tolerance " + percent_text(r.tolerance);
    return why;
}

void write_diff_text(std::ostream& out, const DiffReport& r) {
    out << "validate: " << r.pred_name << " (" << log_format_name(r.pred_format) << ", " << r.pred_ops << " ops) against "
        << r.meas_name << " (" << log_format_name(r.meas_format) << ", " << r.meas_ops << " ops)\n";
    out << "structure: " << r.matched << " matched, " << r.missing << " missing, " << r.extra << " extra, " << r.resized
        << " resized, " << r.swapped << " swapped\n";
    if (!r.alignment_exact) out << "  " << kApproximateAlignment << "\n";
    size_t shown = 0;
    for (const auto& d : r.differences) {
        if (++shown > 50) {
            out << "  ... " << r.differences.size() - 50 << " more\n";
            break;
        }
        out << "  " << d << "\n";
    }
    if (r.scope != DiffScope::Ops) {
        out << "time: " << r.overall.count << " matched ops, median |error| " << percent_text(r.overall.median_abs_error)
            << ", total predicted " << ms(r.overall.pred_ms) << " ms against measured " << ms(r.overall.meas_ms) << " ms\n";
        if (r.step_comm_meas_ms > 0)
            out << "communication per step (median over steps): predicted " << ms(r.step_comm_pred_ms) << " ms, measured "
                << ms(r.step_comm_meas_ms) << " ms (median error " << percent_text(r.step_comm_error) << ")\n";
        stats_table(out, "by op", r.by_op, false);
        stats_table(out, "by phase", r.by_phase, false);
        stats_table(out, "by step", r.by_step, false);
        if (r.repeats.usable()) write_repeat_text(out, r.repeats);
    }
    out << "\nverdict: " << r.verdict() << " (" << verdict_reason(r) << ")\n";
}

void write_diff_markdown(std::ostream& out, const DiffReport& r) {
    out << "## zerosim validate\n\n- predicted: `" << r.pred_name << "` (" << log_format_name(r.pred_format) << ", " << r.pred_ops
        << " ops)\n- measured: `" << r.meas_name << "` (" << log_format_name(r.meas_format) << ", " << r.meas_ops << " ops)\n"
        << "- structure: " << r.matched << " matched, " << r.missing << " missing, " << r.extra << " extra, " << r.resized
        << " resized, " << r.swapped << " swapped\n";
    if (!r.alignment_exact) out << "  - " << kApproximateAlignment << "\n";
    for (const auto& d : r.differences) out << "  - " << d << "\n";
    if (r.scope != DiffScope::Ops) {
        out << "- time: median |error| " << percent_text(r.overall.median_abs_error) << " over " << r.overall.count << " ops\n";
        stats_table(out, "by op", r.by_op, true);
        stats_table(out, "by phase", r.by_phase, true);
        stats_table(out, "by step", r.by_step, true);
        if (r.repeats.usable()) write_repeat_markdown(out, r.repeats);
    }
    if (!r.mismatch.empty())
        out << "\n**verdict: FAIL** (" << r.mismatch << ")\n";
    else
        out << "\n**verdict: " << r.verdict() << "** (tolerance " << percent_text(r.tolerance) << ")\n";
}

void write_diff_row(std::ostream& out, const DiffReport& r) {
    char buf[512];
    const RepeatReport& q = r.repeats;
    const bool rep = q.usable(), rep_steps = rep && q.step_meas_ms > 0;   // steps of two repeats or more
    std::snprintf(buf, sizeof buf, "%zu\t%zu\t%zu\t%zu\t%zu\t%.4f\t%.3f\t%.3f\t%.4f\t%s\n", r.matched, r.missing, r.extra,
                  r.resized, r.swapped, rep ? q.error : r.overall.median_abs_error, rep_steps ? q.step_pred_ms : r.step_comm_pred_ms,
                  rep_steps ? q.step_meas_ms : r.step_comm_meas_ms, rep_steps ? q.step_error : r.step_comm_error, r.verdict().c_str());
    std::string line = buf;
    if (r.scope != DiffScope::Ops) {
        // Infinite upper bounds (a floor as large as the median) print as inf.
        std::snprintf(buf, sizeof buf, "\t%zu\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%zu", rep ? q.repeats : 0,
                      rep ? q.error_lo : 0.0, rep ? q.error_hi : 0.0, rep ? q.floor : 0.0, rep ? q.mad : 0.0, rep ? q.step_lo : 0.0,
                      rep ? q.step_hi : 0.0, rep ? q.step_floor : 0.0, rep ? q.repeats_needed : 0);
        line.insert(line.size() - 1, buf);
        // The prediction's standard error, only when validate was given one (--prediction-error).
        if (rep && q.prediction_error_given) {
            // and what would settle it with the calibration grown too (zeros when not needed).
            std::snprintf(buf, sizeof buf, "\t%.4f\t%zu\t%zu\t%zu", q.pred_se, q.joint_repeats_needed, q.calibration_rounds,
                          q.calibration_rounds_needed);
            line.insert(line.size() - 1, buf);
        }
    }
    if (!r.mismatch.empty()) line.insert(line.size() - 1, "\t" + r.mismatch);
    out << line;
}

namespace validate_detail {

nlohmann::ordered_json diff_json(const DiffReport& r) {
    nlohmann::ordered_json j;
    j["predicted"] = {{"file", r.pred_name}, {"format", log_format_name(r.pred_format)}, {"ops", r.pred_ops}};
    j["measured"] = {{"file", r.meas_name}, {"format", log_format_name(r.meas_format)}, {"ops", r.meas_ops}};
    j["structure"] = {{"matched", r.matched}, {"missing", r.missing}, {"extra", r.extra}, {"resized", r.resized},
                      {"swapped", r.swapped}, {"identical", r.structure_ok}};
    if (!r.alignment_exact) j["structure"]["approximate"] = kApproximateAlignment;
    j["differences"] = r.differences;
    auto rows = [](const std::vector<TimeStats>& v) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (const auto& s : v)
            a.push_back({{"key", s.key}, {"ops", s.count}, {"predicted_ms", s.pred_ms}, {"measured_ms", s.meas_ms},
                         {"median_abs_error", s.median_abs_error}});
        return a;
    };
    j["time"] = {{"ops", r.overall.count}, {"median_abs_error", r.overall.median_abs_error}, {"predicted_ms", r.overall.pred_ms},
                 {"measured_ms", r.overall.meas_ms}, {"by_op", rows(r.by_op)}, {"by_phase", rows(r.by_phase)},
                 {"by_step", rows(r.by_step)}};
    j["step_communication"] = {{"predicted_ms", r.step_comm_pred_ms}, {"measured_ms", r.step_comm_meas_ms},
                               {"median_abs_error", r.step_comm_error}};
    j["tolerance"] = r.tolerance;
    if (r.repeats.usable()) {
        const RepeatReport& q = r.repeats;
        auto num = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
        nlohmann::ordered_json keys = nlohmann::ordered_json::array();
        for (const auto& k : q.keys)
            keys.push_back({{"op", k.op}, {"bytes", k.bytes}, {"ops", k.ops}, {"repeats", k.repeats}, {"predicted_ms", k.pred_ms},
                            {"measured_ms", k.meas_ms}, {"error", k.error}, {"error_interval", {num(k.error_lo), num(k.error_hi)}},
                            {"noise_floor", k.floor}, {"op_spread", k.mad}});
        j["repeats"] = {{"logs", q.logs}, {"repeats", q.repeats}, {"unit", q.unit}, {"keys", keys},
                        {"ops_without_repeats", q.ops_without_repeats}, {"op_error", q.error},
                        {"op_error_interval", {num(q.error_lo), num(q.error_hi)}}, {"noise_floor", q.floor}, {"op_spread", q.mad},
                        {"step_error", q.step_error}, {"step_error_interval", {num(q.step_lo), num(q.step_hi)}},
                        {"step_noise_floor", q.step_floor}, {"repeats_needed", q.repeats_needed},
                        {"meaning", repeat_verdict_meaning(q)}};
        if (q.prediction_error_given) {
            j["repeats"]["prediction_se"] = q.pred_se;
            j["repeats"]["needs_calibration"] = q.needs_calibration;
            j["repeats"]["joint_repeats_needed"] = q.joint_repeats_needed;
            j["repeats"]["calibration_rounds"] = q.calibration_rounds;
            j["repeats"]["calibration_rounds_needed"] = q.calibration_rounds_needed;
            for (size_t i = 0; i < q.keys.size(); ++i) j["repeats"]["keys"][i]["prediction_se"] = q.keys[i].pred_se;
        }
    }
    std::string v = r.verdict();
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    j["verdict"] = v;
    if (!r.mismatch.empty()) j["mismatch"] = r.mismatch;
    return j;
}

}  // namespace validate_detail

void write_diff_json(std::ostream& out, const DiffReport& r) { out << validate_detail::diff_json(r).dump(1) << '\n'; }

}  // namespace zerosim
