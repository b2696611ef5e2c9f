// A schedule handed out one op at a time, so that a writer can write a long schedule in bounded
// memory: 1,000 steps of Llama-2-70B at 4,096 ranks are 2.3M ops, about 2 GB held whole.
//
// The generators' rules depend on the optimizer step only through its place in the run: the first
// steps (stage 3 records its trace in step 0 and settles its prefetching after it), the steps
// after them, the last one, and the fp16 steps that overflow. So a long schedule is built with
// kTemplateSteps steps; where some step r (1 to 3) is repeated by step r + 1 (every field, with
// deps and host events moved by one step's ops), the run is: the engine start and steps 0 .. r-1
// as built, step r repeated for steps r .. N-2 with its step and op ids moved, and the template's
// last step as step N-1. Schedules this does not fit (at most kTemplateSteps steps,
// --overflow-steps, no step like the next) are built whole, as before.
// docs/schedule-ir.md "Streaming" states it; tests/unit/test_schedule_stream.cpp checks every
// writer's output streamed against the whole schedule's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

// Steps the template is built with: the first, up to two more that may still differ, two alike
// to compare, and the last.
constexpr int kTemplateSteps = 6;

class ScheduleStream {
  public:
    // A schedule already built (not owned; it must outlive the stream).
    static ScheduleStream of(const Schedule& s);
    // The schedule build_schedule would build, as a template where it repeats (see above), else
    // whole. Built under the default limits at least (bounds.hpp: the work any schedule may take
    // unasked), counted while built (refused at once only by an estimate past kEstimateSlack times
    // them), then refused past opt.max_ops by its exact count, and past opt.max_bytes by what the whole schedule would take where
    // `whole_in_memory`, else by what the stream holds.
    static Result<ScheduleStream> open(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt,
                                       bool whole_in_memory = false);

    const ScheduleMeta& meta() const { return meta_; }
    const std::vector<ScheduleParam>& params() const { return held_->params; }
    int64_t op_count() const;            // exactly the ops each_op hands out
    int64_t host_event_count() const;
    bool repeats() const { return repeats_; }   // built as a template (false: held whole)
    // What the schedule would hold whole: exactly its ops, and the memory estimate of bounds.hpp
    // (op_memory_estimate) summed over them.
    struct Count {
        int64_t ops = 0;
        int64_t bytes = 0;
    };
    Count count() const;
    // Every op in issue order (ids 0, 1, ...), each built for the call and dropped after it.
    void each_op(const std::function<void(const Op&)>& visit) const;
    // Stage 3's host events in host order, their op ids as each_op numbers them.
    void each_host_event(const std::function<void(const HostEvent&)>& visit) const;

    // What the stream is built from, for a reader that works on the template and extends it (as
    // predict times the template and repeats its timing: prediction/timed_stream.hpp).
    const Schedule& held() const { return *held_; }
    int repeat_step() const { return repeat_; }   // 0 where the stream does not repeat
    // Where template step k's ops begin in held().ops (k = 0 .. kTemplateSteps; the last: the end).
    int64_t template_step_start(int k) const { return op_start_[static_cast<size_t>(k)]; }
    // each_op, with where each op comes from: its index in held().ops and the steps it was moved by.
    void each_op_from(const std::function<void(const Op&, int64_t template_op, int moved_steps)>& visit) const;

  private:
    std::shared_ptr<Schedule> owned_;
    const Schedule* held_ = nullptr;     // the template, or the whole schedule
    ScheduleMeta meta_;                  // held_->meta with the whole run's steps
    bool repeats_ = false;
    int repeat_ = 0;                     // the template step that repeats (1 .. kTemplateSteps - 3)
    int steps_ = 0;                      // the whole run's steps
    // Where each template step starts in held_->ops and held_->host (index kTemplateSteps: the end).
    std::vector<int64_t> op_start_, host_start_;
    int64_t per_step_ops() const;        // the ops of the repeating step
    friend struct StreamBuilder;
};

}  // namespace zerosim
