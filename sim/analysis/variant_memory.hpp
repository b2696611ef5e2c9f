// ZeRO++ / MiCS memory items for estimate_memory (private to sim/analysis).
#pragma once

#include "analysis/memory.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

// hpZ's secondary partitions, qwZ's and qgZ's quantized buffers (nothing without a variant).
void add_variant_memory(MemoryEstimate& e, const Model& m, const DsConfig& cfg, const Schedule& s);

}  // namespace zerosim
