// How big a schedule will be, from the inputs alone, before any of it is built: an upper bound on
// its op count and an estimate of its memory. build_schedule refuses a schedule past the limits in
// ScheduleOptions (the front ends' --max-ops and --max-memory), so a typo such as
// gradient_accumulation_steps 1e6 or --steps 2147483647 is a one-line error in milliseconds, not
// minutes of work ending in "out of memory".
#pragma once

#include <cstdint>

#include "core/error.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"

namespace zerosim {

struct ScheduleOptions;
struct Op;
struct ScheduleMeta;

// The default limits: a few million ops (the largest schedules the examples build have a few
// hundred thousand) and the memory they take.
constexpr int64_t kDefaultMaxOps = 5'000'000;
constexpr int64_t kDefaultMaxScheduleBytes = int64_t{4} << 30;
// How far past a limit the estimate may go and the schedule still be built and counted (see
// check_schedule_size): the estimate's overshoot on real models is up to several times.
constexpr int64_t kEstimateSlack = 16;

struct ScheduleSize {
    int64_t init_ops = 0;        // engine start (broadcasts, stage 3's set-up), once
    int64_t per_step_ops = 0;    // every micro-step of one optimizer step and the step itself
    int64_t ops = 0;             // init_ops + steps x per_step_ops (+ stage 3's trace check): never below the real count
    int64_t bytes = 0;           // about what the ops take in memory (Op records, their parameter lists)
};

// Saturating at INT64_MAX: the inputs may be absurd, the arithmetic never wraps.
ScheduleSize estimate_schedule_size(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt, int64_t grad_accum);

// The estimate against opt.max_ops and opt.max_bytes: an Error naming the flag that raises the limit,
// with the figures, or nothing. Under ScheduleOptions::count_while_building only an estimate past
// kEstimateSlack times a limit is refused here (the builder counts the rest exactly): a typo such as
// gradient_accumulation_steps 1e6 still fails in milliseconds, while a schedule whose estimate
// overshoots its real size (6.4x for Llama-2-70B's stage 3 at 200 micro-steps) is built and counted.
Status check_schedule_size(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt, int64_t grad_accum);

// What one op takes in memory by the estimate above (a record, its names, 24 bytes per listed
// parameter or segment), to sum over a schedule counted op by op (schedule/stream.hpp).
int64_t op_memory_estimate(const Op& op);
// The same refusals for a schedule counted exactly (no "up to"): `params` the parameters it lists.
Status check_counted_size(int64_t ops, int64_t bytes, size_t params, const ScheduleMeta& meta, const ScheduleOptions& opt);
// The refusal of a schedule still being built (ScheduleOptions::count_while_building) once the ops
// built so far, up to the end of step `step`'s micro-step `micro`, pass a limit: "more than".
Status check_building_size(int64_t ops, int64_t bytes, size_t params, int step, int micro, const ScheduleMeta& meta,
                           const ScheduleOptions& opt);

}  // namespace zerosim
