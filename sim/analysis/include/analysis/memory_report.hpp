// `zerosim memory`: model-state memory per rank for each asked stage of one config, as text or JSON,
// with a zerorun run's measured peaks beside the prediction when given.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "analysis/memory.hpp"
#include "formats/zerorun_log.hpp"

namespace zerosim {

// One category predicted against measured (-1: zerorun did not report it).
struct MemoryComparison {
    std::string category;   // ours: parameters, gradients, optimizer, buckets
    int64_t predicted = 0;
    int64_t measured = -1;
};

// The schedule's categories beside zerorun's, which names optimizer states "optimizer_states" and
// keeps its checking copies apart ("verification", left out here).
std::vector<MemoryComparison> compare_memory(const MemoryEstimate& e, const MeasuredMemory& measured);

struct StageMemory {
    int stage = 0;
    MemoryEstimate estimate;
    std::vector<MemoryComparison> measured;   // empty unless the measured run had this stage
    ActivationEstimate activations;           // one micro batch at the schedule's sequence length
    FitEstimate fit;                          // model states + activations + reserve against the GPU
};

// What the fit needs beside the config: activation checkpointing (--activation-checkpointing or
// the config's activation_checkpointing section), the sequence length (0: the model's, else 1024)
// and the GPU (the topology's gpu.memory_gb, 0 when none was given).
struct FitOptions {
    bool activation_checkpointing = false;
    int64_t seq_len = 0;
    double gpu_memory_gb = 0;
    std::string gpu;                          // the topology's name, for the text
};

struct MemoryReport {
    std::string model_name;
    int64_t parameters = 0;
    int64_t world = 0;
    DType dtype = DType::FP32;
    std::vector<StageMemory> stages;
    std::string measured_path;                // the zerorun log, if one was given
    FitOptions fit;
};

// The config at each of `stages` (DsConfig::with_stage), its schedule on `world` ranks and its
// memory; a measured run must have `world` ranks. `gpus_per_node`: the ranks DeepSpeed sees on a
// node (qgZ's groups; ScheduleOptions::gpus_per_node).
Result<MemoryReport> memory_report(const Model& model, const DsConfig& cfg, int64_t world, const std::vector<int>& stages,
                                   const std::optional<MeasuredMemory>& measured, const std::string& measured_path,
                                   const FitOptions& fit = {}, int64_t gpus_per_node = 0);

// Sizes 1024-based, as DeepSpeed prints them ("1.86 GB" is GiB).
void write_memory_text(std::ostream& out, const MemoryReport& r);

// A 3D layout's model states per rank, one row per pipeline stage (the rank of each stage with
// `schedule`'s data and tensor index): what each holds after its stage's layers, its tensor shard
// and ZeRO's partitions over its data-parallel group. Activations are not counted yet.
Status write_layout_memory_text(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& schedule);
void write_memory_json(std::ostream& out, const MemoryReport& r);

}  // namespace zerosim
