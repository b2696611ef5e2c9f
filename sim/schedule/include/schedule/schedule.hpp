// The ZeRO schedule generator: (model, DeepSpeed config, world size, steps) -> schedule IR.
// Rules live in stage012.cpp (stages 0, 1, 2 and the bf16 optimizer) and stage3.cpp (stage 3),
// beside this library's private build.hpp; each emitted op names its rule (ir.cpp lists them).
#pragma once

#include <cstdint>
#include <vector>

#include "inputs/ds_config.hpp"
#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "inputs/model.hpp"
#include "schedule/bounds.hpp"
#include "schedule/layout.hpp"

namespace zerosim {

struct ScheduleOptions {
    int64_t world = 1;                  // every rank (3D: pipe x data x sequence x tensor)
    int steps = 1;
    int64_t seq_len = 0;                // 0: the model's default, else 1024
    std::vector<int> overflow_steps;    // fp16: optimizer steps (0-based) whose gradients overflow
    bool zero_init = false;             // stage 3: the model is built under deepspeed.zero.Init
    // Ranks DeepSpeed sees on one node (get_accelerator().device_count()): qgZ's intra/inter-node
    // groups need it; 0 = not given (a qgZ schedule on more than one rank then refuses).
    int64_t gpus_per_node = 0;
 int64_t max_ops = kDefaultMaxOps;               // refuse a schedule estimated past these (bounds.hpp)
    int64_t max_bytes = kDefaultMaxScheduleBytes;
    // Past the estimate's limits, build anyway and count while building: refused only once the ops
    // built pass max_ops or max_bytes (ScheduleStream::open builds its template so, since the
    // estimate's upper bound can be several times the real count).
    bool count_while_building = false;
    int steps_in_run = 0;   // where `steps` are a template's (schedule/stream.hpp): the run's, for messages
    // 3D parallelism (--pp, --tp, --sp, --ep): layout.world is set from `world` by build_schedule.
    // With any axis above 1 the schedule is rank `rank`'s program (docs/zero-comm.md "ZeRO inside 3D").
    ParallelLayout layout;
    int64_t rank = 0;
    // --activation-checkpointing: every transformer block checkpointed (a model's own "checkpointed"
    // list and the DeepSpeed config's activation_checkpointing section turn it on too); its
    // backward then carries the recomputed forward (compute.recompute, docs/zero-comm.md §10a).
    bool activation_checkpointing = false;
    PipePartition pp_partition = PipePartition::Parameters;
    std::string pp_partition_type;   // PipePartition::Type: the regular expression after "type:"
    // pp_partition and pp_partition_type from DeepSpeed's partition_method spelling: "uniform",
    // "type:REGEX", else "parameters" (--pp-partition, GPT-NeoX's pipe-partition-method).
    void set_pipe_partition(const std::string& how) {
        pp_partition = how == "uniform" ? PipePartition::Uniform
                       : how.rfind("type:", 0) == 0 ? PipePartition::Type
                                                    : PipePartition::Parameters;
        pp_partition_type = pp_partition == PipePartition::Type ? how.substr(5) : "";
    }
};

// The module calls (Model::calls names) whose forward backward runs again: the model's own
// "checkpointed" list, else, with --activation-checkpointing, the config's activation_checkpointing
// section or a Hugging Face config's gradient_checkpointing, every transformer block (recompute.cpp).
// Empty when checkpointing is off, or on for a model without blocks (a front end says so).
std::vector<std::string> checkpointed_calls(const Model& m, const DsConfig& cfg, const ScheduleOptions& opt);

// Refuses, before building anything, a schedule whose estimate (bounds.hpp) passes opt's limits.
Result<Schedule> build_schedule(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt);

// The model as rank opt.rank of a 3D layout holds it (its stage's layers, its tensor shard, its
// experts; MoE parameter groups split as DeepSpeed splits them): what ZeRO partitions on that rank.
Result<Model> rank_local_model(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt);

// The options that build a 3D schedule's program for another rank of the same layout (steps,
// sequence length and pipeline cut as `meta` was built).
ScheduleOptions options_for_rank(const ScheduleMeta& meta, int64_t rank);
// The same for pipeline stage `stage`'s rank with meta.rank's data and tensor index (explain's and
// memory's one rank per stage).
ScheduleOptions options_for_stage(const ScheduleMeta& meta, int64_t stage);

}  // namespace zerosim
