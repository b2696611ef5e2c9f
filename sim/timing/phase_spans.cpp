#include "timing/phase_spans.hpp"

#include <algorithm>

namespace zerosim {

void PhaseSpanCounter::flush() {
    if (!open_) return;
    MicroStepSpans m;
    m.step = step_;
    m.micro = micro_;
    auto ms = [](double a, double b) { return b > a ? (b - a) * 1e3 : 0.0; };
    if (fwd_first_.any()) m.fwd_ms = ms(fwd_first_.a, fwd_compute_.any() ? fwd_compute_.b : fwd_first_.b);
    if (bwd_first_.any()) {
        m.bwd_inner_ms = ms(bwd_first_.a, bwd_compute_.any() ? bwd_compute_.b : bwd_first_.b);
        m.bwd_ms = std::max(m.bwd_inner_ms, ms(bwd_first_.a, bwd_all_.b));
    }
    if (step_all_.any()) m.step_ms = ms(step_all_.a, step_all_.b), m.last_micro = true;
    m.begin_s = fwd_first_.any() ? fwd_first_.a : all_.any() ? all_.a : 0;
    m.end_s = all_.any() ? all_.b : 0;
    done_(m);
    open_ = false;
    fwd_first_ = fwd_compute_ = bwd_first_ = bwd_compute_ = bwd_all_ = step_all_ = all_ = Span{};
}

void PhaseSpanCounter::add(const Op& op, const OpTiming& t) {
    if (op.step < 0 || op.phase == Phase::Init) return;
    const bool step_op = op.phase == Phase::Step;
    if (open_ && (op.step != step_ || (!step_op && op.micro >= 0 && op.micro != micro_))) flush();
    if (!open_) {
        open_ = true;
        step_ = op.step;
        micro_ = std::max(0, op.micro);
    }
    if (!t.simulated) return;
    const bool compute_stream = op.stream == Stream::Compute;
    // A phase's start event passes on the compute stream once the work before it is done: its
    // first op may start earlier on another stream (a gather the host issued ahead).
    auto start_of = [&](const Span& phase) { return phase.any() ? t.start_s : std::max(t.start_s, compute_end_); };
    all_.take(t.start_s, t.end_s);
    if (step_op) {
        step_all_.take(start_of(step_all_), t.end_s);
    } else if (op.phase == Phase::Forward) {
        fwd_first_.take(start_of(fwd_first_), t.end_s);
        if (compute_stream) fwd_compute_.take(t.start_s, t.end_s);
    } else if (op.phase == Phase::Backward) {
        const double a = start_of(bwd_first_);
        bwd_first_.take(a, a);
        bwd_all_.take(t.start_s, t.end_s);
        if (compute_stream) bwd_compute_.take(t.start_s, t.end_s);
    }
    if (compute_stream) compute_end_ = std::max(compute_end_, t.end_s);
}

void PhaseSpanCounter::finish() { flush(); }

std::vector<MicroStepSpans> micro_step_spans(const Schedule& s, const Prediction& p) {
    std::vector<MicroStepSpans> out;
    PhaseSpanCounter c([&](const MicroStepSpans& m) { out.push_back(m); });
    for (size_t i = 0; i < s.ops.size() && i < p.ops.size(); ++i) c.add(s.ops[i], p.ops[i]);
    c.finish();
    return out;
}

}  // namespace zerosim
