// The ZeRO executor: one rank's real ZeRO state, driven op by op by the schedule IR.
//
// Nothing here decides what ZeRO sends: every collective is an IR op, issued in IR order with the
// IR's size, dtype and root. What the executor adds is the data: which bytes go into each buffer
// (the op's payload kind, laid out as the schedule's partition layout says) and where the results
// go (the rank's own partition). docs/runtime.md describes the state per stage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/error.hpp"
#include "executor/memory.hpp"
#include "executor/options.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

// What happened to one op on this rank.
struct OpRecord {
    double start_us = 0.0;     // wall clock (system_clock), microseconds since the Unix epoch
    double end_us = 0.0;
    // Collectives: microseconds inside the backend call alone (after a fence with --sync-each-op),
    // which is what a comms logger times; start/end also cover staging and result checks.
    double call_us = -1.0;
    int64_t checked = 0;       // elements compared with an independently computed expectation
    int64_t wrong = 0;         // of those, how many were outside tolerance
    double flops_run = 0.0;    // compute: FLOPs of the GEMMs actually run
    const char* check = "unchecked";   // ok | wrong | unchecked | none (no output on this rank)
};

struct RankResult {
    std::vector<OpRecord> ops;            // one per IR op
    MemoryTracker* memory = nullptr;
    int64_t peak_rss = 0;
    int64_t wrong_total = 0;
};

// What each op waits for before it runs, besides its thread's order (scheduling.cpp explains the
// threads): the IR's deps and stream order, nothing of the executor's own.
std::vector<std::vector<int64_t>> executor_wait_plan(const zerosim::Schedule& s);

// Executes the schedule on this rank. The schedule must pass zerosim::check_schedule and the
// options check_exec_options; throws std::runtime_error on a broken invariant.
// ZeRO++ qgZ shapes the runtime cannot run (scales that do not split evenly over its
// all_to_alls): one sentence naming the gradient, or nullopt (quantized.cpp).
std::optional<std::string> quantized_schedule_problem(const zerosim::Schedule& s);

// Whether the executor has a handler for ops of this payload kind (its handler table,
// runtime/executor/handlers.cpp).
bool executor_serves(zerosim::Payload p);

RankResult execute_schedule(Backend& be, const zerosim::Schedule& s, const ExecOptions& opt, MemoryTracker& mem);

// Where each rank's fp32 master elements live (for --dump-weights readers and tests):
// records of {int32 param, int64 offset, int64 count, float[count]}, little-endian.
std::string dump_path(const std::string& prefix, int rank);
// Reads the dumps of ranks 0..world-1 into full per-parameter vectors; elements nobody wrote
// stay NaN.
zerosim::Result<std::vector<std::vector<float>>> read_weight_dumps(const std::string& prefix, int world,
                                                                   const std::vector<zerosim::ScheduleParam>& params);

}  // namespace zerorun
