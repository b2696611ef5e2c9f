#include "timing/collectives.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "mpi_transport.hpp"
#include "nccl_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim {

namespace {
std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace

const char* algorithm_name(Algorithm a) {
    switch (a) {
        case Algorithm::Ring: return "ring";
        case Algorithm::Tree: return "tree";
        case Algorithm::NVLS: return "nvls";
        case Algorithm::NVLSTree: return "nvlstree";
        case Algorithm::CollNetDirect: return "collnetdirect";
        case Algorithm::CollNetChain: return "collnetchain";
        case Algorithm::PAT: return "pat";
    }
    return "?";
}

std::string algorithm_protocol_name(Algorithm a, Protocol p) {
    return std::string(algorithm_name(a)) + "/" + protocol_name(p);
}

std::optional<Algorithm> algorithm_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::NVLS, Algorithm::NVLSTree, Algorithm::CollNetDirect,
                        Algorithm::CollNetChain, Algorithm::PAT})
        if (n == algorithm_name(a)) return a;
    return std::nullopt;
}

std::optional<Protocol> protocol_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
        if (n == lowercase(protocol_name(p))) return p;
    return std::nullopt;
}

const char* protocol_name(Protocol p) {
    switch (p) {
        case Protocol::LL: return "LL";
        case Protocol::LL128: return "LL128";
        case Protocol::Simple: return "Simple";
    }
    return "?";
}

double CollectivePlan::time_alone_s() const {
    double t = 0;
    if (intra_bytes > 0) t = std::max(t, intra_bytes / intra_rate);
    if (inter_bytes > 0) t = std::max(t, inter_bytes / inter_rate);
    return latency_s + t;
}

namespace {

// NCCL's own estimate for one algorithm/protocol (src/graph/tuning.cc): what its tuner compares.
// `running`: the rates NCCL runs at, on the channels it keeps for this size (as_run), before the
// per-generation caps (which bound what the channels left can reach, not a share of it).
CollectivePlan nccl_estimate(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p,
                             bool running = false) {
    const CollectiveInfo& info = collective_info(kind);
    CollectivePlan plan;
    plan.algorithm = a;
    plan.protocol = p;
    nccl::RankShare r;
    r.ranks = std::max<int64_t>(world, 1);
    r.ranks_per_node = std::min<int64_t>(t.gpus_per_node, r.ranks);
    r.nodes = (r.ranks + r.ranks_per_node - 1) / r.ranks_per_node;
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
    if (running) plan = nccl::as_run(t, world, plan);
    if (a == Algorithm::Ring || a == Algorithm::Tree) nccl::apply_generation_caps(t, a, p, r, plan);
    plan.latency_s = (lat_us + t.launch_overhead_us) * 1e-6 * sc.latency;
    // As run only (NCCL's tuner has no pipeline fill, so the choice stays its own); a time at the
    // plan's rates, so the calibrated bandwidth scale is already in it.
    if (running && a == Algorithm::Tree && p == Protocol::Simple) plan.latency_s += nccl::tree_simple_fill_us(t, r, plan) * 1e-6;
    return plan;
}

}  // namespace

CollectivePlan plan_collective_with(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p) {
    if (t.openmpi_tuned) return mpi::plan_openmpi_tuned(t, kind, logged, world);   // no NCCL choice to force
    return nccl_estimate(t, kind, logged, world, a, p, true);
}

std::vector<TunerCandidate> tuner_candidates(const Topology& t, OpKind kind, int64_t world) {
    std::vector<TunerCandidate> out;
    // Shared memory (MPI on one host) has one protocol; LL128 needs NVLink (or the network).
    int64_t g = std::min<int64_t>(t.gpus_per_node, std::max<int64_t>(world, 1));
    int64_t nodes = (std::max<int64_t>(world, 1) + g - 1) / g;
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

CollectivePlan plan_collective(const Topology& t, OpKind kind, double logged, int64_t world, const TunerChoice& only) {
    if (t.openmpi_tuned) return mpi::plan_openmpi_tuned(t, kind, logged, world);   // OpenMPI's rules, not NCCL's tuner
    CollectivePlan best;
    double best_t = std::numeric_limits<double>::infinity();
    const int64_t g = std::min<int64_t>(t.gpus_per_node, std::max<int64_t>(world, 1));
    const int64_t nodes = (std::max<int64_t>(world, 1) + g - 1) / g;
    // NCCL picks on its full-channel estimate and trims channels afterwards (topoGetAlgoInfo).
    for (const TunerCandidate& c : tuner_candidates(t, kind, world)) {
        if (!only.allows(c)) continue;
        CollectivePlan e = nccl_estimate(t, kind, logged, world, c.algorithm, c.protocol);
        double tt = e.time_alone_s() + nccl::tuner_latency_offset_us(t, c.algorithm, nodes) * 1e-6;
        if (tt < best_t) {
            best_t = tt;
            best = e;
        }
    }
    // A choice that leaves nothing is refused before planning (tuner_candidates); should one
    // arrive anyway, the unrestricted tuner answers rather than an empty plan.
    if (!std::isfinite(best_t)) return plan_collective(t, kind, logged, world);
    return nccl_estimate(t, kind, logged, world, best.algorithm, best.protocol, true);
}

double back_to_back_call_us(const Topology& t, double collective_us, int gpus_per_thread) {
    return std::max(collective_us, static_cast<double>(std::max(1, gpus_per_thread)) * t.launch_overhead_us);
}

Result<TunerChoice> tuner_choice_named(const std::string& algo, const std::string& proto, const Topology& t, OpKind kind,
                                       const std::string& op_name, int64_t world) {
    TunerChoice c;
    if (!algo.empty()) {
        c.algorithm = algorithm_named(algo);
        if (!c.algorithm) return Error{"", "--algo", "unknown algorithm '" + algo + "'; expected ring, tree, nvls, nvlstree, collnetdirect, collnetchain or pat"};
    }
    if (!proto.empty()) {
        c.protocol = protocol_named(proto);
        if (!c.protocol) return Error{"", "--proto", "unknown protocol '" + proto + "'; expected LL, LL128 or Simple"};
    }
    std::vector<TunerCandidate> all = tuner_candidates(t, kind, world);
    if (std::none_of(all.begin(), all.end(), [&](const TunerCandidate& x) { return c.allows(x); })) {
        std::string avail;
        for (const auto& x : all) avail += (avail.empty() ? "" : ", ") + algorithm_protocol_name(x.algorithm, x.protocol);
        return Error{t.source, algo.empty() ? "--proto" : "--algo",
                     "NCCL has no " + (algo.empty() ? std::string("") : algo + " ") + (proto.empty() ? std::string("") : proto + " ") +
                         "for " + op_name + " on " + std::to_string(world) + " ranks of " + t.name + "; it weighs " + avail};
    }
    return c;
}

}  // namespace zerosim
