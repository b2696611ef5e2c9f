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
    double host_memory_gb = 0;                // a node's RAM (topology host.memory_gb), for offloaded states
    int64_t ranks_per_node = 0;               // the topology's GPUs per node; 0: the host is not counted
};
// The fit of a rank's model states and activations (analysis/fit.hpp), with its node's offloaded
// states (the "host" items times the ranks per node) against the node's RAM.
FitEstimate fit_with_host(const MemoryEstimate& states, const ActivationEstimate& a, const FitOptions& fit, int64_t world);
// The one fit of a data-parallel rank running `s` (not a 3D layout: layout_fit below): its model
// states (estimate_memory, the peak gathered parameters among them at stage 3), one micro batch's
// activations at the schedule's sequence length and micro batch (checkpointed where `fit`, the
// config or the schedule says so) and the framework's reserve against the GPU, and its node's
// offloaded states against the node's RAM. What predict's and report's fit line, sweep's fits
// column, need's every probe and stage 3's gathered-parameter budget (prediction/gathered_budget.hpp)
// all read.
FitEstimate schedule_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const FitOptions& fit);
// The same with the rank's states already estimated (estimate_memory(model, cfg, s)).
FitEstimate schedule_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const FitOptions& fit, const MemoryEstimate& states);

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

// Sizes in binary units, labelled so (core/sizes.hpp binary_size_string: "1.86 GiB").
void write_memory_text(std::ostream& out, const MemoryReport& r);

// One pipeline stage of a 3D layout: its representative rank (the rank of the stage with the
// schedule's data, sequence and tensor index), what it holds and whether it fits.
struct StageFit {
    int64_t stage = 0;
    int64_t rank = 0;
    int64_t params = 0;                 // parameters the rank holds (its stage's layers, tensor shard, experts)
    MemoryEstimate states;              // ZeRO's model states over the rank's data-parallel group
    StageActivations activations;       // at the stage's peak (analysis/fit.hpp)
    FitEstimate fit;                    // states + activations + reserve against the GPU
};

// The per-stage memory of a 3D layout (pipeline, tensor, Ulysses sequence, expert parallel), for
// `zerosim memory` and for predict's fit line per stage. `whole`: the model as given (before any
// rank's share is cut); `schedule`: any rank's program of the layout (build_schedule with
// ScheduleOptions::layout, as load_inputs builds it), whose meta gives the layout, the sequence
// length, micro batch and gradient_accumulation_steps. `fit`: activation checkpointing (or the
// config's section, or a GPT-NeoX config's checkpoint-activations) and the GPU's memory (0: the fit
// is "unknown"); its seq_len is not read (the schedule's is). One record per stage, in stage order;
// stage_holding_most() names the one with the largest total (stage 0 under 1F1B, normally).
Result<std::vector<StageFit>> layout_fit(const Model& whole, const DsConfig& cfg, const Schedule& schedule, const FitOptions& fit);
// The index into layout_fit's records of the largest total (the first of equals); -1 when empty.
int64_t stage_holding_most(const std::vector<StageFit>& stages);
// "stage 0 (rank 0): memory per rank ... : fits" for predict and memory, one line per stage.
std::string stage_fit_sentence(const StageFit& s);

// A 3D layout's memory per rank, one row per pipeline stage: the model states (what each holds
// after its stage's layers, its tensor shard and ZeRO's partitions over its data-parallel group),
// then the activations at each stage's peak and the fit against the GPU, as text or JSON (one
// object per stage).
Status write_layout_memory_text(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& schedule,
                                const FitOptions& fit = {});
Status write_layout_memory_json(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& schedule,
                                const FitOptions& fit = {});
void write_memory_json(std::ostream& out, const MemoryReport& r);

}  // namespace zerosim
