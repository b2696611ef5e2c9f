// Stage 3's host events (stage3_host.hpp), as DeepSpeed v0.14.2 partitioned_param_coordinator.py
// runs fetch_sub_module and release_sub_module on the host.
#include "stage3_host.hpp"

namespace zerosim::detail {

void Stage3Host::event(HostKind kind, int module) {
    HostEvent e;
    e.kind = kind;
    e.step = b_.step;
    e.micro = b_.micro;
    e.module = module;
    e.first_op = static_cast<int64_t>(b_.out.ops.size());
    b_.out.host.push_back(std::move(e));
}

void Stage3Host::gathered(const Op& op) {
    last_fetch_ = op.id;
    for (int p : op.params) inflight_[static_cast<size_t>(p)] = true;
}

// fetch_sub_module: for each parameter still in __inflight_param_registry, under the allgather
// stream: drop completed events from the front of __ongoing_fetch_events; if more than
// __max_ongoing_fetch_events remain, synchronize() on the oldest; wait on the gather's handle;
// record an event on the allgather stream. Events on one stream complete in order, so the host
// waits for event n exactly when event n - 3 has not completed: it then is the oldest of three
// outstanding (older ones were dropped or waited for at earlier waits). Each event completes with
// the latest gather issued on the fetch stream before it was recorded.
void Stage3Host::wait(const std::vector<int>& params, int module) {
    HostEvent e;
    e.kind = HostKind::FetchWait;
    e.step = b_.step;
    e.micro = b_.micro;
    e.module = module;
    e.first_op = static_cast<int64_t>(b_.out.ops.size());
    for (int p : params) {
        if (!inflight_[static_cast<size_t>(p)]) continue;
        inflight_[static_cast<size_t>(p)] = false;
        if (last_fetch_ < 0) continue;
        const size_t n = events_.size();
        if (n > static_cast<size_t>(kMaxOngoingFetchEvents)) {
            int64_t oldest = events_[n - kMaxOngoingFetchEvents - 1];
            if (e.waits.empty() || e.waits.back() != oldest) e.waits.push_back(oldest);
        }
        events_.push_back(last_fetch_);
        ++e.fetch_events;
    }
    if (e.fetch_events > 0) b_.out.host.push_back(std::move(e));
}

void Stage3Host::released(int64_t elements) {
    if (!b_.out.host.empty()) b_.out.host.back().released_elements += elements;
}

void Stage3Host::clear_inflight() { inflight_.assign(inflight_.size(), false); }

// DeepSpeed v0.14.2 stage3.py __reduce_and_partition_ipg_grads: pop completed events from the
// front of param_reduce_events (query()), then synchronize() on the oldest while more than
// max_param_reduce_events (2) remain; the reduce follows on reduce_and_partition_stream and an
// event is recorded after it. Events on one stream complete in order and at most three are kept
// after each append, so flush k finds events k-3, k-2, k-1 at most, and synchronises exactly
// when event k-3 is not complete: a wait for the reduce of flush k - 3 (a no-op if it is done).
// Every event of an earlier micro-step is complete (the epilogue synchronised the stream).
void Stage3Host::flush(int module) {
    HostEvent e;
    e.kind = HostKind::GradientFlush;
    e.step = b_.step;
    e.micro = b_.micro;
    e.module = module;
    e.first_op = static_cast<int64_t>(b_.out.ops.size());
    const size_t k = reduces_.size();
    if (k > static_cast<size_t>(kMaxParamReduceEvents) && reduces_[k - kMaxParamReduceEvents - 1] >= 0)
        e.waits.push_back(reduces_[k - kMaxParamReduceEvents - 1]);
    b_.out.host.push_back(std::move(e));
}

void Stage3Host::flushed(int64_t last_reduce) { reduces_.push_back(last_reduce); }

// independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize() (skipped only
// on accelerators that resolve data dependencies, not CUDA): the host waits for the last reduce.
void Stage3Host::reduce_sync() {
    HostEvent e;
    e.kind = HostKind::ReduceSync;
    e.step = b_.step;
    e.micro = b_.micro;
    e.first_op = static_cast<int64_t>(b_.out.ops.size());
    for (auto it = reduces_.rbegin(); it != reduces_.rend(); ++it)
        if (*it >= 0) {
            e.waits.push_back(*it);
            break;
        }
    reduces_.clear();
    b_.out.host.push_back(std::move(e));
}

}  // namespace zerosim::detail
