// Fabric mode's flows on SimGrid (fabric_platform.hpp: run_fabric_flows).
#include <simgrid/s4u.hpp>

#include <functional>
#include <unordered_map>

#include "fabric_platform.hpp"

namespace zerosim {

namespace sg = simgrid::s4u;

namespace {

// A sender's share of the flows: the flows of consecutive source hosts, at least this many unless
// they run out (a host's flows are never split). The list SimGrid walks when the sender moves to its
// next source host is at most its share (this many, plus one host's flows).
constexpr size_t kFlowsPerSender = 64;

// A sender's stack, KiB: it only calls s4u (each simcall runs on the maestro's stack). Under
// glibc's mmap threshold (128 KiB), so that thousands of senders come from the heap instead of an
// mmap, page faults and munmap each (SimGrid's default is 8 MiB: contexts/stack-size).
[[maybe_unused]] constexpr unsigned kSenderStackKiB = 96;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZEROSIM_FABRIC_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ZEROSIM_FABRIC_ASAN 1
#endif

// A sender actor on `host`, on a small stack (AddressSanitizer's frames are larger: its default).
sg::ActorPtr start_sender(sg::Host* host, const std::function<void()>& code) {
    sg::ActorPtr a = sg::Actor::init("fabric-sender", host);
#ifndef ZEROSIM_FABRIC_ASAN
    a->set_stacksize(kSenderStackKiB);
#endif
    return a->start(code);
}

// The flows' indices grouped by source host (hosts in order of first appearance, flows in order),
// then cut into senders' shares.
std::vector<std::vector<size_t>> sender_shares(const std::vector<FabricFlow>& flows) {
    std::unordered_map<const sg::Host*, size_t> group_of;
    std::vector<std::vector<size_t>> by_source;
    for (size_t i = 0; i < flows.size(); ++i) {
        auto [it, fresh] = group_of.emplace(flows[i].from, by_source.size());
        if (fresh) by_source.emplace_back();
        by_source[it->second].push_back(i);
    }
    std::vector<std::vector<size_t>> shares(1);
    for (const auto& g : by_source) {
        if (shares.back().size() >= kFlowsPerSender) shares.emplace_back();
        shares.back().insert(shares.back().end(), g.begin(), g.end());
    }
    return shares;
}

// The actors of one run: a receiver, the senders (each started by the one before, once it has
// posted its share) and a collector that waits for every comm.
struct FlowRun {
    const std::vector<FabricFlow>& flows;
    std::vector<std::vector<size_t>> shares;
    sg::Mailbox* box = nullptr;
    sg::ActorPtr receiver;
    std::vector<sg::CommPtr> comms;

    void send(size_t s) {
        static char token = 0;   // a put carries a payload pointer; the flows carry only their size
        for (size_t i : shares[s]) {
            const FabricFlow& f = flows[i];
            if (sg::this_actor::get_host() != f.from) sg::this_actor::set_host(f.from);
            if (receiver->get_host() != f.to) receiver->set_host(f.to);
            comms.push_back(box->put_async(&token, static_cast<uint64_t>(f.bytes)));
        }
        // The next sender, or once all are posted the collector; each joins the one it started
        // (a sender's comms are cancelled if it ends before they do).
        sg::ActorPtr next =
            s + 1 < shares.size()
                ? start_sender(flows[shares[s + 1].front()].from, [this, s] { send(s + 1); })
                : sg::Actor::create("fabric-collector", flows.front().from, [this] { sg::Comm::wait_all(comms); });
        next->join();
    }
};

}  // namespace

// The flows as eager mailbox comms, not Comm::sendto_async. SimGrid 3.32 keeps an actor's pending
// activities, and the maestro's detached ones, in a std::list walked whole each time one ends
// (src/kernel/activity/CommImpl.cpp, CommImpl::finish: activities_.remove(this)), and sendto_init
// detaches every host-to-host comm (src/s4u/s4u_Comm.cpp): n flows cost n^2/2 list steps (SimGrid
// 3.34 made the lists std::set, commit 5f8fc2c203). Here the mailbox has a permanent receiver, so
// a put starts at once from the sender's host to the receiver's (CommImpl::isend, CommImpl::start)
// and only its sender lists it; the receiver, listing nothing, moves to each flow's destination
// before its put (moving an actor walks its own list: s4u_Actor.cpp, Actor::set_host). Only one
// sender posts at a time (each simcall yields to the maestro, which runs the other actors between
// two of them), and the comms end while a collector, listing none, waits for them.
double run_fabric_flows(const std::vector<FabricFlow>& flows) {
    if (flows.empty()) return 0;
    FlowRun run{flows, sender_shares(flows), nullptr, nullptr, {}};
    run.comms.reserve(flows.size());
    run.box = sg::Mailbox::by_name("zerosim.fabric-flows");
    double elapsed = 0;
    sg::Actor::create("fabric-receiver", flows.front().to, [&run, &elapsed] {
        const double start = sg::Engine::get_clock();
        run.receiver = sg::Actor::self();
        run.box->set_receiver(run.receiver);
        start_sender(run.flows[run.shares[0].front()].from, [&run] { run.send(0); })->join();
        elapsed = sg::Engine::get_clock() - start;
        run.box->clear();   // the permanent receiver's queue holds every comm until cleared
        run.box->set_receiver(nullptr);
        run.receiver = nullptr;
    });
    sg::Engine::get_instance()->run();
    return elapsed;
}

}  // namespace zerosim
