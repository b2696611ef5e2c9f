// `zerosim sweep --set network.KEY=...` and `--fabric` (docs/fabric.md): the topology's network
// as a sweep dimension, and each point timed in fabric mode when asked.
#pragma once

#include <memory>

#include <string>

#include "core/error.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// network.oversubscription (>= 1), network.nodes_per_leaf (a whole number >= 1),
// network.background_spine_load (0 to below 1): the topology's network block.
bool is_network_key(const std::string& key);
const std::vector<std::string>& network_keys();
// The value checked as the topology reader checks it ("--set" errors).
Status check_network_value(const std::string& key, const std::string& value);
void apply_network_value(Topology& t, const std::string& key, const std::string& value);

// A point's timing: the representative mode, or fabric mode with the what-ifs.
struct SweepFabric {
    bool on = false;
    FabricOptions options;
};
Result<Prediction> simulate_point(const Schedule& s, const Topology& t, int64_t gathered_budget, const SweepFabric& f);
// The fabric model of a point on `world` ranks: the topology's whatif block, then the flags'.
Result<std::shared_ptr<FabricModel>> fabric_model_for_point(const Topology& t, int64_t world, const SweepFabric& f);

}  // namespace zerosim
