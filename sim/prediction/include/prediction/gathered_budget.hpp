// Stage 3: the device memory the simulated timeline may hold in gathered parameters (the engine's
// gathered_budget_bytes): the GPU's memory less everything else the fit line counts on the device
// (analysis/memory_report.hpp schedule_fit: model states, activations, the framework's reserve;
// offloaded states are in host memory and take none of it).
#pragma once

#include <cstdint>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// INT64_MAX (no bound) below stage 3 or where the topology gives no gpu.memory_gb; 0 where the rank
// does not fit (the fit line says "does not fit": every gather then waits for the last to be freed).
int64_t gathered_parameter_budget(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t);

}  // namespace zerosim
