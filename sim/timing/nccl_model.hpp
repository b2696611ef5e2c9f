// The parts of the NCCL cost model (shared docs/collectives.md), one file each: the platform's
// capacities and per-step latencies as NCCL sees them (nccl_platform.cpp), ring (nccl_ring.cpp),
// tree (nccl_tree.cpp), NVLS (nccl_nvls.cpp), channel trimming (nccl_channels.cpp); the tuner
// that weighs them is nccl_tuner.cpp (NCCL's collective model). Private to sim/timing.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/collective_table.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim::nccl {

// One rank's view of a collective, the same for every rank (ranks are symmetric).
struct RankShare {
    int64_t ranks = 1;            // n
    int64_t ranks_per_node = 1;   // g
    int64_t nodes = 1;
    double buffer_bytes = 0;      // nccl-tests' size S
    double bus_bytes = 0;         // what each rank sends in a ring: S x bus factor
    LinkCapacities cap;           // at the collective's calibrated bandwidth scale
};

// The links a rank's collectives cross, their bandwidths times `scale` (a calibrated term).
LinkCapacities scaled_link_capacities(const Topology& t, int64_t world, double scale);
// A collective's start-up latency and one intra-node step's, µs (the topology's own figures when
// it gives them, else NCCL's table).
double base_latency_us(const Topology& t, Algorithm a, Protocol p);
double intra_step_latency_us(const Topology& t, Algorithm a, Protocol p);

// Each algorithm fills the plan's bytes and rates for r (the rates arrive preset to the links'
// capacities at the protocol's cap) and returns its latency in µs, before the launch overhead and
// the calibrated latency scale.
double ring_estimate(const Topology& t, const CollectiveInfo& info, Protocol p, const RankShare& r, CollectivePlan& plan);
double tree_estimate(const Topology& t, Protocol p, const RankShare& r, CollectivePlan& plan);
double nvls_estimate(const Topology& t, const RankShare& r, CollectivePlan& plan);

// Across nodes (nccl_multinode.cpp): NVLSTree, CollNet Direct/Chain and PAT, and the pairs the
// tuner weighs there.
double across_nodes_estimate(const Topology& t, const CollectiveInfo& info, Algorithm a, const RankShare& r, CollectivePlan& plan);
std::vector<Protocol> protocols_across_nodes(const Topology& t, std::vector<Protocol> protocols);
void add_across_nodes_candidates(const Topology& t, OpKind kind, int64_t ranks_per_node, std::vector<TunerCandidate>& out);
// What the release's tuner adds to (or takes from) an estimate's latency where its constants differ
// from what the hardware shows (NVLSTree before v2.28), µs; for the choice only.
double tuner_latency_offset_us(const Topology& t, Algorithm a, int64_t nodes);
// NCCL's per-GPU-generation caps across nodes (llMaxBws, perChMax*Bws) on a ring or tree plan.
void apply_generation_caps(const Topology& t, Algorithm a, Protocol p, const RankShare& r, CollectivePlan& plan);
// The ring channels' own ceiling across nodes with LL128 or Simple (Topology::ring_channel_gbs),
// as run only: before the channels are trimmed, so that the channels kept share it.
void apply_ring_channel_rate(const Topology& t, Protocol p, const RankShare& r, CollectivePlan& plan);
// One inter-node step's latency as NCCL adds it (hwLat[NET] + the NIC's, twice for Simple: the
// flush), µs.
double inter_step_latency_us(const Topology& t, Algorithm a, Protocol p);

// The plan as NCCL runs it: the estimate's rates on the channels NCCL keeps for this size.
CollectivePlan as_run(const Topology& t, int64_t world, CollectivePlan plan);
// The tree channels NCCL keeps for a buffer of this size on `world` ranks (nccl_channels.cpp).
int running_tree_channels(const Topology& t, double buffer_bytes, int64_t world, Protocol p);
// A tree Simple all_reduce's pipeline fill across nodes, µs (nccl_tree.cpp): what the running
// plan `plan` (rates as run) takes beyond its bandwidth term while its first chunk crosses the tree.
double tree_simple_fill_us(const Topology& t, const RankShare& r, const CollectivePlan& plan);

}  // namespace zerosim::nccl
