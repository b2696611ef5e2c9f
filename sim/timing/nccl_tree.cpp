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
    double inter_us = kNetTree.v[proto_index(p)] + t.nic_latency_us;
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

}  // namespace zerosim::nccl
