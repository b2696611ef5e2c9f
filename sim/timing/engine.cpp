#include "timing/engine.hpp"
#include "timing/group_plan.hpp"
#include "engine_platform.hpp"
#include "timing/offload_time.hpp"

#include <simgrid/s4u.hpp>
#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "schedule/mesh.hpp"
#include "schedule/ordering.hpp"

XBT_LOG_NEW_DEFAULT_CATEGORY(zerosim_engine, "zerosim's timing engine");

namespace zerosim {

const char* timing_mode_name(TimingMode m) {
    return m == TimingMode::Overlapped ? "overlapped (as the hardware runs it)"
                                       : "synchronized after every op (as the DeepSpeed comms logger measures)";
}

double compute_seconds(const Op& op, const Topology& t, DType dtype) {
    double flops_rate = t.peak_flops(op.compute == ComputeKind::OptimizerStep ? DType::FP32 : dtype) * t.compute_efficiency;
    double mem_rate = t.mem_bandwidth_gbs * 1e9 * t.mem_efficiency;
    double tf = flops_rate > 0 ? op.flops / flops_rate : 0.0;
    double tm = mem_rate > 0 ? static_cast<double>(op.mem_bytes) / mem_rate : 0.0;
    return std::max(tf, tm);
}

namespace {

// The one platform of the process: a representative rank and two peers (engine_platform.hpp).
// Its link capacities are set for each simulation (SimGrid keeps one engine per process; runs
// follow each other on its clock).
RankHosts& platform() {
    static RankHosts p = [] {
        static int argc = 2;
        static char arg0[] = "zerosim";
        static char arg1[] = "--log=root.thres:critical";
        static char* argv[] = {arg0, arg1, nullptr};
        // SimGrid's EngineImpl::initialize installs its own Ctrl-C handler (it prints "CTRL-C
        // pressed" and exits 1; src/kernel/EngineImpl.cpp inthandler): the process's own
        // disposition is put back (zerosim's interrupt report, exit 3; ignored in a background
        // job; the default in a sweep worker).
        struct sigaction before;
        sigaction(SIGINT, nullptr, &before);
        auto* e = simgrid::s4u::Engine::get_instance(&argc, argv);
        sigaction(SIGINT, &before, nullptr);
        (void)e;
        // CM02 is the plain max-min flow model: no TCP factors, so a flow alone on a link of
        // capacity C moves B bytes in exactly B / C seconds; latencies are modelled by zerosim.
        simgrid::s4u::Engine::set_config("network/model:CM02");
        simgrid::s4u::Engine::set_config("network/crosstraffic:0");
        auto* zone = simgrid::s4u::create_full_zone("cluster");
        RankHosts pl;
        pl.rank = zone->create_host("rank", 1e9)->seal();
        pl.intra_peer = zone->create_host("intra_peer", 1e9)->seal();
        pl.inter_peer = zone->create_host("inter_peer", 1e9)->seal();
        pl.intra = zone->create_link("intra", 1e9)->set_latency(0)->seal();
        pl.nic = zone->create_link("nic", 1e9)->set_latency(0)->seal();
        pl.fabric = zone->create_link("fabric", 1e9)->set_latency(0)->seal();
        zone->add_route(pl.rank->get_netpoint(), pl.intra_peer->get_netpoint(), nullptr, nullptr,
                        {simgrid::s4u::LinkInRoute(pl.intra)}, false);
        zone->add_route(pl.rank->get_netpoint(), pl.inter_peer->get_netpoint(), nullptr, nullptr,
                        {simgrid::s4u::LinkInRoute(pl.nic), simgrid::s4u::LinkInRoute(pl.fabric)}, false);
        zone->seal();
        return pl;
    }();
    return p;
}

// The world whose links a schedule's run shares: the whole job in a 3D layout (meta.world is then
// the rank's data-parallel group).
int64_t job_world(const ScheduleMeta& m) { return m.layout.is_3d() ? m.layout.world : m.world; }

LinkCapacities configure(const Topology& t, int64_t world, const RankHosts& h) {
    LinkCapacities c = link_capacities(t, world);
    set_link_capacities(h, c);
    return c;
}

// Runs one collective's network activity from the calling actor: latency, then its flows.
// A protocol that reaches only part of a link (LL sends 16 bytes for 8 of payload) puts
// correspondingly more bytes on it, so alone it takes bytes / rate and, beside other traffic,
// it takes its fair share of the link, as the wire does.
void run_collective(const CollectivePlan& plan, const LinkCapacities& cap, const RankHosts& p) {
    if (plan.latency_s > 0) simgrid::s4u::this_actor::sleep_for(plan.latency_s);
    std::vector<simgrid::s4u::CommPtr> flows;
    auto flow = [&](simgrid::s4u::Host* to, double bytes, double rate, double capacity) {
        if (bytes <= 0 || rate <= 0) return;
        double wire = bytes * std::max(1.0, capacity / rate);
        flows.push_back(simgrid::s4u::Comm::sendto_async(p.rank, to, static_cast<uint64_t>(std::llround(wire))));
    };
    flow(p.intra_peer, plan.intra_bytes, plan.intra_rate, cap.intra);
    flow(p.inter_peer, plan.inter_bytes, plan.inter_rate, std::min(cap.nic, cap.fabric));
    if (!flows.empty()) simgrid::s4u::Comm::wait_all(flows);
}

// What ranks simulated together share (simulate_ranks): the ranks, and the collectives whose group
// holds more than one of them, which start only once every one of those has reached it.
struct Together {
    int64_t run_id = 0;                  // mailbox names of this simulation
    std::set<int64_t> ranks;
    simgrid::s4u::MutexPtr mutex;
    simgrid::s4u::ConditionVariablePtr cv;
    std::map<std::pair<std::vector<int>, int64_t>, int64_t> arrived;   // (group, occurrence) -> ranks there
};

// Which simulated stream (actor) runs an op: one per device queue (schedule/ordering.hpp), so
// compute and the collectives of the default stream run in order with each other.
int lane_of(const Op& op) { return static_cast<int>(queue_of(op.stream)); }

// A coordinator hook costs the topology's host.hook_us; the waits inside a call (the fetch wait,
// the gradient flush's throttle, the epilogue's synchronize) add none of their own.
bool is_hook(HostKind k) { return k != HostKind::FetchWait && k != HostKind::GradientFlush && k != HostKind::ReduceSync; }

struct Run {
    const Schedule& s;
    const Topology& t;
    TimingMode mode;
    Prediction pred;
    std::vector<CollectivePlan> plans;
    std::vector<double> compute_time;
    std::vector<std::vector<int64_t>> waits;   // engine_wait_plan: deps and stream order
    std::vector<bool> done;
    bool host_lane = false;            // stage 3 overlapped: the host issues ops
    int64_t budget = INT64_MAX;        // device bytes for gathered parameters
    struct ResidentChange {
        double t_s;
        int64_t bytes;
        int64_t after_op;   // a free takes effect once this op has finished (-1: at t_s)
    };
    std::vector<ResidentChange> resident_changes;
    std::map<int, double> stall_by_step;   // the host's stalls on the gathered budget, by the step of the op it issued
    std::vector<bool> issued;
    simgrid::s4u::MutexPtr mutex;
    simgrid::s4u::ConditionVariablePtr cv;
    double t0 = 0;
    LinkCapacities caps;
    const RankHosts* hosts = &platform();
    // Simulated with other ranks (simulate_ranks): what they share, and for each op whose group holds
    // several of them the (group, occurrence) they meet at and how many meet there (0: none).
    Together* together = nullptr;
    std::vector<std::pair<std::vector<int>, int64_t>> meeting;
    std::vector<int64_t> meeting_ranks;
    std::map<GroupKind, std::vector<int>> own_members;   // 3D: this rank's group of each kind

    Run(const Schedule& sched, const Topology& topo, TimingMode m, const EngineAdjust* adjust = nullptr)
        : s(sched), t(topo), mode(m), plans(sched.ops.size()), compute_time(sched.ops.size(), 0.0),
          waits(engine_wait_plan(sched)), done(sched.ops.size(), false),
          host_lane(m == TimingMode::Overlapped && !sched.host.empty()), issued(sched.ops.size(), !host_lane) {
        pred.mode = m;
        pred.ops.resize(s.ops.size());
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const Op& op = s.ops[i];
            if (is_collective(op.kind)) {
                if (op.kind == OpKind::Barrier || op.bytes() > 0 || s.meta.world > 1)
                    plans[i] = plan_of(op);  // the op's process group (ZeRO++ / MiCS / 3D)
                if (adjust && adjust->collective) adjust->collective(op, plans[i]);   // fabric mode
                compute_time[i] = quantization_seconds(t, op, s.meta);  // qwZ/qgZ kernels, on the op's stream
                compute_time[i] = offload_seconds(t, op, s.meta, compute_time[i]);  // offload_param: host -> device
                pred.ops[i].algorithm = plans[i].reported_pair().algorithm;
                pred.ops[i].protocol = plans[i].reported_pair().protocol;
            } else {
                compute_time[i] = compute_seconds(op, t, s.meta.model_dtype);
                compute_time[i] = offload_seconds(t, op, s.meta, compute_time[i]);  // offload_optimizer: CPU step
                if (adjust) compute_time[i] *= adjust->compute_slowdown;   // fabric mode's straggler
            }
        }
    }

    // This rank's group of a kind in a 3D layout (the mesh's; empty outside one), built once per kind.
    const std::vector<int>& members_of(GroupKind k) {
        auto it = own_members.find(k);
        if (it == own_members.end()) it = own_members.emplace(k, own_group_members(s.meta, k)).first;
        return it->second;
    }

    CollectivePlan plan_of(const Op& op) {
        if (!s.meta.layout.is_3d() || is_p2p(op)) return plan_for_group(t, op, s.meta);
        const std::vector<int>& members = members_of(op.group);
        return members.empty() ? plan_for_group(t, op, s.meta) : plan_for_members(t, op, members);
    }

    static bool is_p2p(const Op& op) { return op.kind == OpKind::Send || op.kind == OpKind::Recv; }

    // Simulated beside other ranks: a collective whose group holds several of them meets them there.
    void join(Together& all) {
        together = &all;
        meeting.assign(s.ops.size(), {});
        meeting_ranks.assign(s.ops.size(), 0);
        std::map<std::vector<int>, int64_t> seen;   // occurrences of each group on this rank, in issue order
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const Op& op = s.ops[i];
            if (!is_collective(op.kind) || is_p2p(op)) continue;
            const std::vector<int>& members = members_of(op.group);
            int64_t here = 0;
            for (int r : members) here += all.ranks.count(r);
            if (here < 2) continue;
            meeting[i] = {members, seen[members]++};
            meeting_ranks[i] = here;
        }
    }

    // Waits until every simulated member of the op's group has reached it.
    void meet(size_t i) {
        std::unique_lock<simgrid::s4u::Mutex> lock(*together->mutex);
        int64_t& there = together->arrived[meeting[i]];
        ++there;
        together->cv->notify_all();
        together->cv->wait(lock, [&] { return there >= meeting_ranks[i]; });
    }

    // A send or receive to a simulated peer: the pair meets on a mailbox (SimGrid starts the transfer
    // once both ends are there, as NCCL's send/recv kernels do), the bytes cross the sender's path
    // (engine_platform.hpp), then both ends see the pair's latency.
    void run_p2p(size_t i) {
        static int token = 0;
        const Op& op = s.ops[i];
        const bool send = op.kind == OpKind::Send;
        const int64_t from = send ? s.meta.rank : op.peer, to = send ? op.peer : s.meta.rank;
        auto* box = simgrid::s4u::Mailbox::by_name("zerosim" + std::to_string(together->run_id) + " p2p " +
                                                   std::to_string(from) + ">" + std::to_string(to));
        const CollectivePlan& plan = plans[i];
        if (send) {
            double wire = 0;
            if (plan.intra_bytes > 0 && plan.intra_rate > 0) wire += plan.intra_bytes * std::max(1.0, caps.intra / plan.intra_rate);
            if (plan.inter_bytes > 0 && plan.inter_rate > 0)
                wire += plan.inter_bytes * std::max(1.0, std::min(caps.nic, caps.fabric) / plan.inter_rate);
            box->put(&token, static_cast<uint64_t>(std::llround(wire)));
        } else {
            box->get<int>();
        }
        if (plan.latency_s > 0) simgrid::s4u::this_actor::sleep_for(plan.latency_s);
    }

    bool peer_simulated(const Op& op) const { return together && is_p2p(op) && together->ranks.count(op.peer) > 0; }

    void execute(size_t i) {
        const Op& op = s.ops[i];
        double start = simgrid::s4u::Engine::get_clock();
        if (is_collective(op.kind)) {
            if (compute_time[i] > 0) simgrid::s4u::this_actor::sleep_for(compute_time[i]);
            if (peer_simulated(op)) {
                run_p2p(i);
            } else {
                if (together && meeting_ranks[i] > 1) {
                    meet(i);
                    pred.ops[i].wait_s = simgrid::s4u::Engine::get_clock() - start;
                }
                run_collective(plans[i], caps, *hosts);
            }
        } else if (host_lane) {
            // Kernels run as the host launches them: the segment ends no sooner than its launch.
            double until = t0 + pred.issued_s[i] + host_launch_seconds(op, t);
            double d = std::max(compute_time[i], until - start);
            if (d > 0) simgrid::s4u::this_actor::sleep_for(d);
        } else if (compute_time[i] > 0) {
            simgrid::s4u::this_actor::sleep_for(compute_time[i]);
        }
        double end = simgrid::s4u::Engine::get_clock();
        pred.ops[i].start_s = start - t0;
        pred.ops[i].end_s = end - t0;
        pred.ops[i].simulated = true;
    }

    void lane(int lane_id) {
        for (size_t i = 0; i < s.ops.size(); ++i) {
            if (lane_of(s.ops[i]) != lane_id) continue;
            {
                std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
                cv->wait(lock, [&] {
                    if (!issued[i]) return false;
                    for (int64_t d : waits[i])
                        if (!done[static_cast<size_t>(d)]) return false;
                    return true;
                });
            }
            execute(i);
            std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
            done[i] = true;
            cv->notify_all();
        }
    }

    // A gather whose parameters stay gathered until a release (the memory model's counting):
    // fetches, prefetches and the step's persistent re-gather.
    static bool gathers_for_use(const Op& op) {
        return op.kind == OpKind::AllGather &&
               (op.rule == RuleId::Stage3Fetch || op.rule == RuleId::Stage3Prefetch || op.rule == RuleId::QwzFetch ||
                op.rule == RuleId::QwzPrefetch || op.rule == RuleId::Stage3StepPersistentRegather);
    }

    // What the host actor knows of the gathered parameters while it issues the ops.
    struct HostLedger {
        int64_t width = 0;   // bytes per element of the model's dtype
        int64_t live = 0;    // elements gathered and not yet released
        // Device memory of gathered buffers: free_param record_stream()s a released buffer on the
        // default stream (partition_parameters.py), so the caching allocator reuses it only once
        // the default-stream work issued before the release has run; a gather that finds no room
        // makes the allocator free its cached blocks, which synchronises the device first.
        int64_t resident = 0;
        int64_t last_default = -1;                              // latest default-queue op issued
        std::vector<std::pair<int64_t, int64_t>> pending_free;  // (op that frees it, bytes)
    };

    double host_now() const { return simgrid::s4u::Engine::get_clock() - t0; }

    void sample_gathered(const HostLedger& h, int step) { pred.gathered.push_back({host_now(), h.live * h.width, step}); }

    void reclaim_freed(HostLedger& h) {
        auto keep = std::remove_if(h.pending_free.begin(), h.pending_free.end(), [&](const auto& f) {
            if (!done[static_cast<size_t>(f.first)]) return false;
            h.resident -= f.second;
            return true;
        });
        h.pending_free.erase(keep, h.pending_free.end());
    }

    void allocate_gathered(HostLedger& h, int64_t bytes, int step) {
        const double asked = host_now();
        std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
        cv->wait(lock, [&] {
            reclaim_freed(h);
            return h.resident + bytes <= budget || h.pending_free.empty();
        });
        pred.allocator_stall_s += host_now() - asked;
        stall_by_step[step] += host_now() - asked;
        h.resident += bytes;
        pred.resident_peak_bytes = std::max(pred.resident_peak_bytes, h.resident);
        resident_changes.push_back({host_now(), bytes, -1});
    }

    void release_gathered(HostLedger& h, const HostEvent& ev) {
        h.live -= ev.released_elements;
        sample_gathered(h, ev.step);
        const int64_t bytes = ev.released_elements * h.width;
        if (h.last_default < 0 || done[static_cast<size_t>(h.last_default)]) {
            h.resident -= bytes;
            resident_changes.push_back({host_now(), -bytes, -1});
        } else {
            h.pending_free.push_back({h.last_default, bytes});
            resident_changes.push_back({host_now(), -bytes, h.last_default});
        }
    }

    void run_host_event(HostLedger& h, size_t e) {
        const double hook_s = t.host_hook_us * 1e-6;
        const HostEvent& ev = s.host[e];
        pred.host[e].start_s = host_now();
        if (!ev.waits.empty()) {
            std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
            cv->wait(lock, [&] {
                for (int64_t d : ev.waits)
                    if (!done[static_cast<size_t>(d)]) return false;
                return true;
            });
        }
        // A FetchWait is part of its hook's call: its Python is in the hook's figure; a
        // GradientFlush or ReduceSync is part of the gradient hook or the epilogue, whose Python
        // no figure covers yet (assumed 0, the time before O8 as well).
        if (is_hook(ev.kind) && hook_s > 0) simgrid::s4u::this_actor::sleep_for(hook_s);
        if (ev.released_elements > 0) release_gathered(h, ev);
        pred.host[e].end_s = host_now();
    }

    // The host issues op i: it gathers the op's parameters first, then the op may run.
    void issue_op(HostLedger& h, size_t i) {
        const Op& op = s.ops[i];
        int64_t gathered = 0;
        if (gathers_for_use(op))
            for (int p : op.params) gathered += s.params[static_cast<size_t>(p)].numel;
        if (gathered > 0) allocate_gathered(h, gathered * h.width, op.step);
        if (queue_of(op.stream) == Queue::Default) h.last_default = static_cast<int64_t>(i);
        {
            std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
            issued[i] = true;
            pred.issued_s[i] = host_now();
            cv->notify_all();
        }
        if (gathered > 0) {
            h.live += gathered;
            sample_gathered(h, op.step);
        }
        double launch = host_launch_seconds(op, t);
        if (launch > 0) simgrid::s4u::this_actor::sleep_for(launch);
    }

    void host_actor() {
        HostLedger h;
        h.width = dtype_size(s.meta.model_dtype);
        size_t next = 0;
        // deepspeed.initialize returns only after its barriers (host-blocking): training is issued
        // once the engine start has run (rule O1's wait, on the host).
        int64_t last_init = -1;
        for (size_t i = 0; i < s.ops.size(); ++i)
            if (s.ops[i].step < 0) last_init = static_cast<int64_t>(i);
        for (size_t i = 0; i < s.ops.size(); ++i) {
            if (static_cast<int64_t>(i) == last_init + 1 && last_init >= 0) {
                std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
                cv->wait(lock, [&] { return static_cast<bool>(done[static_cast<size_t>(last_init)]); });
            }
            while (next < s.host.size() && s.host[next].first_op <= static_cast<int64_t>(i)) run_host_event(h, next++);
            issue_op(h, i);
        }
        while (next < s.host.size()) run_host_event(h, next++);
    }

    void go() {
        launch();
        simgrid::s4u::Engine::get_instance()->run();
        summarise();
    }

    // Creates this rank's actors on its hosts; the caller runs the engine.
    void launch() {
        const RankHosts& p = *hosts;
        caps = configure(t, job_world(s.meta), p);
        t0 = simgrid::s4u::Engine::get_clock();
        mutex = simgrid::s4u::Mutex::create();
        cv = simgrid::s4u::ConditionVariable::create();
        if (mode == TimingMode::Synchronized) {
            simgrid::s4u::Actor::create("synchronized", p.rank, [this] {
                // The host's own time (stage 3's hooks and launches) lies between the ops, too.
                size_t next = 0;
                for (size_t i = 0; i < s.ops.size(); ++i) {
                    double host_s = host_launch_seconds(s.ops[i], t);
                    for (; next < s.host.size() && s.host[next].first_op <= static_cast<int64_t>(i); ++next)
                        if (is_hook(s.host[next].kind)) host_s += t.host_hook_us * 1e-6;
                    if (!s.host.empty() && host_s > 0) simgrid::s4u::this_actor::sleep_for(host_s);
                    execute(i);
                }
            });
        } else {
            if (host_lane) {
                pred.host.assign(s.host.size(), {});
                pred.issued_s.assign(s.ops.size(), 0.0);
                simgrid::s4u::Actor::create("host", p.rank, [this] { host_actor(); });
            }
            for (int lane_id = 0; lane_id < kQueues; ++lane_id)
                simgrid::s4u::Actor::create("stream" + std::to_string(lane_id), p.rank, [this, lane_id] { lane(lane_id); });
        }
    }

    void summarise() {
        std::map<int, StepTiming> steps;
        double init_end = 0;
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const Op& op = s.ops[i];
            const OpTiming& ot = pred.ops[i];
            pred.total_s = std::max(pred.total_s, ot.end_s);
            if (op.step < 0) {
                init_end = std::max(init_end, ot.end_s);
                continue;
            }
            auto [it, fresh] = steps.try_emplace(op.step);
            StepTiming& st = it->second;
            if (fresh) {
                st.step = op.step;
                st.start_s = ot.start_s;
                st.end_s = ot.end_s;
            }
            st.start_s = std::min(st.start_s, ot.start_s);
            st.end_s = std::max(st.end_s, ot.end_s);
            if (op.kind == OpKind::Compute)
                st.compute_s += ot.duration();
            else
                st.comm_s += ot.duration();
        }
        pred.init_s = init_end;
        double prev_end = init_end;
        for (auto& [k, st] : steps) {
            // A step runs from the end of the previous one (the host issues it right away).
            st.start_s = std::min(st.start_s, prev_end);
            st.exposed_comm_s = std::max(0.0, st.step_s() - st.compute_s);
            if (auto stall = stall_by_step.find(k); stall != stall_by_step.end()) st.allocator_stall_s = stall->second;
            prev_end = st.end_s;
            pred.steps.push_back(st);
        }
        if (host_lane) {
            summarise_gathered(s, pred);
            for (auto& c : resident_changes)
                if (c.after_op >= 0) c.t_s = std::max(c.t_s, pred.ops[static_cast<size_t>(c.after_op)].end_s);
            std::stable_sort(resident_changes.begin(), resident_changes.end(),
                             [](const ResidentChange& a, const ResidentChange& b) { return a.t_s < b.t_s; });
            int64_t level = 0;
            for (const auto& c : resident_changes) {
                level += c.bytes;
                pred.resident.push_back({c.t_s, level, -1});
            }
        }
    }
};

}  // namespace

// The root zone of the process's SimGrid platform, for fabric mode's platforms (fabric_platform.cpp):
// they take its network and host models.
simgrid::s4u::NetZone* engine_root_zone() {
    platform();
    return simgrid::s4u::Engine::get_instance()->get_netzone_root();
}

const RankHosts& representative_hosts() { return platform(); }

void set_link_capacities(const RankHosts& h, const LinkCapacities& c) {
    // A link of zero capacity would stall SimGrid; a single-node run has no NIC traffic anyway.
    h.intra->set_bandwidth(std::max(c.intra, 1.0));
    h.nic->set_bandwidth(std::max(c.nic, 1.0));
    h.fabric->set_bandwidth(std::max(c.fabric, 1.0));
}

double host_launch_seconds(const Op& op, const Topology& t) {
    if (op.kind != OpKind::Compute || op.compute == ComputeKind::OptimizerStep) return 0.0;
    // A backward segment launches the kernels of both gradients (input and weight).
    return t.host_kernel_launch_us * 1e-6 * (op.compute == ComputeKind::Backward ? 2.0 : 1.0);
}

std::vector<std::vector<int64_t>> engine_wait_plan(const Schedule& s) { return wait_lists(s); }

namespace {

// SimGrid's clock is one double in seconds, shared by every run of the process (each run times
// from where the last ended, t0). Past kClockLimitS (10^7 s, about 116 days) its step passes
// 2 ns and a collective's microseconds start to round away (--seq-len 2^40 gave a 4.9e16 s step
// beside 0.000 ms of communication), so a run that reaches it is refused, not printed.
constexpr double kClockLimitS = 1e7;
Status clock_resolves() {
    const double now = simgrid::s4u::Engine::get_clock();
    if (now <= kClockLimitS) return std::nullopt;
    char msg[400];
    std::snprintf(msg, sizeof msg,
                  "the simulation ran to %.3g s (%.3g days): past %.0e s SimGrid's clock (a double in seconds) cannot "
                  "resolve a collective's microseconds; no real training step lasts that long (check --seq-len, the "
                  "model's size and the topology's peaks)",
                  now, now / 86400.0, kClockLimitS);
    return Error{"", "", msg};
}

}  // namespace

Result<Prediction> simulate(const Schedule& s, const Topology& t, TimingMode mode, int64_t gathered_budget_bytes,
                            const EngineAdjust* adjust) {
    if (auto e = check_world_fits(t, job_world(s.meta))) return *e;
    Run run(s, t, mode, adjust);
    run.budget = gathered_budget_bytes;
    run.pred.gathered_budget_bytes = gathered_budget_bytes;
    run.go();
    if (auto e = clock_resolves()) return *e;
    if (mode == TimingMode::Overlapped && s.meta.zero_init) run.pred.zero_init_construction_s = zero_init_construction_seconds(s, t);
    return std::move(run.pred);
}

namespace {

// Each send's and receive's wait for the other end (simulate_ranks): the k-th send from a to b meets
// the k-th receive at b from a, and the transfer starts once the later of the two has been issued.
void p2p_waits(const std::vector<const Schedule*>& ranks, std::vector<Prediction>& preds) {
    std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<size_t, size_t>>> sends, recvs;   // (from, to) -> (rank, op)
    for (size_t r = 0; r < ranks.size(); ++r)
        for (size_t i = 0; i < ranks[r]->ops.size(); ++i) {
            const Op& op = ranks[r]->ops[i];
            const int64_t self = ranks[r]->meta.rank;
            if (op.kind == OpKind::Send) sends[{self, op.peer}].push_back({r, i});
            if (op.kind == OpKind::Recv) recvs[{op.peer, self}].push_back({r, i});
        }
    for (const auto& [pair, list] : sends) {
        const auto it = recvs.find(pair);
        if (it == recvs.end()) continue;
        for (size_t k = 0; k < std::min(list.size(), it->second.size()); ++k) {
            OpTiming& a = preds[list[k].first].ops[list[k].second];
            OpTiming& b = preds[it->second[k].first].ops[it->second[k].second];
            const double meet = std::max(a.start_s, b.start_s);
            a.wait_s = meet - a.start_s;
            b.wait_s = meet - b.start_s;
        }
    }
}

// Every send between two of the ranks has its receive, in number and size, before anything runs
// (SimGrid would end such a run as a deadlock).
Status check_sends_meet(const std::vector<const Schedule*>& ranks) {
    std::set<int64_t> simulated;
    for (const Schedule* r : ranks) simulated.insert(r->meta.rank);
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> sent, received;   // (from, to) -> bytes in order
    for (const Schedule* r : ranks)
        for (const Op& op : r->ops) {
            if ((op.kind != OpKind::Send && op.kind != OpKind::Recv) || !simulated.count(op.peer)) continue;
            if (op.kind == OpKind::Send) sent[{r->meta.rank, op.peer}].push_back(op.bytes());
            else received[{op.peer, r->meta.rank}].push_back(op.bytes());
        }
    for (const auto* side : {&sent, &received})
        for (const auto& [pair, list] : *side) {
            const auto& other = side == &sent ? received[pair] : sent[pair];
            if (other == list) continue;
            return Error{"", "", "the ranks' sends and receives do not meet: rank " + std::to_string(pair.first) + " sends " +
                                     std::to_string(sent[pair].size()) + " tensors to rank " + std::to_string(pair.second) +
                                     ", which receives " + std::to_string(received[pair].size()) +
                                     (sent[pair].size() == received[pair].size() ? " (of other sizes)" : "")};
        }
    return std::nullopt;
}

// Which consecutive ranks share a node (rank r on node r / gpus_per_node, schedule/mesh.hpp).
std::vector<bool> next_on_same_node(const std::vector<const Schedule*>& ranks, const Topology& t) {
    std::vector<bool> same;
    for (size_t k = 0; k + 1 < ranks.size(); ++k)
        same.push_back(node_of(ranks[k]->meta.rank, t.gpus_per_node) == node_of(ranks[k + 1]->meta.rank, t.gpus_per_node));
    return same;
}

}  // namespace

Result<std::vector<Prediction>> simulate_ranks(const std::vector<const Schedule*>& ranks, const Topology& t, TimingMode mode,
                                               const EngineAdjust* adjust) {
    if (ranks.empty()) return Error{"", "", "no rank to simulate"};
    if (auto e = check_world_fits(t, job_world(ranks[0]->meta))) return *e;
    if (auto e = check_sends_meet(ranks)) return *e;
    platform();   // the engine exists before its mutexes
    const std::vector<RankHosts>& hosts = stage_hosts(next_on_same_node(ranks, t));
    static int64_t runs_so_far = 0;
    Together together;
    together.run_id = runs_so_far++;
    for (const Schedule* r : ranks) together.ranks.insert(r->meta.rank);
    together.mutex = simgrid::s4u::Mutex::create();
    together.cv = simgrid::s4u::ConditionVariable::create();
    std::vector<std::unique_ptr<Run>> runs;
    for (size_t k = 0; k < ranks.size(); ++k) {
        runs.push_back(std::make_unique<Run>(*ranks[k], t, mode, adjust));
        runs.back()->hosts = &hosts[k];
        runs.back()->join(together);
    }
    for (auto& r : runs) r->launch();
    simgrid::s4u::Engine::get_instance()->run();
    if (auto e = clock_resolves()) return *e;
    std::vector<Prediction> preds;
    for (size_t k = 0; k < runs.size(); ++k) {
        for (size_t i = 0; i < ranks[k]->ops.size(); ++i)
            if (!runs[k]->pred.ops[i].simulated)
                return Error{"", "", "the ranks' schedules do not meet: rank " + std::to_string(ranks[k]->meta.rank) + "'s op " +
                                         std::to_string(i) + " (" + op_record_name(ranks[k]->ops[i].kind) +
                                         ") never ran (a send without its receive, or a group collective not every member reaches)"};
        runs[k]->summarise();
        preds.push_back(std::move(runs[k]->pred));
    }
    p2p_waits(ranks, preds);
    return preds;
}

double simulate_single_collective(const Topology& t, OpKind kind, double logged_bytes, int64_t world,
                                  CollectivePlan* plan_out, const TunerChoice& only, const EngineAdjust* adjust) {
    CollectivePlan plan = plan_collective(t, kind, logged_bytes, world, only);
    if (adjust && adjust->collective) {   // fabric mode: the collective on every rank (GroupKind::Dp)
        Op op;
        op.kind = kind;
        op.group = GroupKind::Dp;
        adjust->collective(op, plan);
    }
    if (plan_out) *plan_out = plan;
    auto& p = platform();
    LinkCapacities caps = configure(t, world, p);
    double elapsed = 0;
    simgrid::s4u::Actor::create("bench", p.rank, [&] {
        double start = simgrid::s4u::Engine::get_clock();
        run_collective(plan, caps, p);
        elapsed = simgrid::s4u::Engine::get_clock() - start;
    });
    simgrid::s4u::Engine::get_instance()->run();
    return elapsed;
}

}  // namespace zerosim
