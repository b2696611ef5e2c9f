// The one place the schedule's ordering is decided. Every op waits for the previous op on its
// device stream (issue order) and for the ops in its `deps`; nothing else orders ops. The timing
// engine and the runtime's executor both wait on wait_lists() and on nothing of their own, so
// the prediction and the real run follow the same happens-before relation.
//
// The rules that write `deps` are listed, each with the DeepSpeed v0.14.2 behaviour behind it,
// in ordering.cpp and docs/schedule-ir.md ("Ordering").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "schedule/ir.hpp"

namespace zerosim {

// The device stream an op is queued on. The IR's `compute` and `comm` streams are both
// DeepSpeed's default CUDA stream (collectives without a side stream run there, between the
// kernels around them), so they form one queue; `reduce` and `fetch` are side streams.
enum class Queue { Default = 0, Reduce = 1, Fetch = 2 };
constexpr int kQueues = 3;
Queue queue_of(Stream s);
const char* queue_name(Queue q);

// The ordering rules (ordering.cpp explains each). Replaces every op's `deps` with the
// dependencies the rules give beyond stream order, reduced to those no other wait implies,
// sorted ascending. build_schedule runs it after the generators.
void add_ordering_deps(Schedule& s);

// Each op's full wait list as the engine and the executor must honour it: its `deps` plus the
// previous op on the same queue, sorted ascending.
std::vector<std::vector<int64_t>> wait_lists(const Schedule& s);

// Happens-before of a wait plan in which every op waits (directly or not) for the previous op of
// its queue, as wait_lists() gives: for each op, the latest op of each queue it comes after
// (itself included), -1 where none.
std::vector<std::array<int64_t, kQueues>> queue_clocks(const Schedule& s, const std::vector<std::vector<int64_t>>& waits);

}  // namespace zerosim
