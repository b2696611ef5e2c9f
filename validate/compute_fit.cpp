#include "validate/compute_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "stats.hpp"
#include "timing/engine.hpp"
#include "timing/phase_spans.hpp"

namespace zerosim {

namespace {

struct Spans {
    double fwd_ms = 0, bwd_ms = 0, step_ms = 0;
};

// What the wall-clock timers would read (timing/phase_spans.hpp) in the last step: its first micro
// step's forward and backward inner part (loss.backward(), which the fit compares with
// bwd_inner_microstep where the log has it), and its optimizer step.
Result<Spans> predicted_spans(const Schedule& s, const Topology& t) {
    auto p = simulate(s, t, TimingMode::Overlapped);
    if (!p) return p.error();
    const int last = s.meta.steps - 1;
    Spans out;
    bool found = false;
    for (const MicroStepSpans& m : micro_step_spans(s, p.value())) {
        if (m.step != last) continue;
        if (m.micro == 0 && m.fwd_ms > 0 && m.bwd_inner_ms > 0) out.fwd_ms = m.fwd_ms, out.bwd_ms = m.bwd_inner_ms, found = true;
        if (m.last_micro) out.step_ms = m.step_ms;
    }
    if (!found) return Error{s.meta.model_file, "", "the schedule has no forward and backward compute to compare"};
    return out;
}

struct Measured {
    std::vector<double> fwd, bwd, step;
    std::string from;
};

// The per-micro-step forward and backward (its inner part where given) and the step's optimizer
// step the log measured: its micro-step lines; else its step lines over the accumulation; else
// the flops profiler's step. The first step warms up (allocator, autotuning, the stage-3 trace):
// left out when later steps exist.
Result<Measured> measured_phases(const Schedule& s, const WallClockLog& log) {
    const size_t per_step = static_cast<size_t>(std::max<int64_t>(1, s.meta.grad_accum));
    const double gas = static_cast<double>(per_step);
    Measured m;
    if (!log.micro.empty()) {
        const size_t first = log.micro.size() > per_step ? per_step : 0;
        for (size_t i = first; i < log.micro.size(); ++i) {
            const WallClockMicroStep& w = log.micro[i];
            m.fwd.push_back(w.fwd_ms);
            m.bwd.push_back(w.bwd_inner_ms >= 0 ? w.bwd_inner_ms : w.bwd_ms);
            if ((i + 1) % per_step == 0 && w.step_ms >= 0) m.step.push_back(w.step_ms);   // the boundary's
        }
        m.from = "micro steps";
    } else if (!log.steps.empty()) {
        const size_t first = log.steps.size() > 1 ? 1 : 0;
        for (size_t i = first; i < log.steps.size(); ++i) {
            const WallClockStep& st = log.steps[i];
            if (st.fwd_ms < 0 || (st.bwd_ms < 0 && st.bwd_inner_ms < 0))
                return Error{log.source, "line " + std::to_string(st.line), "a step timer line without fwd and bwd"};
            m.fwd.push_back(st.fwd_ms / gas);
            m.bwd.push_back((st.bwd_inner_ms >= 0 ? st.bwd_inner_ms : st.bwd_ms) / gas);
            if (st.step_ms >= 0) m.step.push_back(st.step_ms);
        }
        m.from = "steps (their timers over " + std::to_string(per_step) + " micro steps)";
    } else if (!log.profiles.empty() && log.profiles.front().fwd_ms > 0 && log.profiles.front().bwd_ms > 0) {
        const FlopsProfile& p = log.profiles.front();
        m.fwd.push_back(p.fwd_ms / gas);
        m.bwd.push_back(p.bwd_ms / gas);
        if (p.step_ms >= 0) m.step.push_back(p.step_ms);
        m.from = "the flops profiler's step";
    } else {
        return Error{log.source, "", "no wall_clock_breakdown line ('time (ms) | fwd_microstep: ... | bwd_microstep: ...', or "
                                     "'time (ms) | fwd: ... | bwd: ...') and no flops profiler summary with its bwd latency; run "
                                     "DeepSpeed with \"wall_clock_breakdown\": true in its config"};
    }
    return m;
}

// Bisection on log(x) over [x_lo, x_hi] for the x at which `span(x)` equals `want` (spans fall as
// x rises); the spans at both ends returned through `at_lo`/`at_hi` when `want` lies outside them.
Result<std::optional<double>> bisect(const std::function<Result<double>(double)>& span, double want, double& at_lo, double& at_hi,
                                     double x_lo = 0.01, double x_hi = 1.0) {
    double lo = std::log(x_lo), hi = std::log(x_hi);
    auto a = span(std::exp(hi));
    if (!a) return a.error();
    auto b = span(std::exp(lo));
    if (!b) return b.error();
    at_hi = a.value(), at_lo = b.value();
    if (at_hi > want * 1.001 || at_lo < want) return std::optional<double>{};
    for (int it = 0; it < 60 && hi - lo > 1e-4; ++it) {
        const double mid = 0.5 * (lo + hi);
        auto v = span(std::exp(mid));
        if (!v) return v.error();
        (v.value() > want ? lo : hi) = mid;
    }
    return std::optional<double>{std::exp(0.5 * (lo + hi))};
}

std::string ms_text3(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

}  // namespace

Result<ComputeFit> fit_compute_efficiency(const Schedule& s, const Topology& t, const WallClockLog& log) {
    auto meas = measured_phases(s, log);
    if (!meas) return meas.error();
    ComputeFit f;
    f.from = meas->from;
    f.lines = meas->fwd.size();
    f.measured_fwd_ms = validate_detail::median(meas->fwd);
    f.measured_bwd_ms = validate_detail::median(meas->bwd);
    if (!meas->step.empty()) f.measured_step_ms = validate_detail::median(meas->step);
    if (f.measured_fwd_ms <= 0 || f.measured_bwd_ms <= 0)
        return Error{log.source, "fwd_microstep", "the forward or backward time is 0 ms: nothing to fit the compute to"};
    f.efficiency_before = f.efficiency = t.compute_efficiency;
    // The optimizer step's term: the GPU's memory-bound efficiency (Adam on the device, timed by its
    // bytes), or with offload_optimizer the host's CPU Adam rate (timing/offload_time.hpp).
    const bool cpu_adam = s.meta.offload_optimizer;
    f.step_term = cpu_adam ? "host.cpu_adam_gbs" : "gpu.memory_efficiency";
    f.mem_efficiency_before = f.mem_efficiency = cpu_adam ? t.host_cpu_adam_gbs : t.mem_efficiency;
    const double step_lo = cpu_adam ? 0.1 : 0.01, step_hi = cpu_adam ? 10000.0 : 1.0;
    auto at = [&](double ce, double me) -> Result<Spans> {
        Topology u = t;
        u.compute_efficiency = ce;
        (cpu_adam ? u.host_cpu_adam_gbs : u.mem_efficiency) = me;
        return predicted_spans(s, u);
    };
    auto before = at(f.efficiency, f.mem_efficiency);
    if (!before) return before.error();
    f.predicted_fwd_ms_before = before->fwd_ms, f.predicted_bwd_ms_before = before->bwd_ms, f.predicted_step_ms_before = before->step_ms;
    const double want = f.measured_fwd_ms + f.measured_bwd_ms;
    if (f.measured_step_ms <= 0) f.mem_note = "the log does not time the optimizer step";
    for (int round = 0; round < 2; ++round) {
        double lo_ms = 0, hi_ms = 0;
        auto ce = bisect([&](double e) -> Result<double> {
            auto sp = at(e, f.mem_efficiency);
            if (!sp) return sp.error();
            return sp->fwd_ms + sp->bwd_ms;
        }, want, lo_ms, hi_ms);
        if (!ce) return ce.error();
        if (!ce.value() && hi_ms > want * 1.001)
            return Error{log.source, "fwd_microstep", "forward + backward took " + ms_text3(want) + " ms, less than the " + ms_text3(hi_ms) + " ms " +
                                                          t.source + "'s GPU needs at its peak: the log is not of this model, config and layout"};
        if (!ce.value())
            return Error{log.source, "fwd_microstep", "forward + backward took " + ms_text3(want) +
                                                          " ms, more than even 1% of the GPU's peak explains: the log is not of "
                                                          "this model, config and layout, or something other than compute dominates"};
        f.efficiency = **ce;
        if (f.measured_step_ms <= 0) break;
        auto me = bisect([&](double e) -> Result<double> {
            auto sp = at(f.efficiency, e);
            if (!sp) return sp.error();
            return sp->step_ms;
        }, f.measured_step_ms, lo_ms, hi_ms, step_lo, step_hi);
        if (!me) return me.error();
        if (!me.value()) {
            f.mem_note = "the optimizer step took " + ms_text3(f.measured_step_ms) + " ms, outside the " + ms_text3(hi_ms) + ".." +
                         ms_text3(lo_ms) + " ms it takes here with " + f.step_term + " from " + (cpu_adam ? "10000 to 0.1" : "1 to 0.01") +
                         ": communication or the host fills it";
            f.mem_fitted = false;
            f.mem_efficiency = f.mem_efficiency_before;
            break;
        }
        f.mem_efficiency = **me;
        f.mem_fitted = true;
    }
    auto after = at(f.efficiency, f.mem_efficiency);
    if (!after) return after.error();
    f.predicted_fwd_ms = after->fwd_ms, f.predicted_bwd_ms = after->bwd_ms, f.predicted_step_ms = after->step_ms;
    return f;
}

std::string compute_fit_summary(const ComputeFit& f) {
    auto pct = [](double pred, double meas) { return 100.0 * (pred - meas) / meas; };
    char buf[1536];
    int n = std::snprintf(buf, sizeof buf,
                          "calibrate: gpu.compute_efficiency %.4g -> %.4g, from the median of %zu %s\n"
                          "  forward   measured %10.2f ms   predicted before %10.2f ms (%+.1f%%)   after %10.2f ms (%+.1f%%)\n"
                          "  backward  measured %10.2f ms   predicted before %10.2f ms (%+.1f%%)   after %10.2f ms (%+.1f%%)\n",
                          f.efficiency_before, f.efficiency, f.lines, f.from.c_str(), f.measured_fwd_ms, f.predicted_fwd_ms_before,
                          pct(f.predicted_fwd_ms_before, f.measured_fwd_ms), f.predicted_fwd_ms, pct(f.predicted_fwd_ms, f.measured_fwd_ms),
                          f.measured_bwd_ms, f.predicted_bwd_ms_before, pct(f.predicted_bwd_ms_before, f.measured_bwd_ms),
                          f.predicted_bwd_ms, pct(f.predicted_bwd_ms, f.measured_bwd_ms));
    std::string out(buf, static_cast<size_t>(std::max(0, n)));
    if (f.mem_fitted) {
        std::snprintf(buf, sizeof buf,
                      "calibrate: %s %.4g -> %.4g, from the optimizer step\n"
                      "  step      measured %10.2f ms   predicted before %10.2f ms (%+.1f%%)   after %10.2f ms (%+.1f%%)\n",
                      f.step_term.c_str(), f.mem_efficiency_before, f.mem_efficiency, f.measured_step_ms, f.predicted_step_ms_before,
                      pct(f.predicted_step_ms_before, f.measured_step_ms), f.predicted_step_ms,
                      pct(f.predicted_step_ms, f.measured_step_ms));
        out += buf;
    } else {
        out += "  not determined by the log, left as the topology has it: " + f.step_term + " (" + f.mem_note + ")\n";
    }
    return out;
}

}  // namespace zerosim
