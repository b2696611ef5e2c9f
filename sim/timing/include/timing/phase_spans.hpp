// What DeepSpeed's wall-clock timers would read for a timed schedule: per micro step, the span of
// its forward, backward and optimizer step (formats/wall_clock_log.hpp prints them as DeepSpeed
// does). One place for the rule, used by the predicted log's timer lines and by calibrate's fit
// of the compute to a real run's lines.
//
// engine.py starts and stops each timer around forward(), backward() and step() with events on the
// compute stream (utils/timer.py SynchronizedWallClockTimer.Timer), so a phase reads from the
// first op the host issues in it to the last op the compute stream must wait for:
//   fwd        first op of the forward           .. last compute-stream op of the forward
//   bwd_inner  first op of the backward          .. last compute-stream op of the backward
//              (loss.backward(): its hooks' reductions run beside it, on their streams)
//   bwd        first op of the backward          .. last op of the backward on any stream
//              (allreduce_gradients' epilogue waits for the reduction stream)
//   step       first op of the optimizer step    .. its last op (0 off the accumulation boundary)
// where a phase's start is never before the compute stream has finished the work issued before
// it: the start event waits behind that work, even when the host ran ahead and a gather of the
// phase started early on its own stream.
// An op that takes no time on the platform is left out.
#pragma once

#include <functional>
#include <vector>

#include "schedule/ir.hpp"
#include "timing/engine.hpp"

namespace zerosim {

struct MicroStepSpans {
    int step = 0;
    int micro = 0;
    double fwd_ms = 0, bwd_inner_ms = 0, bwd_ms = 0, step_ms = 0;
    double begin_s = 0, end_s = 0;   // the micro step's first op start and last op end (forward .. step)
    bool last_micro = false;         // the step's last: it carries the optimizer step
};

// Ops fed in schedule order, micro step after micro step; each finished micro step goes to `done`
// (the last one when `finish` is called). Ops of the engine start are ignored; the optimizer
// step's ops (micro -1) belong to the step's last micro step.
class PhaseSpanCounter {
public:
    explicit PhaseSpanCounter(std::function<void(const MicroStepSpans&)> done) : done_(std::move(done)) {}
    void add(const Op& op, const OpTiming& t);
    void finish();

private:
    struct Span {
        double a = 1e300, b = -1e300;
        void take(double s, double e) { a = s < a ? s : a, b = e > b ? e : b; }
        bool any() const { return b >= a; }
    };
    void flush();
    std::function<void(const MicroStepSpans&)> done_;
    bool open_ = false;
    int step_ = 0, micro_ = 0;
    Span fwd_first_, fwd_compute_, bwd_first_, bwd_compute_, bwd_all_, step_all_, all_;
    double compute_end_ = 0;   // the last end of a compute-stream op so far
};

// Every micro step of a timed schedule.
std::vector<MicroStepSpans> micro_step_spans(const Schedule& s, const Prediction& p);

}  // namespace zerosim
