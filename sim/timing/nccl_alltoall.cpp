// all_to_all as nccl-tests' alltoall_perf runs it (src/alltoall.cu: one ncclSend and one ncclRecv
// per peer in a group) and as ZeRO++ qgZ calls it (torch all_to_all_single): each rank sends S/n
// to every rank. NCCL moves point-to-point traffic on its p2p channels, a few per peer
// (NCCL_NCHANNELS_PER_NET_PEER), not on the ring's; the share of the NIC line rate that reaches
// is fitted (nccl_multinode_constants.hpp) on one table and checked on the others.
#include <algorithm>

#include "nccl_constants.hpp"
#include "nccl_model.hpp"
#include "nccl_multinode_constants.hpp"

namespace zerosim {

CollectivePlan plan_all_to_all(const Topology& t, double buffer_bytes, int64_t world) {
    CollectivePlan plan;
    plan.choice = NcclChoice{Algorithm::Ring, Protocol::Simple};   // NCCL names no algorithm for p2p; bench prints "p2p"
    const int64_t n = std::max<int64_t>(world, 1);
    const int64_t g = std::min<int64_t>(t.gpus_per_node, n);
    plan.buffer_bytes = buffer_bytes;
    plan.bus_factor = static_cast<double>(n - 1) / static_cast<double>(n);
    const Topology::Scales sc = t.scales_for("alltoall");
    LinkCapacities cap = nccl::scaled_link_capacities(t, n, sc.bandwidth);
    // Peers on the node over NVLink, the others through the rank's NIC share.
    plan.intra_bytes = buffer_bytes * static_cast<double>(g - 1) / static_cast<double>(n);
    plan.inter_bytes = buffer_bytes * static_cast<double>(n - g) / static_cast<double>(n);
    plan.intra_rate = cap.intra;
    plan.inter_rate = std::min(cap.nic, cap.fabric) * nccl::kAllToAllNetShare;
    if (n == 1) return plan;
    // One Simple send/receive round: the base latency, one NVLink step and, across nodes, one
    // network step with the NIC's latency and flush.
    double lat = nccl::base_latency_table_us(Algorithm::Ring, Protocol::Simple) +
                 nccl::hw_latency_table_us(nccl::kHwNvlink, Algorithm::Ring, Protocol::Simple);
    if (n > g) lat += nccl::inter_step_latency_us(t, Algorithm::Ring, Protocol::Simple);
    plan.latency_s = (lat + t.launch_overhead_us) * 1e-6 * sc.latency;
    return plan;
}

}  // namespace zerosim
