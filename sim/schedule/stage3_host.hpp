// Stage 3's host side, private to sim/schedule: the parameter coordinator's hooks, its wait on
// in-flight parameters with the fetch-event throttle, and its releases, recorded as the schedule's
// host events (ir.hpp HostEvent) while stage3.cpp generates the ops.
#pragma once

#include <cstdint>
#include <vector>

#include "build.hpp"

namespace zerosim::detail {

// DeepSpeed v0.14.2 partitioned_param_coordinator.py __init__: __max_ongoing_fetch_events = 2.
constexpr int kMaxOngoingFetchEvents = 2;
// DeepSpeed v0.14.2 stage3.py __init__: self.max_param_reduce_events = 2.
constexpr int kMaxParamReduceEvents = 2;

class Stage3Host {
public:
    Stage3Host(Build& b, size_t params) : b_(b), inflight_(params, false) {}
    // A coordinator call on the host (a module hook, or the step's release of everything); the ops
    // generated next are issued after it.
    void event(HostKind kind, int module);
    // A gather on the fetch stream was issued for op.params (fetch or prefetch).
    void gathered(const Op& op);
    // fetch_sub_module's wait on the module's in-flight parameters: one fetch event recorded on the
    // fetch stream per parameter waited on, the host synchronising on the oldest outstanding one
    // while more than kMaxOngoingFetchEvents are. Records a FetchWait event when any was in flight.
    void wait(const std::vector<int>& params, int module);
    // Whole parameter elements freed by the latest event (release_sub_module, release_and_reset_all).
    void released(int64_t elements);
    void clear_inflight();
    // __reduce_and_partition_ipg_grads on a non-empty bucket, before its reduce is issued: the
    // max_param_reduce_events throttle (stage3_host.cpp says why it waits for flush k - 3).
    void flush(int module);
    // The flush's reduce event was recorded after op `last_reduce` on the reduce stream.
    void flushed(int64_t last_reduce);
    // independent_gradient_partition_epilogue's reduce_and_partition_stream.synchronize(), after
    // the micro-step's last flush: every reduce event is complete afterwards.
    void reduce_sync();

private:
    Build& b_;
    std::vector<bool> inflight_;    // gathered, not yet waited on (__inflight_param_registry)
    std::vector<int64_t> events_;   // the fetch op each recorded fetch event follows, in order
    int64_t last_fetch_ = -1;       // latest op issued on the fetch stream
    std::vector<int64_t> reduces_;  // the last reduce op of each flush since the last synchronize
};

}  // namespace zerosim::detail
