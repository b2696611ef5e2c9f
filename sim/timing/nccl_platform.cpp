// The platform as NCCL's cost model sees it: link capacities through NCCL's channels, and the
// per-step latencies of its table (nccl_constants.hpp) for the link kind.
#include <algorithm>

#include "nccl_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

namespace {
bool nvlink(const Topology& t) { return t.intra == IntraKind::NVSwitch || t.intra == IntraKind::NVLinkMesh; }
}  // namespace

LinkCapacities scaled_link_capacities(const Topology& t, int64_t world, double scale) {
    LinkCapacities c;
    // NCCL drives the intra-node link through its channels; their sum, not the raw link, is what
    // a collective reaches (e.g. 12 channels x 20 GB/s on A100's 12 NVLinks).
    double ring = std::min(t.intra_channels * t.channel_bandwidth_gbs, t.intra_bandwidth_gbs);
    c.intra = ring * 1e9;
    // What one NCCL transfer reaches of the NICs' line rate (nics.efficiency; 1 unless the file says).
    c.nic = t.nic_bandwidth_per_gpu_gbs() * 1e9 * t.nic_efficiency;
    int64_t nodes = nodes_spanned(t, world);
    c.fabric = c.nic;
    // Traffic between leaves of an oversubscribed fat tree shares the uplinks; a rail-optimised
    // fabric keeps ring traffic on its rail.
    if (t.fabric == FabricKind::FatTree && t.oversubscription > 1.0 && (t.nodes_per_leaf == 0 || nodes > t.nodes_per_leaf))
        c.fabric = c.nic / t.oversubscription;
    c.intra *= scale;
    c.nic *= scale;
    c.fabric *= scale;
    return c;
}

double intra_step_latency_us(const Topology& t, Algorithm a, Protocol p) {
    if (t.intra_step_latency_us > 0) return t.intra_step_latency_us;
    // Algorithms other than the tree take the ring's figures here (their own are in their files).
    return hw_latency_table_us(nvlink(t) ? kHwNvlink : kHwPci, a == Algorithm::Tree ? Algorithm::Tree : Algorithm::Ring, p);
}

double base_latency_us(const Topology& t, Algorithm a, Protocol p) {
    if (t.base_latency_us > 0) return t.base_latency_us;
    return base_latency_table_us(a == Algorithm::Tree ? Algorithm::Tree : Algorithm::Ring, p);
}

}  // namespace zerosim::nccl

namespace zerosim {

LinkCapacities link_capacities(const Topology& t, int64_t world) {
    return nccl::scaled_link_capacities(t, world, t.max_bandwidth_scale());
}

}  // namespace zerosim
