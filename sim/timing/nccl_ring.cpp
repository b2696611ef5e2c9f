// NCCL's ring (src/graph/tuning.cc, Ring): every rank sends the bus bytes to its neighbour; of each
// ring's n edges, `nodes` cross a node boundary, and NCCL spreads the rings so that every GPU's NIC
// carries one crossing.
#include <algorithm>

#include "nccl_constants.hpp"
#include "nccl_multinode_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

double ring_estimate(const Topology& t, const CollectiveInfo& info, Protocol p, const RankShare& r, CollectivePlan& plan) {
    const int64_t n = r.ranks, nodes = r.nodes;
    int64_t steps = info.ring_rounds * (n - 1);
    int64_t inter_steps = nodes > 1 ? info.ring_rounds * (nodes - 1) : 0;
    plan.intra_bytes = r.bus_bytes * static_cast<double>(n - nodes) / static_cast<double>(n);
    plan.inter_bytes = nodes > 1 ? r.bus_bytes * static_cast<double>(nodes) / static_cast<double>(n) : 0;
    if (nodes == 1) plan.intra_bytes = r.bus_bytes;
    double intra_us = intra_step_latency_us(t, Algorithm::Ring, p);
    double inter_us = hw_latency_table_us(kHwNet, Algorithm::Ring, p) + t.nic_latency_us;
    if (nodes > 1) {
        // Across nodes (tuning.cc, ring latency): every step costs at least the network post
        // overhead (x3 for Simple); the network step is hwLat[NET] plus the NIC's latency, twice
        // for Simple (the flush); with one GPU per node the tree's network figure is used.
        intra_us = std::max(intra_us, kNetOverheadUs * (p == Protocol::Simple ? kNetOverheadSimpleFactor : 1.0));
        inter_us = inter_step_latency_us(t, r.ranks_per_node == 1 ? Algorithm::Tree : Algorithm::Ring, p);
    }
    double lat_us = base_latency_us(t, Algorithm::Ring, p) + static_cast<double>(steps - inter_steps) * intra_us +
                    static_cast<double>(inter_steps) * inter_us;
    if (nodes > 1 && p == Protocol::Simple && info.kind == OpKind::AllReduce) lat_us *= kRingSimpleAllReduceNetLatencyFactor;
    return lat_us;
}

}  // namespace zerosim::nccl
