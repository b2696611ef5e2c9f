// A what-if beside the real schedule (predict --what-if, report --what-if): the same figures for
// both, the later step, per rank. The what-if side is never DeepSpeed's schedule and says so.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "analysis/fit.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "timing/engine.hpp"

namespace zerosim {

struct WhatIfSide {
    std::string label;              // "DeepSpeed 0.19.5, stage 3" / "what-if fsdp-full-shard (not DeepSpeed)"
    double volume_bytes = 0;        // what each rank sends and receives (explain's convention), the last step
    double inter_node_bytes = 0;    // through its node's NICs (nic_bytes_per_gpu), the last step
    double step_ms = 0, comm_ms = 0, exposed_ms = 0;   // the last step, overlapped
    FitEstimate fit;                // memory per rank against the GPU
};

struct WhatIfComparison {
    std::string name;               // the --what-if NAME
    WhatIfSide real, what_if;
};

// Bytes per GPU through its node's NICs for the collectives of `step` (what_if_compare.cpp says how).
double nic_bytes_per_gpu(const Schedule& s, int step, int64_t gpus_per_node);

// Model-state bytes per rank of `s`: FSDP's estimate for an FSDP what-if
// (schedule/what_if_fsdp.hpp), else `deepspeed_bytes` (analysis/memory.hpp's, which a
// reduce-scatter what-if does not change).
int64_t what_if_model_state_bytes(const Schedule& s, int64_t deepspeed_bytes);
// A data-parallel rank's fit on topology `t` (analysis/memory_report.hpp schedule_fit with the
// topology's GPU, node RAM and GPUs per node), its model states a what-if's own where `s` is one:
// sweep's columns and need's probes.
FitEstimate point_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t, bool activation_checkpointing);

// One side's figures; `fit` carries the activations, reserve and GPU (its model states are taken
// from what_if_model_state_bytes).
WhatIfSide what_if_side(const std::string& label, const Schedule& s, const Prediction& overlapped, FitEstimate fit,
                        int64_t gpus_per_node);

// The side-by-side table (text), each line after `prefix`.
void write_what_if_table(std::ostream& out, const WhatIfComparison& c, const std::string& prefix);
// The same as one JSON object's text: {"name", "deepspeed_schedule": {...}, "what_if": {...}}.
std::string what_if_json(const WhatIfComparison& c);

}  // namespace zerosim
