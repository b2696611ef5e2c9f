// The parallel layout of a run as the user gives it (--pp, --tp, --sp, --ep and the ZeRO++ / MiCS /
// FSDP sub-group sizes): plain data, so that the schedule IR can carry it (ScheduleMeta::layout) and
// schedule/mesh.hpp can build every process group from it.
#pragma once

#include <array>
#include <cstdint>

namespace zerosim {

// The axes of the grid (topology.py's names in comments). Sequence is Ulysses' axis, which the mpu
// of Megatron-DeepSpeed lays inside the data axis (sequence ranks consecutive).
enum class MeshAxis { Pipe, Data, Sequence, Tensor };   // "pipe", "data", (sequence), "model"

// How deepspeed.pipe.PipelineModule cuts layers into stages (partition_method): "parameters"
// balances parameter counts (its default), "uniform" layer counts, "type:REGEX" the layers whose class
// (or function) name REGEX matches, ignoring case (runtime/pipe/module.py _partition_layers 370-391,
// _find_layer_type 298-317; GPT-NeoX's default is "type:transformer|mlp").
enum class PipePartition { Parameters, Uniform, Type };

struct ParallelLayout {
    int64_t world = 1;
    // The axes. data is what is left: world / (pipe x sequence x tensor).
    int64_t pipe = 1;       // pipeline stages
    int64_t tensor = 1;     // Megatron tensor ("model") parallel ranks
    int64_t sequence = 1;   // Ulysses sequence parallel ranks
    int64_t expert = 1;     // MoE ep_size: splits each data group into data / expert expert groups
    // DeepSpeed's PipelineEngine runs the model even with one stage: GPT-NeoX wraps every model with
    // pipe-parallel-size >= 1 in a PipelineModule (megatron/neox_arguments/arguments.py is_pipe_parallel).
    bool pipe_engine = false;
    // Slowest first; each axis once. DeepSpeed's grid: pipe, data, model (sequence beside the
    // model axis, as Megatron-DeepSpeed's mpu keeps sequence ranks consecutive).
    std::array<MeshAxis, 4> order = {MeshAxis::Pipe, MeshAxis::Data, MeshAxis::Sequence, MeshAxis::Tensor};
    // The ZeRO++ / MiCS / FSDP sub-groups, formed over the whole world as DeepSpeed forms them
    // (0 or 1 = off where noted).
    int64_t hpz = 1;                  // zero_hpz_partition_size as configured (groups when min(k, world) > 1)
    int64_t mics_shard = 0;           // mics_shard_size; 0 = off
    int64_t qgz_ranks_per_node = 0;   // qgZ on: the ranks DeepSpeed sees per node (device_count()); 0 = off
    int64_t fsdp_shard = 0;           // FSDP hybrid shard on: the ranks per node; 0 = off

    int64_t data() const;           // world / (pipe x sequence x tensor)
    int64_t expert_data() const;    // data / expert
    int64_t sequence_data() const;  // sequence x data
    int64_t axis_size(MeshAxis a) const;
    // The pipeline engine runs the model: more than one stage, or one asked for.
    bool pipelined() const { return pipe > 1 || pipe_engine; }
    // Any of pipe, tensor, sequence, expert above 1 (or the pipeline engine): each rank runs a program of its own.
    bool is_3d() const { return pipelined() || tensor > 1 || sequence > 1 || expert > 1; }
};

}  // namespace zerosim
