// Memory per rank for the model states of a schedule: what DeepSpeed v0.14.2 allocates for
// parameters, gradients, optimizer states and communication buckets at each stage, beside the ZeRO
// paper's formulas and DeepSpeed's own estimator, with the reason for each difference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inputs/ds_config.hpp"
#include "schedule/ir.hpp"
#include "inputs/model.hpp"

namespace zerosim {

struct MemoryItem {
    std::string name;        // e.g. "optimizer states (fp32 master, Adam m and v)"
    std::string category;    // parameters, gradients, optimizer, buckets
    int64_t bytes = 0;
    std::string why;         // how it follows from the stage and the config
};

struct MemoryEstimate {
    int stage = 0;
    int64_t world = 1;
    std::vector<MemoryItem> items;
    int64_t total() const;
    int64_t category(const std::string& c) const;
    // The ZeRO paper (K = 12, 2-byte parameters and gradients): (2 + 2 + K) Ψ split by stage.
    int64_t paper_bytes = 0;
    std::string paper_formula;
    // DeepSpeed's estimator (estimate_zero2/zero3_model_states_mem_needs, no offload); -1 if none.
    int64_t deepspeed_estimator_bytes = -1;
    std::string deepspeed_estimator_formula;
    std::vector<std::string> differences;   // reasons the schedule's figure differs from the paper's
};

// Memory of the ranks that hold the most (the last rank holds the padding).
MemoryEstimate estimate_memory(const Model& model, const DsConfig& cfg, const Schedule& schedule);

// The ZeRO paper's model-state bytes per rank for Ψ parameters on N ranks (mixed precision Adam).
int64_t zero_paper_bytes(int stage, double psi, double n);

}  // namespace zerosim
