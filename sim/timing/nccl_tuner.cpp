// NCCL's collective model ("nccl" in the registry, timing/collective_model.hpp): its own estimate for
// each algorithm/protocol pair (src/graph/tuning.cc ncclTopoTuneModel), the pairs its tuner weighs
// on a platform, and the tuner's choice (src/enqueue.cc topoGetAlgoInfo: the lowest estimated
// time, on the full-channel estimate; channels trimmed afterwards). Each algorithm is its own file
// (nccl_model.hpp lists them).
#include <algorithm>
#include <cmath>
#include <limits>

#include "nccl_constants.hpp"
#include "nccl_model.hpp"
#include "timing/collective_model.hpp"

namespace zerosim {

namespace {

// NCCL's own estimate for one algorithm/protocol (src/graph/tuning.cc): what its tuner compares.
// `running`: the rates NCCL runs at, on the channels it keeps for this size (as_run), before the
// per-generation caps (which bound what the channels left can reach, not a share of it).
CollectivePlan nccl_estimate(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p,
                             bool running = false) {
    const CollectiveInfo& info = collective_info(kind);
    CollectivePlan plan;
    plan.choice = NcclChoice{a, p};
    nccl::RankShare r;
    r.ranks = std::max<int64_t>(world, 1);
    r.ranks_per_node = std::min<int64_t>(t.gpus_per_node, r.ranks);
    r.nodes = nodes_spanned(t, r.ranks);
    plan.buffer_bytes = r.buffer_bytes = info.buffer_bytes(logged, r.ranks);
    plan.bus_factor = info.bus_factor(r.ranks);
    r.bus_bytes = plan.buffer_bytes * plan.bus_factor;
    const Topology::Scales sc = t.scales_for(info.name);
    r.cap = nccl::scaled_link_capacities(t, r.ranks, sc.bandwidth);
    double pc = nccl::protocol_cap(p);
    plan.intra_rate = r.cap.intra * pc;
    plan.inter_rate = std::min(r.cap.nic, r.cap.fabric) * pc;
    if (r.ranks == 1) {
        plan.latency_s = nccl::base_latency_us(t, a, p) * 1e-6 * sc.latency;
        return plan;
    }
    double lat_us = a == Algorithm::NVLS   ? nccl::nvls_estimate(t, r, plan)
                    : a == Algorithm::Tree ? nccl::tree_estimate(t, p, r, plan)
                    : a == Algorithm::Ring ? nccl::ring_estimate(t, info, p, r, plan)
                                           : nccl::across_nodes_estimate(t, info, a, r, plan);
    // As run only: what a ring channel moves across nodes (NCCL's tuner rates rings on the NICs).
    if (running && a == Algorithm::Ring) nccl::apply_ring_channel_rate(t, p, r, plan);
    if (running) plan = nccl::as_run(t, world, plan);
    if (a == Algorithm::Ring || a == Algorithm::Tree) nccl::apply_generation_caps(t, a, p, r, plan);
    plan.latency_s = (lat_us + t.launch_overhead_us) * 1e-6 * sc.latency;
    // As run only (NCCL's tuner has no pipeline fill, so the choice stays its own); a time at the
    // plan's rates, so the calibrated bandwidth scale is already in it.
    if (running && a == Algorithm::Tree && p == Protocol::Simple) plan.latency_s += nccl::tree_simple_fill_us(t, r, plan) * 1e-6;
    // As run only too: the bulk protocols' call cost across nodes, outside NCCL's own estimate.
    if (running && r.nodes > 1 && p != Protocol::LL) plan.latency_s += t.nic_bulk_call_us * 1e-6;
    return plan;
}

class NcclCollectiveModel final : public CollectiveModel {
public:
    bool runs_on(const Hardware&) const override { return true; }
    std::string choice_text() const override { return kNcclModelName; }
    std::vector<TunerCandidate> candidates(const Topology& t, OpKind kind, int64_t world) const override;
    CollectivePlan plan(const Topology& t, OpKind kind, double logged, int64_t world, const TunerChoice& only) const override;
    CollectivePlan plan_with(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p) const override {
        return nccl_estimate(t, kind, logged, world, a, p, true);
    }
};

std::vector<TunerCandidate> NcclCollectiveModel::candidates(const Topology& t, OpKind kind, int64_t world) const {
    std::vector<TunerCandidate> out;
    // Shared memory (MPI on one host) has one protocol; LL128 needs NVLink (or the network).
    int64_t g = std::min<int64_t>(t.gpus_per_node, std::max<int64_t>(world, 1));
    int64_t nodes = nodes_spanned(t, world);
    std::vector<Protocol> protocols = t.intra == IntraKind::SharedMemory ? std::vector<Protocol>{Protocol::Simple}
                                      : t.intra == IntraKind::PCIe && nodes == 1
                                          ? std::vector<Protocol>{Protocol::LL, Protocol::Simple}
                                          : std::vector<Protocol>{Protocol::LL, Protocol::LL128, Protocol::Simple};
    // Across nodes over EFA only Simple runs (nccl::protocols_across_nodes says why).
    if (nodes > 1) protocols = nccl::protocols_across_nodes(t, protocols);
    for (Protocol p : protocols) out.push_back({Algorithm::Ring, p});
    // Tree runs all_reduce only, on one node too (a chain); NVLS needs the switch's reduction.
    if (kind == OpKind::AllReduce && world > 1 && t.intra != IntraKind::SharedMemory)
        for (Protocol p : protocols) out.push_back({Algorithm::Tree, p});
    if (kind == OpKind::AllReduce && t.nvls && nodes == 1 && world > 1 && t.nccl_version.has_nvls())
        out.push_back({Algorithm::NVLS, Protocol::Simple});
    // NVLSTree, CollNet and PAT: the algorithms NCCL has across nodes (nccl_multinode.cpp).
    if (nodes > 1) nccl::add_across_nodes_candidates(t, kind, g, out);
    return out;
}

CollectivePlan NcclCollectiveModel::plan(const Topology& t, OpKind kind, double logged, int64_t world,
                                         const TunerChoice& only) const {
    NcclChoice best;
    double best_t = std::numeric_limits<double>::infinity();
    const int64_t nodes = nodes_spanned(t, world);
    // NCCL picks on its full-channel estimate and trims channels afterwards (topoGetAlgoInfo).
    for (const TunerCandidate& c : candidates(t, kind, world)) {
        if (!only.allows(c)) continue;
        CollectivePlan e = nccl_estimate(t, kind, logged, world, c.algorithm, c.protocol);
        double tt = e.time_alone_s() + nccl::tuner_latency_offset_us(t, c.algorithm, nodes) * 1e-6;
        if (tt < best_t) {
            best_t = tt;
            best = {c.algorithm, c.protocol};
        }
    }
    // A choice that leaves nothing is refused before planning (tuner_candidates); should one
    // arrive anyway, the unrestricted tuner answers rather than an empty plan.
    if (!std::isfinite(best_t)) return plan(t, kind, logged, world, {});
    return nccl_estimate(t, kind, logged, world, best.algorithm, best.protocol, true);
}

}  // namespace

const CollectiveModel& nccl_collective_model() {
    static const NcclCollectiveModel model;
    return model;
}

}  // namespace zerosim
