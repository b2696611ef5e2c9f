// What NCCL runs across nodes beyond rings and trees (src/graph/tuning.cc ncclTopoTuneModel, the
// per-algorithm branches; src/enqueue.cc for the choice): NVLSTree, CollNet Direct and Chain
// (SHARP), PAT; the per-generation caps NCCL puts on rings and trees there; and the all_to_all
// nccl-tests times. Data movement is zerosim's (docs/collectives.md §5): the bytes a node's NICs
// and a GPU's NVLink carry, at the link rates, capped where NCCL's own per-channel figures say
// the hardware tops out.
#include <algorithm>
#include <cmath>

#include "nccl_constants.hpp"
#include "nccl_model.hpp"
#include "nccl_multinode_constants.hpp"

namespace zerosim::nccl {

namespace {

int log2_floor(int64_t v) {
    int l = 0;
    while (v >>= 1) ++l;
    return l;
}

// Channels NCCL runs across nodes: two per NIC a GPU owns (connect.cc doubles the search's
// channels; the search puts one per NIC), at most MAXCHANNELS (max_channels: until 2026-12-01 this
// was 32, v2.24's MAXCHANNELS, for every release; no shipped topology reaches it).
int net_channels(const Topology& t, int64_t g) {
    int64_t heads = std::max<int64_t>(1, std::min<int64_t>(t.nics_per_node, g));
    return static_cast<int>(std::min<int64_t>(max_channels(t.nccl_version), kRuntimeChannelsPerSearchChannel * heads));
}

// Slows the plan so that `bus_bytes` take at least bus_bytes / cap (cap in B/s).
void cap_bus(CollectivePlan& plan, double bus_bytes, double cap) {
    if (!(cap > 0) || bus_bytes <= 0) return;
    double now = std::max(plan.intra_bytes > 0 ? plan.intra_bytes / plan.intra_rate : 0.0,
                          plan.inter_bytes > 0 ? plan.inter_bytes / plan.inter_rate : 0.0);
    double floor_s = bus_bytes / cap;
    if (now <= 0 || now >= floor_s) return;
    plan.intra_rate *= now / floor_s;
    plan.inter_rate *= now / floor_s;
}

double nic_rate(const RankShare& r) { return std::min(r.cap.nic, r.cap.fabric); }

}  // namespace

double inter_step_latency_us(const Topology& t, Algorithm a, Protocol p) {
    double lat = hw_latency_table_us(kHwNet, a == Algorithm::Tree ? Algorithm::Tree : Algorithm::Ring, p);
    if (a == Algorithm::Tree && p == Protocol::Simple && t.nccl_version.at_least(2, 21) && !t.nccl_version.at_least(2, 23))
        lat = kTreeSimpleStepV221Us;
    // latencyInter is the NIC's; Simple pays it twice (the flush after a GPUDirect receive).
    return lat + t.nic_latency_us * (p == Protocol::Simple ? 2.0 : 1.0);
}

std::vector<Protocol> protocols_across_nodes(const Topology& t, std::vector<Protocol> protocols) {
    // EFA's RDMA does not deliver a message's bytes in order, which LL and LL128 rely on (a flag
    // stored with the data); aws-ofi-nccl's platform defaults leave Simple (NCCL_PROTO=simple).
    if (t.nic_kind == NicKind::EFA) return {Protocol::Simple};
    return protocols;
}

void add_across_nodes_candidates(const Topology& t, OpKind kind, int64_t g, std::vector<TunerCandidate>& out) {
    const NcclVersion& v = t.nccl_version;
    if (kind == OpKind::AllReduce) {
        // NVLSTree needs NVLS inside the node; AWS's tuner plugin keeps rings and trees instead.
        if (t.nvls && v.has_nvls_tree() && !t.aws_tuner && g > 1) out.push_back({Algorithm::NVLSTree, Protocol::Simple});
        if (t.sharp) {
            out.push_back({Algorithm::CollNetDirect, Protocol::Simple});
            if (v.has_collnet_chain()) out.push_back({Algorithm::CollNetChain, Protocol::Simple});
        }
    }
    // PAT: all_gather and reduce_scatter, one GPU per node only (ncclPatEnable).
    if ((kind == OpKind::AllGather || kind == OpKind::ReduceScatter) && v.has_pat() && g == 1)
        out.push_back({Algorithm::PAT, Protocol::Simple});
}

double tuner_latency_offset_us(const Topology& t, Algorithm a, int64_t nodes) {
    if (a != Algorithm::NVLSTree || nodes <= 1) return 0;
    StepLatency own = nvls_tree_latency(t.nccl_version), hw = nvls_tree_step_on_hardware();
    return (own.nvlink - hw.nvlink) + 2.0 * log2_floor(nodes) * (own.net - hw.net);
}

void apply_generation_caps(const Topology& t, Algorithm a, Protocol p, const RankShare& r, CollectivePlan& plan) {
    if (r.nodes <= 1 || t.compute_capability == 0) return;
    const int gen = generation_index(t.compute_capability), ni = node_index(r.nodes);
    const double nch = net_channels(t, r.ranks_per_node);
    const double ll_max = (r.nodes <= 2 ? kLLMaxBusTwoNodes : kLLMaxBusMoreNodes) * 1e9;
    if (a == Algorithm::Ring) {
        if (p == Protocol::LL) cap_bus(plan, r.bus_bytes, ll_max);
        if (p == Protocol::LL128) cap_bus(plan, r.bus_bytes, nch * kPerChMaxRingLL128[gen][ni] * 1e9);
    } else if (a == Algorithm::Tree) {
        // A tree's bus bandwidth carries 2S (its algorithm bandwidth is half of it).
        double cap = nch * kPerChMaxTree[gen][ni] * kTreeBusCap;
        if (p == Protocol::LL) cap = std::min(cap, ll_max / 1e9);
        if (p == Protocol::LL128) cap = std::min(cap, nch * kPerChMaxTreeLL128[gen][ni]);
        cap_bus(plan, 2 * r.buffer_bytes, cap * 1e9);
    }
}

void apply_ring_channel_rate(const Topology& t, Protocol p, const RankShare& r, CollectivePlan& plan) {
    if (r.nodes <= 1 || p == Protocol::LL || !(t.ring_channel_gbs > 0)) return;
    cap_bus(plan, r.bus_bytes, net_channels(t, r.ranks_per_node) * t.ring_channel_gbs * 1e9);
}

double across_nodes_estimate(const Topology& t, const CollectiveInfo& info, Algorithm a, const RankShare& r, CollectivePlan& plan) {
    const int64_t g = r.ranks_per_node, nodes = r.nodes, n = r.ranks;
    const double S = r.buffer_bytes;
    const double nic_lat = t.nic_latency_us * 2;   // Simple only: the NIC's latency and the flush
    const NcclVersion& v = t.nccl_version;
    const int gen = generation_index(t.compute_capability), ni = node_index(nodes);
    plan.inter_rate = nic_rate(r);
    if (a == Algorithm::NVLSTree) {
        // NVLS reduce-scatters inside the node (each GPU's buffer up once, its 1/g share back),
        // a tree across nodes carries each GPU's share, NVLS all-gathers: S(1 + 1/g) on NVLink.
        // Across nodes a node sends S (two nodes: each half of the double tree crosses once each
        // way) or 2S (an inner node of one tree: its share up, and down to two children).
        plan.intra_bytes = S * (1.0 + 1.0 / static_cast<double>(g));
        plan.intra_rate = r.cap.intra * t.nvls_efficiency;
        plan.inter_bytes = S * (nodes <= 2 ? 1.0 : 2.0) / static_cast<double>(g);
        // NCCL's per-channel NVLSTree ceiling (perChMaxNVLSTreeBws) on one channel per NIC head,
        // as bus bandwidth: algbw = bus x n / 2(n-1).
        double heads = static_cast<double>(std::max<int64_t>(1, std::min<int64_t>(t.nics_per_node, g)));
        double cap_bus_gbs = heads * kPerChMaxNVLSTree[gen][ni];
        if (cap_bus_gbs > 0) cap_bus(plan, S * 2.0 * static_cast<double>(n - 1) / static_cast<double>(n), cap_bus_gbs * 1e9);
        StepLatency l = nvls_tree_step_on_hardware();
        return l.nvlink + 2.0 * log2_floor(nodes) * (l.net + nic_lat);
    }
    if (a == Algorithm::CollNetDirect || a == Algorithm::CollNetChain) {
        // The switches reduce: a node sends its S to the network once and receives the result
        // once. Direct: every GPU reduce-scatters and all-gathers its 1/g inside the node and
        // talks to the network itself (at full speed only with a NIC per GPU: NCCL divides by
        // r - (r-1)/2 for r GPUs per NIC, and takes 0.85 on Hopper and later). Chain: the buffer
        // goes down and up a chain through the node's GPUs (2S over each GPU's NVLink).
        plan.inter_bytes = S / static_cast<double>(g);
        if (a == Algorithm::CollNetDirect) {
            plan.intra_bytes = 2.0 * S * static_cast<double>(g - 1) / static_cast<double>(g);
            double per_nic = static_cast<double>(g) / std::max(1, t.nics_per_node);
            if (per_nic > 1) plan.inter_rate /= per_nic - (per_nic - 1) / 2;
            if (t.compute_capability >= 90) plan.inter_rate *= kCollNetDirectHopperFactor;
            StepLatency l = collnet_direct_latency(v);
            return 2.0 * (std::min<int64_t>(1, g - 1) * l.nvlink + static_cast<double>(g - 1) * kCollNetDirectArityUs) +
                   l.net + nic_lat;
        }
        plan.intra_bytes = 2.0 * S;
        StepLatency l = collnet_chain_latency(v);
        return 2.0 * static_cast<double>(g - 1) * l.nvlink + l.net + nic_lat;
    }
    // PAT (one GPU per node): the ring's bytes at 0.75 of its bandwidth, a log-depth latency and
    // NCCL's linear per-rank term.
    plan.intra_bytes = 0;
    plan.inter_bytes = r.bus_bytes;
    plan.inter_rate *= kPatBandwidthFactor;
    (void)info;
    return pat_base_us() + log2_floor(nodes) * (pat_net_us() + nic_lat) / kPatLogDivisor + static_cast<double>(n) * kPatPerRankUs;
}

}  // namespace zerosim::nccl
