#include "validate/phase_times.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "stats.hpp"
#include "validate/noise.hpp"

namespace zerosim {

namespace {

using validate_detail::median;
using validate_detail::percent_text;

// The log's micro-step lines grouped by step: the lines before each global timer line are its
// step's (gradient accumulation); without global lines each micro line is a step.
std::vector<std::vector<const WallClockMicroStep*>> micro_by_step(const WallClockLog& log) {
    std::vector<std::vector<const WallClockMicroStep*>> steps;
    if (log.steps.empty()) {
        for (const auto& m : log.micro) steps.push_back({&m});
        return steps;
    }
    size_t g = 0;
    std::vector<const WallClockMicroStep*> cur;
    for (const auto& m : log.micro) {
        while (g < log.steps.size() && log.steps[g].line < m.line) {
            if (!cur.empty()) steps.push_back(cur);
            cur.clear();
            ++g;
        }
        cur.push_back(&m);
    }
    if (!cur.empty()) steps.push_back(cur);
    return steps;
}

// Per step, the mean over its micro steps of one timer; empty if a micro step lacks it.
std::vector<double> micro_series(const WallClockLog& log, double WallClockMicroStep::*field) {
    std::vector<double> out;
    for (const auto& step : micro_by_step(log)) {
        double sum = 0;
        for (const auto* m : step) {
            if (m->*field < 0) return {};
            sum += m->*field;
        }
        out.push_back(sum / static_cast<double>(step.size()));
    }
    return out;
}

std::vector<double> step_series(const WallClockLog& log, double WallClockStep::*field) {
    std::vector<double> out;
    for (const auto& s : log.steps) {
        if (s.*field < 0) return {};
        out.push_back(s.*field);
    }
    return out;
}

// The values after the first (warm-up), unless it is the only one.
std::vector<double> after_warmup(std::vector<double> v) {
    if (v.size() >= 2) v.erase(v.begin());
    return v;
}

std::string fixed(double v, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

// One quantity judged: `meas` the measured values (repeats), `resolution` the unit they are
// printed to.
PhaseRow judge(const std::string& quantity, const std::string& unit, double pred, const std::vector<double>& meas,
               double resolution, double tolerance) {
    PhaseRow r;
    r.quantity = quantity;
    r.unit = unit;
    r.pred = pred;
    r.meas = median(meas);
    r.repeats = meas.size();
    bool zero = pred <= 0;
    for (double m : meas) zero = zero || m <= 0;
    if (zero) {
        r.note = "0 on one side: not judged";
        return r;
    }
    const size_t n = meas.size();
    double mean = 0;
    for (double m : meas) mean += std::log(pred / m);
    mean /= static_cast<double>(n);
    const double floor = 0.5 * resolution / r.meas;   // the printed value's rounding, relative
    double half = floor;
    if (n >= 2) {
        double ss = 0;
        for (double m : meas) ss += (std::log(pred / m) - mean) * (std::log(pred / m) - mean);
        const double se = std::sqrt(ss / static_cast<double>(n - 1) / static_cast<double>(n));
        half = student_t975(n - 1) * std::max(se, floor);
    } else {
        r.note = "one value: its interval is its rounding";
    }
    r.error = std::exp(mean) - 1;
    r.lo = std::exp(mean - half) - 1;
    r.hi = std::exp(mean + half) - 1;
    r.verdict = r.lo >= -tolerance && r.hi <= tolerance ? "PASS" : (r.hi < -tolerance || r.lo > tolerance) ? "FAIL" : "INCONCLUSIVE";
    return r;
}

// The timer rows: micro-step timers (per step, the mean of its micro steps) and step timers.
void add_timer_rows(PhaseReport& rep, const WallClockLog& pred, const WallClockLog& meas) {
    auto add = [&](const std::string& q, const std::vector<double>& p, const std::vector<double>& m) {
        if (p.empty() || m.empty()) return;
        rep.rows.push_back(judge(q, "ms", median(after_warmup(p)), after_warmup(m), 0.01, rep.tolerance));
    };
    const struct {
        const char* name;
        double WallClockMicroStep::*field;
    } micro[] = {{"fwd_microstep", &WallClockMicroStep::fwd_ms},
                 {"bwd_microstep", &WallClockMicroStep::bwd_ms},
                 {"bwd_inner_microstep", &WallClockMicroStep::bwd_inner_ms},
                 {"bwd_allreduce_microstep", &WallClockMicroStep::bwd_allreduce_ms},
                 {"step_microstep", &WallClockMicroStep::step_ms}};
    for (const auto& f : micro) add(f.name, micro_series(pred, f.field), micro_series(meas, f.field));
    const struct {
        const char* name;
        double WallClockStep::*field;
    } global[] = {{"fwd", &WallClockStep::fwd_ms},
                  {"bwd", &WallClockStep::bwd_ms},
                  {"bwd_inner", &WallClockStep::bwd_inner_ms},
                  {"bwd_allreduce", &WallClockStep::bwd_allreduce_ms},
                  {"step", &WallClockStep::step_ms}};
    for (const auto& f : global) add(f.name, step_series(pred, f.field), step_series(meas, f.field));
    if (!rep.rows.empty() && !meas.micro.empty()) rep.warmup_steps = micro_by_step(meas).size() >= 2 ? 1 : 0;
}

// Throughput lines: from the third step on already (no warm-up to leave out); samples per second
// of each, and the peak memory of the last (torch's peak since the start).
void add_throughput_rows(PhaseReport& rep, const WallClockLog& pred, const WallClockLog& meas) {
    if (!pred.throughput.empty() && !meas.throughput.empty()) {
        std::vector<double> p, m;
        for (const auto& t : pred.throughput) p.push_back(t.samples_per_s);
        for (const auto& t : meas.throughput) m.push_back(t.samples_per_s);
        rep.rows.push_back(judge("CurrSamplesPerSec", "samples/s", median(p), m, 0.0, rep.tolerance));
        rep.rows.push_back(judge("MaxMemAllocated", "GiB", pred.throughput.back().max_mem_allocated_gib,
                                 {meas.throughput.back().max_mem_allocated_gib}, 0.01, rep.tolerance));
    }
    if (!pred.pipe_progress.empty() && !meas.pipe_progress.empty()) {
        std::vector<double> p, m, pi, mi;
        for (const auto& t : pred.pipe_progress) p.push_back(t.samples_per_s), pi.push_back(t.iter_s);
        for (const auto& t : meas.pipe_progress) m.push_back(t.samples_per_s), mi.push_back(t.iter_s);
        if (meas.pipe_progress.front().step == 1) m = after_warmup(m), mi = after_warmup(mi);   // a line per step: the first warms up
        rep.rows.push_back(judge("iter time", "s", median(pi), mi, 0.001, rep.tolerance));
        rep.rows.push_back(judge("samples/sec", "samples/s", median(p), m, 0.001, rep.tolerance));
    } else if (!meas.pipe_progress.empty()) {
        rep.notes.push_back(meas.source + " has the pipeline engine's progress lines and the prediction none: predict rank 0 "
                                          "with the run's config (its steps_per_print) and layout");
    }
    if (!meas.throughput.empty() && pred.throughput.empty()) {
        rep.notes.push_back(meas.source + " has steps_per_print's throughput lines and the prediction none: predict with the "
                                          "run's config (its steps_per_print) and at least 3 steps");
    }
}

// The profiler's one step against the prediction's step of that index (else its median).
void add_profiler_rows(PhaseReport& rep, const WallClockLog& pred, const WallClockLog& meas) {
    if (meas.profiles.empty()) return;
    if (pred.steps.empty()) {
        rep.notes.push_back(meas.source + " has a flops profiler summary and the prediction no step timers: predict with the "
                                          "run's config (wall_clock_breakdown or flops_profiler enabled)");
        return;
    }
    const FlopsProfile& prof = meas.profiles.front();   // the profile step's
    auto at = [&](double WallClockStep::*field) -> double {
        auto s = step_series(pred, field);
        if (s.empty()) return -1;
        if (prof.step >= 0 && static_cast<size_t>(prof.step) < s.size()) return s[static_cast<size_t>(prof.step)];
        return median(after_warmup(s));
    };
    const struct {
        const char* name;
        double value;
        double WallClockStep::*field;
    } lat[] = {{"profiler fwd latency", prof.fwd_ms, &WallClockStep::fwd_ms},
               {"profiler bwd latency", prof.bwd_ms, &WallClockStep::bwd_ms},
               {"profiler step latency", prof.step_ms, &WallClockStep::step_ms}};
    for (const auto& l : lat) {
        const double p = at(l.field);
        if (l.value < 0 || p < 0) continue;
        // print_model_profile writes 2 decimals of the unit it picks (s, ms, us).
        const double unit_ms = l.value >= 1000 ? 1000 : l.value >= 1 ? 1 : 1e-3;
        rep.rows.push_back(judge(l.name, "ms", p, {l.value}, 0.01 * unit_ms, rep.tolerance));
    }
}

}  // namespace

Result<PhaseReport> compare_phases(const WallClockLog& pred, const WallClockLog& meas, double tolerance) {
    PhaseReport rep;
    rep.pred_name = pred.source;
    rep.meas_name = meas.source;
    rep.tolerance = tolerance;
    add_timer_rows(rep, pred, meas);
    add_throughput_rows(rep, pred, meas);
    add_profiler_rows(rep, pred, meas);
    if (!meas.other_timers.empty()) {
        std::string names;
        for (const auto& n : meas.other_timers) names += (names.empty() ? "" : ", ") + n;
        rep.notes.push_back("timers not compared (zerosim predicts the engine's fwd/bwd/step timers only): " + names);
    }
    if (rep.rows.empty()) {
        auto holds = [](const WallClockLog& l) {
            std::string s;
            if (!l.micro.empty()) s += std::to_string(l.micro.size()) + " micro-step timer lines, ";
            if (!l.steps.empty()) s += std::to_string(l.steps.size()) + " step timer lines, ";
            if (!l.throughput.empty()) s += std::to_string(l.throughput.size()) + " throughput lines, ";
            if (!l.pipe_progress.empty()) s += std::to_string(l.pipe_progress.size()) + " pipeline progress lines, ";
            if (!l.profiles.empty()) s += std::to_string(l.profiles.size()) + " flops profiler summaries, ";
            return s.empty() ? std::string("none of DeepSpeed's own figures") : s.substr(0, s.size() - 2);
        };
        return Error{meas.source, "", "nothing to compare: it holds " + holds(meas) + "; the prediction " + pred.source +
                                          " holds " + holds(pred) +
                                          " (predict with the run's config: wall_clock_breakdown true for timer lines, "
                                          "steps_per_print and 3 steps or more for throughput lines)"};
    }
    bool any_fail = false, all_pass = true, judged = false;
    for (const auto& r : rep.rows) {
        if (r.verdict.empty()) continue;
        judged = true;
        any_fail = any_fail || r.verdict == "FAIL";
        all_pass = all_pass && r.verdict == "PASS";
    }
    rep.verdict = !judged ? "INCONCLUSIVE" : any_fail ? "FAIL" : all_pass ? "PASS" : "INCONCLUSIVE";
    return rep;
}

namespace {

std::string signed_percent(double f) { return (f >= 0 ? "+" : "") + percent_text(f); }

std::string value_text(const PhaseRow& r, double v) { return fixed(v, r.unit == "GiB" || r.unit == "ms" ? 2 : 3); }

std::string meaning(const PhaseReport& r) {
    const std::string tol = "+-" + percent_text(r.tolerance);
    if (r.verdict == "PASS") return "every judged quantity's 95% interval lies within " + tol;
    if (r.verdict == "FAIL") return "at least one quantity's 95% interval lies wholly outside " + tol + ": the prediction is off, not the measurement's noise";
    return "some interval straddles " + tol + ": more steps would settle it";
}

}  // namespace

void write_phase_text(std::ostream& out, const PhaseReport& r) {
    out << "phases: " << r.pred_name << " (predicted) against " << r.meas_name << " (measured): DeepSpeed's own figures";
    if (r.warmup_steps) out << "; the first measured step left out (warm-up)";
    out << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-28s %12s %12s %6s %9s  %-20s %s\n", "quantity", "predicted", "measured", "steps", "error",
                  "95% interval", "verdict");
    out << line;
    for (const auto& row : r.rows) {
        const std::string q = row.quantity + " (" + row.unit + ")";
        const std::string iv = row.verdict.empty() ? "" : "[" + signed_percent(row.lo) + ", " + signed_percent(row.hi) + "]";
        std::snprintf(line, sizeof line, "%-28s %12s %12s %6zu %9s  %-20s %s", q.c_str(), value_text(row, row.pred).c_str(),
                      value_text(row, row.meas).c_str(), row.repeats, row.verdict.empty() ? "-" : signed_percent(row.error).c_str(),
                      iv.c_str(), row.verdict.empty() ? "not judged" : row.verdict.c_str());
        out << line;
        if (!row.note.empty()) out << "  (" << row.note << ")";
        out << "\n";
    }
    for (const auto& n : r.notes) out << "note: " << n << "\n";
    out << "verdict: " << r.verdict << ": " << meaning(r) << "\n";
}

void write_phase_markdown(std::ostream& out, const PhaseReport& r) {
    out << "### Phases: `" << r.pred_name << "` against `" << r.meas_name << "`\n\n";
    out << "| quantity | predicted | measured | steps | error | 95% interval | verdict |\n|---|---:|---:|---:|---:|---|---|\n";
    for (const auto& row : r.rows)
        out << "| " << row.quantity << " (" << row.unit << ") | " << value_text(row, row.pred) << " | " << value_text(row, row.meas)
            << " | " << row.repeats << " | " << (row.verdict.empty() ? "-" : signed_percent(row.error)) << " | "
            << (row.verdict.empty() ? "" : "[" + signed_percent(row.lo) + ", " + signed_percent(row.hi) + "]") << " | "
            << (row.verdict.empty() ? "not judged: " + row.note : row.verdict) << " |\n";
    for (const auto& n : r.notes) out << "\nNote: " << n << "\n";
    out << "\n**Verdict: " << r.verdict << "** (" << meaning(r) << ")\n";
}

void write_phase_json(std::ostream& out, const PhaseReport& r) {
    nlohmann::ordered_json j;
    j["format"] = "zerosim-phase-validation";
    j["predicted"] = r.pred_name;
    j["measured"] = r.meas_name;
    j["tolerance"] = r.tolerance;
    j["warmup_steps"] = r.warmup_steps;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& row : r.rows) {
        nlohmann::ordered_json o = {{"quantity", row.quantity}, {"unit", row.unit}, {"predicted", row.pred},
                                    {"measured", row.meas},     {"repeats", row.repeats}};
        if (!row.verdict.empty()) {
            o["error"] = row.error;
            o["error_lo"] = row.lo;
            o["error_hi"] = row.hi;
        }
        o["verdict"] = row.verdict.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(row.verdict);
        if (!row.note.empty()) o["note"] = row.note;
        rows.push_back(std::move(o));
    }
    j["rows"] = rows;
    j["notes"] = r.notes;
    j["verdict"] = r.verdict;
    out << j.dump(2) << "\n";
}

void write_phase_row(std::ostream& out, const PhaseReport& r) {
    size_t judged = 0;
    double worst = 0;
    for (const auto& row : r.rows)
        if (!row.verdict.empty()) ++judged, worst = std::max(worst, std::fabs(row.error));
    out << r.verdict << "\t" << judged << " quantities\tlargest |error| " << percent_text(worst) << "\t" << r.pred_name << "\t"
        << r.meas_name << "\n";
}

}  // namespace zerosim
