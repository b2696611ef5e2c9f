// explain's ZeRO++ / MiCS part: what hpZ size to use and how much inter-node traffic each removes,
// with numbers for the user's model and node size (bench/zero_variants_bench reads the bytes too).
#pragma once

#include <cstdint>
#include <string>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

// Bytes one rank receives from ranks on other nodes for the collectives of `step`, ranks placed
// on nodes of `gpus_per_node` in order: each op's per-rank wire bytes (wire_bytes_per_rank's
// accounting) times the share of its group's other members that sit on another node.
double inter_node_bytes_per_rank(const Schedule& s, int step, int64_t gpus_per_node);

// The "what hpZ size should I use here?" section (stage 3 only; "" otherwise): per candidate size
// k dividing the world, the later-step inter-node bytes per rank and the secondary copy's memory.
std::string explain_hpz_choice(const Model& model, const DsConfig& cfg, const Schedule& s);

}  // namespace zerosim
