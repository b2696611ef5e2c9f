// NCCL's tree all_reduce (src/graph/tuning.cc, Tree): a double binary tree across nodes and a
// chain inside each; every rank of a chain moves the buffer up and down once (2S: NCCL's algorithm
// bandwidth is half the bus's), its node's share crossing the NICs, at the tree's own rates.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nccl_constants.hpp"
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
    plan.inter_bytes = nodes > 1 ? 2 * r.buffer_bytes / static_cast<double>(g) : 0;
    double f = tree_bandwidth_factor(p, nodes, r.buffer_bytes);
    plan.intra_rate = r.cap.intra * f;
    plan.inter_rate = std::min(r.cap.nic, r.cap.fabric) * f;
    double log2n = nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) : 0;
    return base_latency_us(t, Algorithm::Tree, p) +
           2 * ((g - 1) * intra_step_latency_us(t, Algorithm::Tree, p) + log2n * (kNetTree.v[proto_index(p)] + t.nic_latency_us));
}

}  // namespace zerosim::nccl
