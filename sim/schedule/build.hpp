// The schedule generator's internals, private to sim/schedule: the state one generation run shares
// between schedule.cpp and the stage files.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "schedule/schedule.hpp"
#include "schedule/mesh.hpp"

namespace zerosim {
namespace detail {

// Where the model's own parallel layers issue their collectives relative to ZeRO's hooks: after a
// module's forward, before its backward (ahead of stage 3's pre-backward fetch), after its backward
// (after its gradients' reduce hooks: autograd runs AccumulateGrad first among ready nodes).
enum class HookPoint { AfterForward, BeforeBackward, AfterBackward };

// Shared state of one generation run; the stage files append to `out`.
struct Build {
    const Model& model;
    const DsConfig& cfg;
    const ScheduleOptions& opt;
    BatchPlan batch;
    int64_t seq_len = 0;
    Schedule out;
    int step = -1;
    int micro = -1;
    Phase phase = Phase::Init;
    std::optional<Error> failure;   // a refusal DeepSpeed raises mid-run (qwZ's assertion): the first one
    // 3D parallelism (rank_schedule.cpp): the mesh and the rank whose program this is; null without.
    const Mesh* mesh = nullptr;
    int64_t rank = 0;
    // Stage 3 under Ulysses: the ranks parameters are partitioned over (parameter_offload.py
    // _convert_to_zero_parameters passes zero.Init mpu.get_data_parallel_group(), the data group),
    // while the optimizer reduce-scatters gradients over opt.world (the sequence x data group). 0: opt.world.
    int64_t param_world = 0;
    int64_t parameter_world() const { return param_world > 0 ? param_world : opt.world; }
    // The tensor, Ulysses and MoE layers' collectives (rank_schedule.cpp, moe.cpp); empty without 3D.
    // `module` is a Model::modules index (stages 0-2 and stage 3's module calls); stage 3 also calls
    // it for parameterless calls (module -1, `node` a Model::calls index), AfterForward right after
    // the call's fetch and AfterBackward right after its pre-backward fetch.
    std::function<void(Build&, HookPoint, int module, int node)> layer_hook;
    // Under the pipeline: the Model::parallel.pipe_layers indices of this rank's stage (rank_model.cpp).
    std::vector<int64_t> stage_layers = {};

    // Activation checkpointing (recompute.cpp): the checkpointed module calls (Model::calls names)
    // and, per Model::forward_order position, the one it runs in (an index into them, -1: none).
    std::vector<std::string> checkpointed = {};
    std::vector<int> checkpoint_of_position = {};
    bool checkpointed_call(int node) const;
    // A checkpointed module's forward again, in backward (compute.recompute).
    Op& recompute(int module);
    // Stages 0-2 and the pipeline: before the backward of forward_order position `pos`, the forward
    // of the checkpointed call that position closes, again, with the model's layer hooks.
    void recompute_before(size_t pos);

    void hook(HookPoint at, int module, int node = -1) {
        if (layer_hook) layer_hook(*this, at, module, node);
    }
    // Ranks in this rank's group of a 3D kind (1 without a mesh).
    int64_t group_size(MeshGroup kind) const { return mesh ? mesh->size(kind) : 1; }
    // A collective on a 3D group; Send/Recv name the global rank at the other end.
    Op& group_op(OpKind kind, int64_t elements, DType dtype, const char* caller, RuleId rule, GroupKind group);
    Op& p2p(OpKind send_or_recv, int64_t elements, DType dtype, RuleId rule, int64_t peer);

    // The op takes rule_info(rule).payload: every op of a rule has its rule's payload.
    Op& collective(OpKind kind, int64_t elements, DType dtype, const char* caller, RuleId rule,
                   Stream stream = Stream::Comm);
    Op& forward(int module);
    Op& backward(int module);
    Op& optimizer_step(int group, int64_t elements);
    bool is_boundary() const { return micro == batch.grad_accum - 1; }
    // Under ScheduleOptions::count_while_building, after each micro-step and step: true (with
    // `failure` set to the refusal) once the ops built pass the limits; the generators stop there.
    bool past_size_limit();
    size_t counted_ops = 0;      // ops whose memory is in counted_bytes
    int64_t counted_bytes = 0;
    bool overflows(int s) const;
    // A module's parameters in the order their gradients become ready within its backward
    // (backward_plan explains: bias before weight for a Linear, weight before bias for a LayerNorm).
    std::vector<int> autograd_order(int module) const;
    // Modules of the backward pass in execution order, with the parameters whose gradients become
    // ready right after each one.
    std::vector<std::pair<int, std::vector<int>>> backward_plan() const;
};

// build_schedule's generator run on every step (schedule/stream.hpp builds long schedules' first
// steps with it and counts them, then calls it for the whole run): the refusals, the bound check
// of bounds.hpp, then the halves below.
Result<Schedule> build_whole(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt);
// build_schedule's two halves: the meta and the ZeRO++/MiCS groups of b.opt on b.model, then the
// generator (pipeline engine, stage 3 or stages 0-2) and the ordering pass.
Status start_schedule(Build& b);
Result<Schedule> finish_schedule(Build& b);
void engine_start_broadcasts(Build& b);
// b's regions of the checkpointed calls (schedule.hpp checkpointed_calls; recompute.cpp).
void set_checkpoint_regions(Build& b);
void generate_stage012(Build& b);
void generate_stage3(Build& b);
// ZeRO's gradient norm (or overflow flag) over the model-parallel group after its data-parallel
// all_reduce (stage_1_and_2.py _model_parallel_all_reduce ~1645: skipped for a one-rank group;
// stage3.py ~1708: skipped only without the group, i.e. without 3D parallelism).
void model_parallel_allreduce(Build& b, DType dtype, ReduceOp redop);

// Stages 0-1's optimizer (stage012.cpp: DeepSpeedZeroOptimizer, the BF16 optimizer or the engine's
// own all_reduce) for a driver that runs forward and backward itself, the pipeline engine: its
// ReduceGrads instruction calls reduce_gradients(), OptimizerStep step(s).
struct ZeroOptimizer {
    virtual ~ZeroOptimizer() = default;
    virtual void reduce_gradients() = 0;
    virtual void step(int s) = 0;
    virtual DType tied_grad_dtype() const = 0;   // the dtype tied weights' gradients are all_reduced in
};
// Sets it up as generate_stage012 does (the partition layout into b.out.meta).
std::unique_ptr<ZeroOptimizer> stage01_optimizer(Build& b);

// 3D parallelism (rank_schedule.cpp): the schedule of rank opt.rank.
Result<Schedule> build_rank_schedule(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt);
// The pipeline engine (pipeline.cpp): b.model is the rank's stage; b.opt.world ZeRO's group.
void generate_pipeline(Build& b);
// MoE layers (moe.cpp): DeepSpeed's refusals (into b.failure) and the layers' collectives, added to
// b.layer_hook beside the tensor/Ulysses ones.
void install_moe_hooks(Build& b);
// The group ZeRO partitions, reduces and gathers optimizer parameter group `group` over
// (stage_1_and_2.py _configure_moe_settings 618-627, bf16_optimizer.py 102-106: real_dp_process_group):
// ExpertData for a group of expert parameters, else Dp; and that group's size.
GroupKind param_group_over(const Build& b, int group);
int64_t param_group_world(const Build& b, int group);
// The optimizer parameter groups DeepSpeed builds for an MoE model (moe/utils.py
// configure_moe_param_groups): the rank model's groups without their experts, then the experts.
void split_moe_param_groups(Model& m);

// The stages of a pipeline: layer indices [parts[s], parts[s + 1]) form stage s, as
// runtime/pipe/module.py _partition_layers cuts them (ds_utils.partition_uniform / partition_balanced).
std::vector<int64_t> partition_uniform(int64_t items, int64_t parts);
std::vector<int64_t> partition_balanced(const std::vector<int64_t>& weights, int64_t parts);
// The parameters of one layer of Model::parallel.pipe_layers (its name and a dot begin theirs).
std::vector<int> pipe_layer_params(const Model& m, size_t layer);

// The model as `rank` holds it: its pipeline stage's layers, its tensor-parallel shard of each split
// parameter, its experts renamed from 0 as DeepSpeed numbers local experts (rank_model.cpp).
struct RankModel {
    Model model;
    int64_t stage = 0;                  // pipeline stage
    std::vector<int64_t> stage_layers = {};  // Model::parallel.pipe_layers indices of that stage
};
Result<RankModel> rank_model(const Model& whole, const Mesh& mesh, int64_t rank, PipePartition partition,
                             const std::string& partition_type = "");
// Whether partition_method "type:REGEX" counts the layer (its type name, else its name).
bool pipe_layer_matches(const PipeLayer& layer, const std::regex& type);
// "type:REGEX" as module.py _find_layer_type compiles it (regex.IGNORECASE); throws std::regex_error.
std::regex pipe_type_regex(const std::string& type);

}  // namespace detail
}  // namespace zerosim
