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

}  // namespace zerosim::detail
