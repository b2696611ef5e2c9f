#include "validate/compute_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "stats.hpp"
#include "timing/engine.hpp"
#include "timing/phase_spans.hpp"

namespace zerosim {

namespace {

struct Spans {
    double fwd_ms = 0, bwd_ms = 0;
};

// What the wall-clock timers would read (timing/phase_spans.hpp) in the last step's first micro
// step: the forward, and the backward's inner part (loss.backward()), which the fit compares with
// bwd_inner_microstep where the log has it.
Result<Spans> predicted_spans(const Schedule& s, const Topology& t) {
    auto p = simulate(s, t, TimingMode::Overlapped);
    if (!p) return p.error();
    const int last = s.meta.steps - 1;
    for (const MicroStepSpans& m : micro_step_spans(s, p.value()))
        if (m.step == last && m.micro == 0 && m.fwd_ms > 0 && m.bwd_inner_ms > 0) return Spans{m.fwd_ms, m.bwd_inner_ms};
    return Error{s.meta.model_file, "", "the schedule has no forward and backward compute to compare"};
}

}  // namespace

Result<ComputeFit> fit_compute_efficiency(const Schedule& s, const Topology& t, const WallClockLog& log) {
    ComputeFit f;
    // The per-micro-step forward and backward (its inner part where given) the log measured: its
    // micro-step lines; else its step lines over the accumulation; else the flops profiler's step.
    // The first step warms up (allocator, autotuning, the stage-3 trace): left out when later
    // steps exist.
    const size_t per_step = static_cast<size_t>(std::max<int64_t>(1, s.meta.grad_accum));
    const double gas = static_cast<double>(per_step);
    std::vector<double> fwd, bwd;
    if (!log.micro.empty()) {
        const size_t first = log.micro.size() > per_step ? per_step : 0;
        for (size_t i = first; i < log.micro.size(); ++i) {
            fwd.push_back(log.micro[i].fwd_ms);
            bwd.push_back(log.micro[i].bwd_inner_ms >= 0 ? log.micro[i].bwd_inner_ms : log.micro[i].bwd_ms);
        }
        f.from = "micro steps";
    } else if (!log.steps.empty()) {
        const size_t first = log.steps.size() > 1 ? 1 : 0;
        for (size_t i = first; i < log.steps.size(); ++i) {
            const WallClockStep& st = log.steps[i];
            if (st.fwd_ms < 0 || (st.bwd_ms < 0 && st.bwd_inner_ms < 0))
                return Error{log.source, "line " + std::to_string(st.line), "a step timer line without fwd and bwd"};
            fwd.push_back(st.fwd_ms / gas);
            bwd.push_back((st.bwd_inner_ms >= 0 ? st.bwd_inner_ms : st.bwd_ms) / gas);
        }
        f.from = "steps (their timers over " + std::to_string(per_step) + " micro steps)";
    } else if (!log.profiles.empty() && log.profiles.front().fwd_ms > 0 && log.profiles.front().bwd_ms > 0) {
        fwd.push_back(log.profiles.front().fwd_ms / gas);
        bwd.push_back(log.profiles.front().bwd_ms / gas);
        f.from = "the flops profiler's step";
    } else {
        return Error{log.source, "", "no wall_clock_breakdown line ('time (ms) | fwd_microstep: ... | bwd_microstep: ...', or "
                                     "'time (ms) | fwd: ... | bwd: ...') and no flops profiler summary with its bwd latency; run "
                                     "DeepSpeed with \"wall_clock_breakdown\": true in its config"};
    }
    f.lines = fwd.size();
    f.measured_fwd_ms = validate_detail::median(fwd);
    f.measured_bwd_ms = validate_detail::median(bwd);
    if (f.measured_fwd_ms <= 0 || f.measured_bwd_ms <= 0)
        return Error{log.source, "fwd_microstep", "the forward or backward time is 0 ms: nothing to fit the compute to"};
    f.efficiency_before = t.compute_efficiency;
    auto at = [&](double e) -> Result<Spans> {
        Topology u = t;
        u.compute_efficiency = e;
        return predicted_spans(s, u);
    };
    auto before = at(t.compute_efficiency);
    if (!before) return before.error();
    f.predicted_fwd_ms_before = before->fwd_ms;
    f.predicted_bwd_ms_before = before->bwd_ms;
    const double want = f.measured_fwd_ms + f.measured_bwd_ms;
    // Bisection on log(e) over [0.01, 1]: the spans fall as the efficiency rises.
    double lo = std::log(0.01), hi = std::log(1.0);
    auto total = [&](double loge) -> Result<double> {
        auto sp = at(std::exp(loge));
        if (!sp) return sp.error();
        return sp->fwd_ms + sp->bwd_ms;
    };
    auto at_peak = total(hi);
    if (!at_peak) return at_peak.error();
    if (at_peak.value() > want * 1.001)
        return Error{log.source, "fwd_microstep", "forward + backward took " + std::to_string(want) + " ms, less than the " +
                                                      std::to_string(at_peak.value()) + " ms " + t.source +
                                                      "'s GPU needs at its peak: the log is not of this model, config and layout"};
    auto at_floor = total(lo);
    if (!at_floor) return at_floor.error();
    if (at_floor.value() < want)
        return Error{log.source, "fwd_microstep", "forward + backward took " + std::to_string(want) +
                                                      " ms, more than even 1% of the GPU's peak explains: the log is not of "
                                                      "this model, config and layout, or something other than compute dominates"};
    for (int it = 0; it < 40 && hi - lo > 1e-4; ++it) {
        const double mid = 0.5 * (lo + hi);
        auto v = total(mid);
        if (!v) return v.error();
        (v.value() > want ? lo : hi) = mid;
    }
    f.efficiency = std::exp(0.5 * (lo + hi));
    auto after = at(f.efficiency);
    if (!after) return after.error();
    f.predicted_fwd_ms = after->fwd_ms;
    f.predicted_bwd_ms = after->bwd_ms;
    return f;
}

std::string compute_fit_summary(const ComputeFit& f) {
    auto pct = [](double pred, double meas) { return 100.0 * (pred - meas) / meas; };
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "calibrate: gpu.compute_efficiency %.4g -> %.4g, from the median of %zu %s\n"
                  "  forward   measured %10.2f ms   predicted before %10.2f ms (%+.1f%%)   after %10.2f ms (%+.1f%%)\n"
                  "  backward  measured %10.2f ms   predicted before %10.2f ms (%+.1f%%)   after %10.2f ms (%+.1f%%)\n"
                  "  not determined by the log, left as the topology has them: gpu.memory_efficiency, the optimizer step's rate\n",
                  f.efficiency_before, f.efficiency, f.lines, f.from.c_str(), f.measured_fwd_ms, f.predicted_fwd_ms_before,
                  pct(f.predicted_fwd_ms_before, f.measured_fwd_ms), f.predicted_fwd_ms, pct(f.predicted_fwd_ms, f.measured_fwd_ms),
                  f.measured_bwd_ms, f.predicted_bwd_ms_before, pct(f.predicted_bwd_ms_before, f.measured_bwd_ms),
                  f.predicted_bwd_ms, pct(f.predicted_bwd_ms, f.measured_bwd_ms));
    return buf;
}

}  // namespace zerosim
