// A long run's timing as its template's, repeated by period (prediction/timed_stream.hpp).
#include "prediction/timed_stream.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zerosim {

namespace {

// Two times the same: SimGrid's clock moves in doubles, and a step moved by T adds T's rounding
// (about 1e-12 s at an hour of run). A nanosecond is below every figure the writers print but the
// CSV's last digit, and a thousand times that rounding.
constexpr double kSameTime = 1e-9;

bool same(double a, double b) { return std::fabs(a - b) <= kSameTime; }

OpTiming moved(OpTiming t, double by) {
    t.start_s += by;
    t.end_s += by;
    return t;
}

// Whether op j + n (one step later) is timed as op j moved by T.
bool op_repeats(const Prediction& p, size_t j, size_t n, double T) {
    const OpTiming &a = p.ops[j], &b = p.ops[j + n];
    if (a.simulated != b.simulated || a.algorithm != b.algorithm || a.protocol != b.protocol) return false;
    if (!same(a.start_s + T, b.start_s) || !same(a.end_s + T, b.end_s) || !same(a.wait_s, b.wait_s)) return false;
    return p.issued_s.empty() || same(p.issued_s[j] + T, p.issued_s[j + n]);
}

bool step_figures_repeat(const StepTiming& a, const StepTiming& b, double T) {
    return same(a.start_s + T, b.start_s) && same(a.end_s + T, b.end_s) && same(a.compute_s, b.compute_s) &&
           same(a.comm_s, b.comm_s) && same(a.exposed_comm_s, b.exposed_comm_s) &&
           a.gathered_peak_bytes == b.gathered_peak_bytes && a.gathered_ahead_peak_bytes == b.gathered_ahead_peak_bytes &&
           same(a.allocator_stall_s, b.allocator_stall_s);
}

// Template step k's StepTiming (the engine keeps one per step, in step order from 0).
const StepTiming* step_timing(const Prediction& p, int k) {
    for (const StepTiming& st : p.steps)
        if (st.step == k) return &st;
    return nullptr;
}

// Whether template step k + 1 is step k moved by T, and starts after every op of step k ended.
bool step_repeats(const ScheduleStream& s, const Prediction& p, int k, double T) {
    const auto from = static_cast<size_t>(s.template_step_start(k)), to = static_cast<size_t>(s.template_step_start(k + 1));
    const size_t n = to - from;
    for (size_t j = from; j < to; ++j)
        if (!op_repeats(p, j, n, T)) return false;
    const StepTiming *a = step_timing(p, k), *b = step_timing(p, k + 1);
    return a && b && step_figures_repeat(*a, *b, T);
}

// Every op of template step k + 1 starts once every op of step k has ended: the steps are apart,
// so a step's timing is not the next step's doing.
bool steps_apart(const ScheduleStream& s, const Prediction& p, int k) {
    double end = 0, start = INFINITY;
    for (int64_t j = s.template_step_start(k); j < s.template_step_start(k + 1); ++j)
        end = std::max(end, p.ops[static_cast<size_t>(j)].end_s);
    for (int64_t j = s.template_step_start(k + 1); j < s.template_step_start(k + 2); ++j)
        start = std::min(start, p.ops[static_cast<size_t>(j)].start_s);
    return start >= end - kSameTime;
}

struct Settled {
    int from = 0;      // 0: not settled
    double period_s = 0;
};

// The first template step from which each step repeats the one before, by one period, through the
// template's last repeated step (kTemplateSteps - 2), found from the end.
Settled settled(const ScheduleStream& s, const Prediction& p) {
    const int last = kTemplateSteps - 2;
    const double T = p.ops[static_cast<size_t>(s.template_step_start(last))].start_s -
                     p.ops[static_cast<size_t>(s.template_step_start(last - 1))].start_s;
    if (!(T > 0) || !steps_apart(s, p, last)) return {};
    Settled out;
    for (int k = last - 1; k >= s.repeat_step(); --k) {
        if (!step_repeats(s, p, k, T) || !steps_apart(s, p, k)) break;
        out = {k, T};
    }
    return out;
}

// The run's step figures and totals from the template's: steps before `from` as timed, each
// later repeated step as step `from` moved, the last as the template's last moved.
Prediction run_figures(const Prediction& p, int from, double T, int steps) {
    Prediction run = p;
    run.ops.clear();
    run.steps.clear();
    const int extra = steps - kTemplateSteps;   // repeated steps the template lacks
    for (const StepTiming& st : p.steps)
        if (st.step < from) run.steps.push_back(st);
    const StepTiming &settled = *step_timing(p, from), &last = *step_timing(p, kTemplateSteps - 1);
    for (int k = from; k + 1 < steps; ++k) {
        StepTiming st = settled;
        st.step = k;
        st.start_s += (k - from) * T;
        st.end_s += (k - from) * T;
        run.steps.push_back(st);
    }
    StepTiming st = last;
    st.step = steps - 1;
    st.start_s += extra * T;
    st.end_s += extra * T;
    run.steps.push_back(st);
    run.total_s = p.total_s + extra * T;
    run.allocator_stall_s = p.allocator_stall_s + extra * settled.allocator_stall_s;
    return run;
}

}  // namespace

Result<TimedStream> time_by_period(const ScheduleStream& s, const Prediction& logged, const Prediction& overlapped) {
    if (!s.repeats()) return Error{"", "--steps", "the schedule does not repeat step by step"};
    const Settled a = settled(s, logged), b = settled(s, overlapped);
    if (a.from == 0 || b.from == 0)
        return Error{"", "--steps",
                     "the template's timing has not settled by step " + std::to_string(kTemplateSteps - 2) +
                         " (a step not timed as the one before it, or steps that overlap)"};
    TimedStream t;
    t.stream = &s;
    t.logged = &logged;
    t.overlapped = &overlapped;
    t.settled_from = std::max(a.from, b.from);   // both settled by then
    t.period_logged_s = a.period_s;
    t.period_overlapped_s = b.period_s;
    t.logged_run = run_figures(logged, t.settled_from, a.period_s, s.meta().steps);
    t.overlapped_run = run_figures(overlapped, t.settled_from, b.period_s, s.meta().steps);
    return t;
}

void TimedStream::each_op(const std::function<void(const Op&, const OpTiming&, const OpTiming&)>& visit) const {
    const Schedule& held = stream->held();
    const int r = stream->repeat_step(), F = settled_from;
    stream->each_op_from([&](const Op& op, int64_t j, int moved_steps) {
        const int template_step = held.ops[static_cast<size_t>(j)].step;
        if (moved_steps == 0 && template_step < r) {   // the engine start and the steps before the repeat
            visit(op, logged->ops[static_cast<size_t>(j)], overlapped->ops[static_cast<size_t>(j)]);
            return;
        }
        int64_t source = j;   // the template op timed as this one, moved by `periods` periods
        int periods = moved_steps;
        if (template_step == r) {   // a repeated step: step op.step of the run
            const int64_t offset = j - stream->template_step_start(r);
            const int k = op.step < F ? op.step : F;
            source = stream->template_step_start(k) + offset;
            periods = op.step - k;
        }
        const auto at = static_cast<size_t>(source);
        visit(op, moved(logged->ops[at], periods * period_logged_s), moved(overlapped->ops[at], periods * period_overlapped_s));
    });
}

}  // namespace zerosim
