// The schedule's ordering rules, as DeepSpeed v0.14.2 synchronises its streams. Stream order
// (each op after the previous op of its queue) is implicit; every other wait is written into
// `deps` here, and only here:
//
//  O1 engine start: every training op (step >= 0) comes after the last engine-start op.
//     deepspeed.initialize returns only once _broadcast_model's broadcasts and stage 3's
//     set-up barriers (_setup_for_real_optimizer) are done; training is issued after it.
//  O2 reduction after backward: a gradient reduction waits for the last backward issued before
//     it. stage_1_and_2.py average_tensor makes the reduction stream wait for the current stream
//     (reduction_stream.wait_stream); stage3.py __add_grad_to_ipg_bucket makes
//     reduce_and_partition_stream wait for the default stream as each gradient joins the bucket;
//     without overlap_comm the reduction runs on the default stream itself.
//  O3 epilogue: an op of a later micro-step, or of the optimizer step, waits for the last
//     gradient reduction of every earlier micro-step. stage_1_and_2.py
//     independent_gradient_partition_epilogue synchronises the device with overlap_comm;
//     stage3.py's epilogue synchronises reduce_and_partition_stream, and its step makes the
//     default stream wait for it before the overflow all_reduce.
//  O4 compute after its gathers: a module's forward or backward waits for the latest gather of
//     each of its parameters. partitioned_param_coordinator.py fetch_sub_module waits on the
//     in-flight handle of each parameter of the module before the module runs. (DeepSpeed then
//     also makes the default stream wait for the whole __allgather_stream, prefetches for later
//     modules included; zerosim keeps the wait to the module's own parameters.)
//  O5 step after the gathers: an optimizer-step op waits for every gather issued before it.
//     stage3.py step starts with _partition_all_parameters, whose release_and_reset_all waits
//     on every in-flight gather before releasing the parameters.
//  O6 gathers after the step: a parameter gather waits for the last optimizer-step op before
//     it. The optimizer rewrites the partitions the gathers read (stage3.py _optimizer_step and
//     _reassign_or_swap_out_partitioned_parameters, then _post_step's all_gather of persistent
//     parameters); the next forward's fetch_sub_module gathers the updated partitions.
//  O7 the host's fetch throttle (stage 3): an op the host issues after a FetchWait host event
//     waits for the fetch ops that wait synchronised on. partitioned_param_coordinator.py
//     fetch_sub_module synchronize()s on the oldest of its __ongoing_fetch_events while more than
//     __max_ongoing_fetch_events (2) are outstanding; the host issues nothing until that returns
//     (Schedule::host, written by stage3_host.cpp, says which fetch op each wait is on).
//  O8 the host's reduce throttle (stage 3): an op the host issues after a GradientFlush or
//     ReduceSync host event waits for the reduce op that event waits on. stage3.py
//     __reduce_and_partition_ipg_grads synchronize()s on the oldest of its param_reduce_events
//     while more than max_param_reduce_events (2) are outstanding: flush k waits for the reduce
//     of flush k - 3 of its micro-step (stage3_host.cpp derives it); since O2 makes that reduce
//     wait for the backward before it, the host, and every gather it issues next, stays within
//     three buckets of backward compute. independent_gradient_partition_epilogue then
//     synchronize()s reduce_and_partition_stream: the host waits for the micro-step's last reduce
//     (in deps O3 already implies it; the engine's host lane follows it).
//
// Each rule gives candidate waits; a candidate that stream order or another wait already implies
// is dropped, so `deps` holds exactly the waits nothing else implies.
#include "schedule/ordering.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace zerosim {

Queue queue_of(Stream s) {
    switch (s) {
        case Stream::Reduce: return Queue::Reduce;
        case Stream::Fetch: return Queue::Fetch;
        default: return Queue::Default;
    }
}

const char* queue_name(Queue q) {
    switch (q) {
        case Queue::Reduce: return "reduce";
        case Queue::Fetch: return "fetch";
        default: return "default";
    }
}

namespace {

int qi(const Op& op) { return static_cast<int>(queue_of(op.stream)); }

// A bucket of gradients summed across ranks during backward (stage 0-3 flushes, the engine's
// all_reduce, and qgZ's all_to_all_quant_reduce, which carries no reduce op because the sum happens
// after the exchange: DeepSpeed v0.14.2 coalesced_collectives.py all_to_all_quant_reduce); the
// trace check's broadcasts and the step's norms are not.
bool is_gradient_reduction(const Op& op) {
    return is_collective(op.kind) && op.phase == Phase::Backward &&
           (op.redop == ReduceOp::Sum || op.kind == OpKind::AllToAll);
}

bool is_backward(const Op& op) { return op.kind == OpKind::Compute && op.compute == ComputeKind::Backward; }

// Candidate waits of every op, rule by rule (O1-O8 above).
std::vector<std::vector<int64_t>> candidate_waits(const Schedule& s) {
    const size_t n = s.ops.size();
    std::vector<std::vector<int64_t>> cand(n);
    int64_t last_init = -1, last_backward = -1, last_reduction = -1, sealed_reduction = -1;
    int64_t last_step_op = -1, last_gather = -1;
    std::pair<int, int> micro_key{-2, -2};
    std::map<int, int64_t> last_gather_of_param;
    size_t next_host = 0;
    int64_t host_waited = -1;   // the latest fetch op the host has synchronised on so far (O7)
    int64_t host_reduced = -1;  // the latest reduce op the host has synchronised on so far (O8)
    for (size_t i = 0; i < n; ++i) {
        const Op& op = s.ops[i];
        auto& c = cand[i];
        for (; next_host < s.host.size() && s.host[next_host].first_op <= static_cast<int64_t>(i); ++next_host) {
            const HostEvent& e = s.host[next_host];
            const bool reduce_wait = e.kind == HostKind::GradientFlush || e.kind == HostKind::ReduceSync;
            for (int64_t w : e.waits) (reduce_wait ? host_reduced : host_waited) = std::max(reduce_wait ? host_reduced : host_waited, w);
        }
        if (host_waited >= 0) c.push_back(host_waited);                                    // O7
        if (host_reduced >= 0) c.push_back(host_reduced);                                  // O8
        std::pair<int, int> key{op.step, op.micro};
        if (key != micro_key) {  // a new micro-step (or the step): earlier reductions are sealed
            micro_key = key;
            sealed_reduction = last_reduction;
        }
        if (op.step >= 0 && last_init >= 0) c.push_back(last_init);                        // O1
        if (is_gradient_reduction(op) && last_backward >= 0) c.push_back(last_backward);    // O2
        if (sealed_reduction >= 0) c.push_back(sealed_reduction);                          // O3
        if (op.kind == OpKind::Compute && op.module >= 0)                                  // O4
            for (int p : op.params) {
                auto it = last_gather_of_param.find(p);
                if (it != last_gather_of_param.end()) c.push_back(it->second);
            }
        if (op.phase == Phase::Step && last_gather >= 0) c.push_back(last_gather);         // O5
        if (op.stream == Stream::Fetch && last_step_op >= 0) c.push_back(last_step_op);    // O6

        const auto id = static_cast<int64_t>(i);
        if (op.step < 0) last_init = id;
        if (is_backward(op)) last_backward = id;
        if (is_gradient_reduction(op)) last_reduction = id;
        if (op.phase == Phase::Step) last_step_op = id;
        if (op.stream == Stream::Fetch) {
            last_gather = id;
            for (int p : op.params) last_gather_of_param[p] = id;
        }
    }
    return cand;
}

void merge(std::array<int64_t, kQueues>& into, const std::array<int64_t, kQueues>& from) {
    for (int q = 0; q < kQueues; ++q) into[q] = std::max(into[q], from[q]);
}

}  // namespace

void add_ordering_deps(Schedule& s) {
    const size_t n = s.ops.size();
    auto cand = candidate_waits(s);
    // Vector clocks over the queues: clock[i][q] is the latest op of queue q that op i comes
    // after. Ops of one queue are totally ordered, so this is the whole happens-before relation
    // built so far. Candidates are taken latest first: an earlier op can never imply a later one
    // (all waits point backwards), so what is kept is exactly what nothing else implies.
    std::vector<std::array<int64_t, kQueues>> clock(n);
    std::array<int64_t, kQueues> prev;
    prev.fill(-1);
    for (size_t i = 0; i < n; ++i) {
        Op& op = s.ops[i];
        const int q = qi(op);
        std::array<int64_t, kQueues> c;
        c.fill(-1);
        if (prev[q] >= 0) c = clock[static_cast<size_t>(prev[q])];
        auto& cs = cand[i];
        std::sort(cs.begin(), cs.end(), std::greater<>());
        cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
        op.deps.clear();
        for (int64_t d : cs) {
            if (d < 0 || d >= static_cast<int64_t>(i)) continue;
            if (c[qi(s.ops[static_cast<size_t>(d)])] >= d) continue;  // already implied
            op.deps.push_back(d);
            merge(c, clock[static_cast<size_t>(d)]);
        }
        std::sort(op.deps.begin(), op.deps.end());
        c[q] = static_cast<int64_t>(i);
        clock[i] = c;
        prev[q] = static_cast<int64_t>(i);
    }
}

std::vector<std::vector<int64_t>> wait_lists(const Schedule& s) {
    std::vector<std::vector<int64_t>> w(s.ops.size());
    std::array<int64_t, kQueues> prev;
    prev.fill(-1);
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        auto& wi = w[i];
        wi = op.deps;
        const int q = qi(op);
        if (prev[q] >= 0) wi.push_back(prev[q]);
        std::sort(wi.begin(), wi.end());
        wi.erase(std::unique(wi.begin(), wi.end()), wi.end());
        prev[q] = static_cast<int64_t>(i);
    }
    return w;
}

std::vector<std::array<int64_t, kQueues>> queue_clocks(const Schedule& s, const std::vector<std::vector<int64_t>>& waits) {
    std::vector<std::array<int64_t, kQueues>> clock(s.ops.size());
    for (size_t i = 0; i < s.ops.size(); ++i) {
        auto& c = clock[i];
        c.fill(-1);
        for (int64_t d : waits[i])
            if (d >= 0 && d < static_cast<int64_t>(i)) merge(c, clock[static_cast<size_t>(d)]);
        c[qi(s.ops[i])] = static_cast<int64_t>(i);
    }
    return clock;
}

}  // namespace zerosim
