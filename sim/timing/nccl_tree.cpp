// NCCL's tree all_reduce (src/graph/tuning.cc, Tree): a double binary tree across nodes and a
// chain inside each; every rank of a chain moves the buffer up and down once (2S: NCCL's algorithm
// bandwidth is half the bus's), its node's share crossing the NICs, at the tree's own rates.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nccl_constants.hpp"
#include "nccl_multinode_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

namespace {

// Applied to the bandwidth, so the per-size correction moves both NCCL's choice and a tree's time.
double tree_bandwidth_factor(Protocol p, int64_t nodes, double buffer_bytes) {
    double f = kTreeBusCap;
    if (p == Protocol::LL) f /= kTreeLLDivisor;
    if (p == Protocol::LL128) f *= nodes > 1 ? kTreeLL128NetFactor : kTreeLL128IntraFactor;
    // log2i(nBytes >> 6): the floor of log2 of the buffer in 64-byte units (0 below 128 B).
    int log_size = 0;
    for (auto units = static_cast<uint64_t>(std::max(0.0, buffer_bytes)) >> 6; units >>= 1;) ++log_size;
    if (log_size < kTreeCorrectedSizes) f *= kTreeCorrection[proto_index(p)][log_size];
    return f;
}

}  // namespace

double tree_estimate(const Topology& t, Protocol p, const RankShare& r, CollectivePlan& plan) {
    const int64_t g = r.ranks_per_node, nodes = r.nodes;
    plan.intra_bytes = 2 * r.buffer_bytes;
    // A node's NICs carry 2S in a double binary tree (an inner node of one tree: its share up and
    // down to two children; a leaf of the other: up and down once) but S on two nodes, where each
    // tree is one edge that half of the buffer crosses once each way.
    plan.inter_bytes = nodes > 2 ? 2 * r.buffer_bytes / static_cast<double>(g)
                       : nodes == 2 ? r.buffer_bytes / static_cast<double>(g)
                                    : 0;
    double f = tree_bandwidth_factor(p, nodes, r.buffer_bytes);
    plan.intra_rate = r.cap.intra * f;
    plan.inter_rate = std::min(r.cap.nic, r.cap.fabric) * f;
    double log2n = nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) : 0;
    double inter_us = hw_latency_table_us(kHwNet, Algorithm::Tree, p) + t.nic_latency_us;
    if (nodes > 1) {
        // Across nodes NCCL multiplies by log2i (the floor) and pays the NIC's latency twice for
        // Simple (the flush); v2.21's Simple step is 28 µs (nccl_multinode_constants.hpp).
        log2n = std::floor(std::log2(static_cast<double>(nodes)));
        inter_us = inter_step_latency_us(t, Algorithm::Tree, p);
    }
    double intra_us = intra_step_latency_us(t, Algorithm::Tree, p);
    if (nodes > 1 && p == Protocol::Simple && t.intra_step_latency_us <= 0 && t.nccl_version.at_least(2, 21) &&
        !t.nccl_version.at_least(2, 23))
        intra_us = kTreeSimpleStepV221Us;
    return base_latency_us(t, Algorithm::Tree, p) + 2 * ((g - 1) * intra_us + log2n * inter_us);
}

double tree_simple_fill_us(const Topology& t, const RankShare& r, const CollectivePlan& plan) {
    // Tree Simple moves whole chunks: a rank forwards a chunk once all of it has arrived (the
    // step's tail counter, ProtoSimple<1,1>; LL and LL128 forward each 8/128-byte line as its
    // flag arrives, so their fill is a line's, left out). The chunk is one Simple step (512 KiB,
    // no shrinking for tree Simple in enqueue.cc calcCollChunking) or the channel's whole share
    // (all_reduce.h runTreeUpDown: min(chunkCount, channelCount)). A pipeline of stages takes
    // (chunks - 1) x its slowest stage + one chunk through every stage; the bandwidth term has
    // chunks x the slowest, so the fill is every stage's chunk time less the slowest's: 2(g - 1)
    // NVLink hops (up and down the chain) and 2 log2i(nodes) network hops.
    //
    // Only where the topology names its GPU, as NCCL's per-generation caps (apply_generation_caps):
    // a file without one (compute_capability 0: the hand-derived topologies of the unit tests)
    // keeps NCCL's own estimate. On one node the chain fills too; unchecked there, left out.
    const int64_t g = r.ranks_per_node, nodes = r.nodes;
    if (nodes <= 1 || t.compute_capability == 0 || plan.intra_rate <= 0 || plan.inter_rate <= 0) return 0;
    const double channels = running_tree_channels(t, r.buffer_bytes, r.ranks, Protocol::Simple);
    const double chunk = std::min(kTreeSimpleChunkBytes, r.buffer_bytes / channels);
    // A channel's share: of the GPU's NVLink (the plan's rate, all channels together) for one
    // hop, of the node's NICs (g GPUs' shares) for a network hop.
    const double nvlink_hop_s = chunk * channels / plan.intra_rate;
    const double net_hop_s = chunk * channels / (plan.inter_rate * static_cast<double>(g));
    const double net_hops = 2 * std::floor(std::log2(static_cast<double>(nodes)));
    // In the stream a GPU's NVLink carries each chunk up and down; a node's NICs carry it once
    // on two nodes, twice beyond (tree_estimate's bytes).
    const double slowest = std::max(2 * nvlink_hop_s, net_hop_s * (nodes > 2 ? 2.0 : 1.0));
    const double through = 2.0 * static_cast<double>(g - 1) * nvlink_hop_s + net_hops * net_hop_s;
    return std::max(0.0, through - slowest) * 1e6;
}

}  // namespace zerosim::nccl
