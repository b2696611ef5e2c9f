// The parts of the NCCL cost model (shared docs/collectives.md), one file each: the platform's
// capacities and per-step latencies as NCCL sees them (nccl_platform.cpp), ring (nccl_ring.cpp),
// tree (nccl_tree.cpp), NVLS (nccl_nvls.cpp), channel trimming (nccl_channels.cpp); the tuner
// that weighs them is collectives.cpp. Private to sim/timing.
#pragma once

#include <cstdint>

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

// The plan as NCCL runs it: the estimate's rates on the channels NCCL keeps for this size.
CollectivePlan as_run(const Topology& t, int64_t world, CollectivePlan plan);

}  // namespace zerosim::nccl
