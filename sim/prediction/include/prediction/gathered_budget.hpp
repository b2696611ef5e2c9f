// Stage 3: the device memory the simulated timeline may hold in gathered parameters (the engine's
// gathered_budget_bytes): the GPU's memory less everything else the memory model counts.
#pragma once

#include <cstdint>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// INT64_MAX (no bound) below stage 3 or where the topology gives no gpu.memory_gb. Activations
// are not in the memory model, so the budget is an upper bound on what a real run has.
int64_t gathered_parameter_budget(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t);

}  // namespace zerosim
