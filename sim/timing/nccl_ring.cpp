// NCCL's ring (src/graph/tuning.cc, Ring): every rank sends the bus bytes to its neighbour; of each
// ring's n edges, `nodes` cross a node boundary, and NCCL spreads the rings so that every GPU's NIC
// carries one crossing.
#include "nccl_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

double ring_estimate(const Topology& t, const CollectiveInfo& info, Protocol p, const RankShare& r, CollectivePlan& plan) {
    const int64_t n = r.ranks, nodes = r.nodes;
    int64_t steps = info.ring_rounds * (n - 1);
    int64_t inter_steps = nodes > 1 ? info.ring_rounds * (nodes - 1) : 0;
    plan.intra_bytes = r.bus_bytes * static_cast<double>(n - nodes) / static_cast<double>(n);
    plan.inter_bytes = nodes > 1 ? r.bus_bytes * static_cast<double>(nodes) / static_cast<double>(n) : 0;
    if (nodes == 1) plan.intra_bytes = r.bus_bytes;
    double lat_us = base_latency_us(t, Algorithm::Ring, p) +
                    static_cast<double>(steps - inter_steps) * intra_step_latency_us(t, Algorithm::Ring, p) +
                    static_cast<double>(inter_steps) * (kNetRing.v[proto_index(p)] + t.nic_latency_us);
    if (nodes > 1 && p == Protocol::Simple && info.kind == OpKind::AllReduce) lat_us *= kRingSimpleAllReduceNetLatencyFactor;
    return lat_us;
}

}  // namespace zerosim::nccl
