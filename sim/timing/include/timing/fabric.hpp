// Fabric mode (`--fabric`, docs/fabric.md): the cluster as a SimGrid platform with every GPU, its
// NVSwitch port, every NIC and the leaf and spine switches (SimGrid's fat-tree zone and its
// routing), and each collective's steady-state traffic as concurrent flows on it.
//
// The flow simulation answers one number per (traffic pattern, process group): how much slower the
// slowest flow runs than the same pattern would on the ideal fabric, where every flow is limited by
// its endpoints' ports alone (the representative model's assumption). That ratio divides the
// NCCL plan's bandwidth (timing/collectives.hpp); the latency is unchanged. It does not depend on
// the bytes, so a step runs one flow simulation per pattern and group, not one per op. On a
// symmetric, non-oversubscribed fabric with nothing degraded the ratio is 1, which is why fabric
// mode agrees with the representative mode there (tests/unit/test_fabric_agreement.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// One what-if as written: `node3.nic2=0.5` (--degrade) or `rank17=0.8` (--straggler), with where
// it came from, for the error line ("--degrade", or the topology file and its field).
struct FabricWhatIf {
    std::string target;
    double share = 1.0;       // of the nominal bandwidth (degrade) or compute speed (straggler)
    std::string file;         // "" for a command-line flag
    std::string field;        // "--degrade", "whatif.degrade", ...
};
// Reads "TARGET=SHARE" (SHARE in (0, 1]); `field` names the flag in the error.
Result<FabricWhatIf> parse_fabric_what_if(const std::string& text, const std::string& field);

// What fabric mode is asked: the command line's what-ifs beside the topology's own.
struct FabricOptions {
    std::vector<FabricWhatIf> degrade;     // node<N>.nic<J>, node<N>.gpu<G>.nvlink, leaf<L>.uplink
    std::vector<FabricWhatIf> straggler;   // rank<R>
};

// The traffic a collective algorithm puts on the fabric in its steady state.
enum class FlowPattern {
    Ring,       // ring neighbours per channel (ring, PAT; NVLS inside a node)
    Tree,       // a chain inside the node, NCCL's double binary tree across nodes (tree, NVLSTree, CollNet)
    AllToAll,   // every member to every other
};
FlowPattern flow_pattern(OpKind kind, Algorithm a);

// The slowdown of one pattern on one set of concurrent groups: intra-node (NVLink) and inter-node
// (NICs and switches) flows, each the slowest flow's time over its ideal time (>= 1 up to SimGrid's
// rounding; 1 where the pattern has no flows of that kind).
struct FabricFactors {
    double intra = 1.0;
    double inter = 1.0;
};

class FabricModel {
public:
    // The topology (--nodes applied) as a platform for `world` ranks, with the what-ifs applied.
    // Errors name the what-if's flag or topology field and what was expected.
    static Result<std::shared_ptr<FabricModel>> build(const Topology& t, int64_t world, const FabricOptions& o);
    ~FabricModel();

    // Ranks placed as the engine places them: rank r on node r / gpus_per_node.
    FabricFactors factors(FlowPattern p, const std::vector<std::vector<int>>& groups);
    // Every collective's plan divided by its pattern's factors, and compute at the slowest rank's
    // speed (every collective synchronises the ranks, so each step waits for the straggler).
    EngineAdjust engine_adjust(const ScheduleMeta& meta);
    // The topology the NCCL plans are made on in fabric mode: the representative model's scalar
    // oversubscription removed (the flows on the real spine replace it).
    const Topology& ideal_topology() const;
    double compute_slowdown() const;
    int flow_simulations() const;
    // One line per pattern and group simulated: "all_gather ring on dp: intra x1.00, inter x2.00".
    std::vector<std::string> summary() const;

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace zerosim
