// The schedule IR: the one contract between the schedule generator (sim/schedule*), the timing
// engine, the runtime and the validator. Nothing else derives ZeRO rules.
//
// A schedule is the program every data-parallel rank runs, in issue order. ZeRO's data-parallel
// ranks issue the same collectives in the same order (a collective needs every rank), so one op
// list serves all ranks; where a value differs by rank (the destination of a `reduce`, the owned
// partition an optimizer step updates) the op says so. See docs/schedule-ir.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "inputs/release.hpp"
#include "schedule/layout.hpp"

namespace zerosim {

// Send and Recv: point-to-point (the pipeline engine's p2p.py); Op::peer names the other end.
enum class OpKind { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Barrier, Compute, AllToAll, Send, Recv };
enum class Phase { Init, Forward, Backward, Step };
enum class Stream { Compute, Comm, Reduce, Fetch };
enum class ReduceOp { None, Sum, Max };
enum class ComputeKind { None, Forward, Backward, OptimizerStep };

// What an op's buffer holds, so that a reader (the runtime) knows how to fill it and where its
// result goes without guessing from which fields are empty. Every rule has one payload (the rule
// table in ir.cpp says which); docs/schedule-ir.md "Payloads" lays each one out.
enum class Payload {
    Compute,              // a compute segment; `compute` says which
    GradientBucket,       // all_reduce/reduce: the whole gradients of `params`, in order
    GradientSlices,       // all_reduce/reduce: the gradient elements `segments` name, in order, then
                          //   zeros up to `elements` (padding)
    GradientShards,       // reduce_scatter: each gradient of `params` padded to world x shard and
                          //   interleaved by rank (stage 3)
    ParameterShards,      // all_gather: this rank's shard of each of `params` (stage 3)
    ParameterPartitions,  // all_gather: this rank's partition of group `param_group` (flat groups)
    ParameterBroadcast,   // broadcast: the whole parameters `params`, from `root`
    OverflowFlag,         // all_reduce(max) of one flag: did any rank's gradients overflow (fp16)
    GradientNorm,         // all_reduce of a partial gradient norm
    TraceCheck,           // broadcast of the recorded stage-3 trace's lengths from rank 0
    Barrier,              // no data
    // ZeRO++ and MiCS (docs/zero-variants.md):
    QuantizedShards,      // all_gather (qwZ): int8 data of this rank's shards of `params`, concatenated
                          //   (secondary shards on the hpZ group)
    QuantScales,          // all_gather / all_to_all (qwZ, qgZ): the fp32 scales of the int8 data before it
    QuantizedGradient,    // all_to_all (qgZ): int4 values, two per byte, of one gradient `params`[0]
    GradientPartitions,   // all_reduce (MiCS): this rank's accumulated gradient partition of each of
                          //   `params`, over the replication group
    // 3D parallelism (docs/zero-comm.md "ZeRO inside 3D parallelism"):
    Activations,          // activations or their gradients: pipeline send/recv, tensor-parallel
                          //   all_reduce, Ulysses' and MoE's all_to_all (`elements` of the op's dtype)
    Scalars,              // a few numbers: the loss, parameter counts, a group's norm, a capacity
};

// Every enum of the IR has one table of {value, name} in ir.cpp; the name functions and their
// reverse lookups (nullopt for a name not in the table) are both read from it.
// DeepSpeed's record names (what the comms logger prints), e.g. "all_gather_into_tensor".
const char* op_record_name(OpKind k);
std::optional<OpKind> op_record_from_name(std::string_view name);
const char* phase_name(Phase p);
std::optional<Phase> phase_from_name(std::string_view name);
const char* stream_name(Stream s);
std::optional<Stream> stream_from_name(std::string_view name);
const char* reduce_op_name(ReduceOp r);
std::optional<ReduceOp> reduce_op_from_name(std::string_view name);
const char* compute_kind_name(ComputeKind k);
std::optional<ComputeKind> compute_kind_from_name(std::string_view name);
const char* payload_name(Payload p);          // e.g. "gradient_slices"
std::optional<Payload> payload_from_name(std::string_view name);
bool is_collective(OpKind k);
// Whether DeepSpeed calls this collective on one buffer (the gradient bucket's all_reduce, a
// parameter's broadcast, reduce) or from an input into a separate output (all_gather_into_tensor,
// reduce_scatter_tensor): which column of an nccl-tests table times it as DeepSpeed runs it.
bool deepspeed_calls_in_place(OpKind k);


// Why an op exists: one id per ZeRO rule of docs/zero-comm.md (and the what-ifs' rules), in the
// order of the rule table in ir.cpp; each id's name there is the string every output prints.
enum class RuleId {
    InitBroadcastModel,               // "init.broadcast_model"
    Stage3InitZeroInitParam,          // "stage3.init.zero_init_param"
    Stage3InitBarrier,                // "stage3.init.barrier"
    Stage3InitAllgatherParams,        // "stage3.init.allgather_params"
    Stage0BucketAllreduce,            // "stage0.bucket_allreduce"
    Stage12FlushAllreducePredivide,   // "stage12.flush.allreduce_predivide"
    Stage12FlushAllreducePerDtype,    // "stage12.flush.allreduce_per_dtype"
    Stage12FlushMultiRankAllreduce,   // "stage12.flush.multi_rank_allreduce"
    Stage12FlushReducePerRank,        // "stage12.flush.reduce_per_rank"
    Stage0ClipGradNorm,               // "stage0.clip_grad_norm"
    Bf16GradAllreduce,                // "bf16.grad_allreduce"
    StepOverflowCheck,                // "step.overflow_check"
    Stage12StepGradNorm,              // "stage12.step.grad_norm"
    Stage12StepAllgatherPartitions,   // "stage12.step.allgather_partitions"
    Bf16StepAllgatherPartitions,      // "bf16.step.allgather_partitions"
    Stage3Fetch,                      // "stage3.fetch"
    Stage3Prefetch,                   // "stage3.prefetch"
    Stage3TraceCheck,                 // "stage3.trace_check"
    Stage3TraceStart,                 // "stage3.trace_start"
    Stage3TraceCheckLength,           // "stage3.trace_check_length"
    Stage3FlushReduceScatter,         // "stage3.flush.reduce_scatter"
    Stage3FlushAllreduce,             // "stage3.flush.allreduce"
    Stage3StepGradNorm,               // "stage3.step.grad_norm"
    Stage3StepGradNormCpuOffload,     // "stage3.step.grad_norm_cpu_offload"
    Stage3StepPersistentRegather,     // "stage3.step.persistent_regather"
    QwzFetch,                         // "qwz.fetch": stage3.fetch's gather, int8 (QuantizedShards)
    QwzPrefetch,                      // "qwz.prefetch": stage3.prefetch's gather, int8
    QwzFetchScales,                   // "qwz.fetch_scales"
    QgzIntraAllToAll,                 // "qgz.intra_all_to_all"
    QgzIntraScales,                   // "qgz.intra_scales"
    QgzInterAllToAll,                 // "qgz.inter_all_to_all"
    QgzInterScales,                   // "qgz.inter_scales"
    QgzFallbackReduceScatter,         // "qgz.fallback_reduce_scatter"
    MicsAllreduceShardGrads,          // "mics.allreduce_shard_grads"
    WhatifFsdpUnshard,                // "whatif.fsdp.unshard"
    WhatifFsdpReduceScatter,          // "whatif.fsdp.reduce_scatter"
    WhatifHsdpAllreduce,              // "whatif.hsdp.allreduce"
    // ZeRO inside 3D parallelism (docs/zero-comm.md, ../shared/docs/zero-in-3d.md):
    PipeInitParamCount,               // "pipe.init.param_count"
    PipeWarmupSend,                   // "pipe.warmup_send"
    PipeWarmupRecv,                   // "pipe.warmup_recv"
    PipeMetaSend,                     // "pipe.meta_send"
    PipeMetaRecv,                     // "pipe.meta_recv"
    PipeActivationSend,               // "pipe.activation_send"
    PipeActivationRecv,               // "pipe.activation_recv"
    PipeGradSend,                     // "pipe.grad_send"
    PipeGradRecv,                     // "pipe.grad_recv"
    PipeLossAllreduce,                // "pipe.loss_allreduce"
    PipeLossBroadcast,                // "pipe.loss_broadcast"
    PipeTiedGradAllreduce,            // "pipe.tied_grad_allreduce"
    ZeroModelParallelAllreduce,       // "zero.model_parallel_allreduce"
    TpForwardAllreduce,               // "tp.forward_allreduce"
    TpBackwardAllreduce,              // "tp.backward_allreduce"
    MoeAllToAll,                      // "moe.all_to_all"
    MoeCapacityAllreduce,             // "moe.capacity_allreduce"
    MoeExpertGradNorm,                // "moe.expert_grad_norm"
    UlyssesAllToAll,                  // "ulysses.all_to_all"
    MpuNormAllreduce,                 // "mpu.norm_allreduce"
    PipePartitionMetaSend,            // "pipe.partition_meta_send"
    PipePartitionMetaRecv,            // "pipe.partition_meta_recv"
    PipePartitionAllGather,           // "pipe.partition_allgather"
    ComputeForward,                   // "compute.forward"
    ComputeBackward,                  // "compute.backward"
    ComputeRecompute,                 // "compute.recompute"
    ComputeOptimizerStep,             // "compute.optimizer_step"
};

// One entry of the rule table, with the config keys that shape the rule's ops.
struct Rule {
    RuleId id;
    const char* name;           // e.g. "stage12.flush.multi_rank_allreduce"; unique
    const char* summary;        // one line, for tables and explain
    const char* config_keys;    // comma separated
    Payload payload;            // what the op's buffer holds: every op of the rule has it
};
const Rule& rule_info(RuleId id);
const char* rule_name(RuleId id);                              // rule_info(id).name
std::optional<RuleId> rule_from_name(std::string_view name);   // nullopt: no rule has that name
const std::vector<Rule>& all_rules();                          // the table, in RuleId order
std::ostream& operator<<(std::ostream& out, RuleId id);       // its name

// The kinds of process group an op runs on. Dp is every rank; the others are the ZeRO variants'
// sub-groups (ScheduleMeta::groups, docs/zero-variants.md) and the FSDP what-ifs' (docs/what-if.md).
// In a 3D layout (ScheduleMeta::layout) Dp is the group ZeRO shards over on the schedule's rank (its
// data-parallel group; sequence x data under Ulysses), and the 3D kinds are the mesh's groups of
// that rank (schedule/mesh.hpp): Pipe, Tensor, ModelParallel (ZeRO's grad-norm group under the
// pipeline engine), Sequence (Ulysses), Expert and ExpertData (MoE).
enum class GroupKind { Dp, Hpz, QgzIntra, QgzInter, MicsShard, MicsReplica, FsdpShard, FsdpReplica,
                       Pipe, Tensor, ModelParallel, Sequence, Expert, ExpertData };
const char* group_name(GroupKind k);   // "dp", "hpz", "qgz_intra", "qgz_inter", "mics_shard", ...
std::optional<GroupKind> group_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& out, GroupKind k);   // its name (test messages, logs)

// A contiguous piece of one parameter's gradient or data carried by a collective, in the order
// the op's buffer holds them.
struct Segment {
    int param = 0;
    int64_t offset = 0;         // first element within the parameter
    int64_t numel = 0;
    bool operator==(const Segment&) const = default;
};

struct Op {
    int64_t id = 0;
    OpKind kind = OpKind::Compute;
    int step = -1;              // optimizer step, 0-based; -1 = engine start
    int micro = -1;             // micro-step within the step; -1 where not tied to one
    Phase phase = Phase::Init;
    Stream stream = Stream::Comm;
    RuleId rule = RuleId::ComputeForward;
    std::string caller;         // DeepSpeed function the comms logger names (collectives)
    Payload payload = Payload::Compute;   // what the buffer holds; always rule_info(rule).payload

    // Collectives. `elements` follows DeepSpeed's logged-size convention: the full tensor for
    // all_reduce, broadcast and reduce; one rank's input shard for all_gather_into_tensor; the
    // full input for reduce_scatter_tensor. bytes() = elements * dtype size.
    int64_t elements = 0;
    DType dtype = DType::FP32;
    ReduceOp redop = ReduceOp::None;
    int root = -1;              // broadcast source / reduce destination (group rank)
    bool logged = true;         // DeepSpeed's comms logger records it (MiCS's parameter gathers
                                //   bypass the timed wrapper: recorded here, not logged)
    GroupKind group = GroupKind::Dp;   // process group: Dp (all ranks) or a kind in meta.groups
    int64_t peer = -1;          // Send / Recv: the global rank at the other end
    int bucket = -1;            // gradient bucket (flush) number within the micro-step
    int param_group = -1;       // optimizer parameter group, where the op is per group

    // Compute segments.
    ComputeKind compute = ComputeKind::None;
    int module = -1;            // Model::modules index for forward/backward
    std::string module_name;
    double flops = 0.0;
    int64_t mem_bytes = 0;      // bytes read and written (optimizer: state traffic)

    std::vector<int> params;    // parameters carried or computed (Model::params indices)
    // Gradient reductions of stages 0-2: exactly which elements the buffer holds, in order
    // (a bucket cut into per-owner slices, or one chunk of it). Empty where `params` says it all
    // (whole parameters, or a stage-3 shard of each).
    std::vector<Segment> segments;
    std::vector<int64_t> deps;  // ops this one waits for beyond its own stream's order

    int64_t bytes() const { return kind == OpKind::Barrier ? 0 : elements * dtype_size(dtype); }
    bool operator==(const Op&) const = default;   // every field (schedule/stream.hpp compares steps)
};

// How the fp32 optimizer state (master weights, Adam moments, reduced gradients) is cut across
// ranks; written by the generator from schedule/partition.hpp, read by the runtime.
enum class PartitionKind {
    Replicated,     // every rank holds everything (stage 0 without the BF16 optimizer)
    FlatGroups,     // each parameter group flattened and cut into `world` equal partitions
                    //   (stages 1/2 and the BF16 optimizer)
    PerParameter,   // each parameter cut on its own, stage3_partition_numel elements per rank
};
const char* partition_kind_name(PartitionKind k);   // "replicated", "flat_groups", "per_parameter"
std::optional<PartitionKind> partition_kind_from_name(std::string_view name);

// One parameter group of a FlatGroups layout: the parameters laid end to end in `order`
// (parameter order[i] starts at element offsets[i] of the flat buffer, where order[i-1] ends),
// padded to world * partition_size; rank r owns [r * partition_size, (r + 1) * partition_size).
struct GroupPartition {
    std::vector<int> order;
    std::vector<int64_t> offsets;
    int64_t partition_size = 0;
    GroupKind over = GroupKind::Dp;   // the ranks it is cut over: Dp, or ExpertData for MoE experts
};

struct PartitionLayout {
    PartitionKind kind = PartitionKind::Replicated;
    std::vector<GroupPartition> groups;   // FlatGroups: one per parameter group, group order
};

// A kind of process group of the ZeRO variants: the world cut into disjoint sets of ranks, each
// rank in exactly one (hpZ groups, qgZ intra/inter-node groups, MiCS shard/replication groups).
struct ProcessGroup {
    GroupKind kind = GroupKind::Hpz;
    std::vector<std::vector<int>> members;  // the groups, ascending ranks; members[0] holds rank 0
    int64_t size() const { return members.empty() ? 0 : static_cast<int64_t>(members[0].size()); }
};

// The ZeRO++ / MiCS settings a schedule was built with (DeepSpeed v0.14.2 runtime/zero/config.py).
struct ZeroVariants {
    int64_t hpz = 1;              // zero_hpz_partition_size (group size used, min(k, world)); 1 = off
    bool qwz = false;             // zero_quantized_weights
    bool qgz = false;             // zero_quantized_gradients, and active (more than one node)
    int64_t mics = 0;             // mics_shard_size; 0 = off
    int64_t gpus_per_node = 0;    // ranks DeepSpeed sees on a node (device_count()); 0 = not given
    bool any() const { return hpz > 1 || qwz || qgz || mics > 0; }
};

struct ScheduleMeta {
    std::string dialect = "deepspeed-0.14.2";   // "deepspeed-" + release.number()
    Release release = kBaselineRelease;         // the DeepSpeed release whose rules built it
    std::string model_name;
    std::string model_file;
    std::string ds_config_file;
    // The ranks ZeRO shards over: the world in pure data parallelism; in a 3D layout the size of
    // the schedule's rank's data-parallel group (sequence x data under Ulysses), layout.world the whole world.
    int64_t world = 1;
    ParallelLayout layout;               // pipe/tensor/sequence/expert all 1 without 3D parallelism
    int64_t rank = 0;                    // the global rank whose program `ops` is (3D: each rank's differs)
    int64_t pipe_stage = 0;              // that rank's pipeline stage
    PipePartition pipe_partition = PipePartition::Parameters;   // how the stages were cut (--pp-partition)
    std::string pipe_partition_type;     // its "type:" regular expression
    int stage = 0;
    int steps = 1;
    int64_t micro_batch = 1;
    int64_t grad_accum = 1;
    int64_t seq_len = 0;
    int64_t total_params = 0;
    int num_groups = 1;
    DType model_dtype = DType::FP32;
    DType comm_dtype = DType::FP32;
    std::vector<int> overflow_steps;
    bool round_robin_gradients = false;  // the stage-1/2 partition order (schedule/partition.hpp)
    PartitionLayout partition;           // who owns which optimizer state
    // Stage 3: the most parameter elements gathered (whole) at any moment of training, persistent
    // ones included; the memory model's "gathered parameters".
    int64_t stage3_peak_gathered_elements = 0;
    int64_t stage3_persistent_elements = 0;
    // Stage 3: the model was built under deepspeed.zero.Init (--zero-init): its parameters were
    // broadcast and partitioned at construction, before the comms logger existed, so the engine
    // start logs none of them.
    bool zero_init = false;
    // --activation-checkpointing as the schedule was built (a model's "checkpointed" list and the
    // config's section say it themselves); options_for_rank hands it on.
    bool activation_checkpointing = false;
    // zero_optimization.offload_optimizer / offload_param enabled (cpu or nvme): the timing engine
    // adds their PCIe copies and the CPU optimizer step (timing/offload_time.hpp); memory moves the
    // offloaded states to the host. Not written to the schedule JSON.
    bool offload_optimizer = false;
    bool offload_param = false;
    ZeroVariants variants;
    std::vector<ProcessGroup> groups;    // every group an op names besides Dp
    // Stage 3 under Ulysses: the ranks parameters are partitioned over (the data-parallel group),
    // fewer than `world`, the sequence x data group gradients are reduce-scattered over; 0 = world.
    int64_t param_shards = 0;
    // Ranks every parameter is cut across: the MiCS shard size, else param_shards, else the world.
    int64_t shard_count() const { return variants.mics > 0 ? variants.mics : param_shards > 0 ? param_shards : world; }
    // Ranks in a group of kind `kind` (Dp: the world); 0 if meta.groups has none of that kind.
    int64_t group_size(GroupKind kind) const;
};

// Stage 3's host: the parameter coordinator's calls as the host runs them, in order (DeepSpeed
// v0.14.2 parameter_offload.py module hooks -> partitioned_param_coordinator.py). The host issues
// every op in IR order; each event runs on the host before op `first_op` is issued. The timing
// engine runs them on a host lane (docs/schedule-ir.md "Host"); only the throttles' waits order
// device ops, through schedule/ordering.hpp rules O7 (fetch events) and O8 (reduce events).
enum class HostKind {
    PreForward,    // fetch_sub_module (forward): issue the module's gather
    PreBackward,   // fetch_sub_module (backward)
    FetchWait,     // its wait on the in-flight parameters, then the prefetch
    PostForward,   // release_sub_module
    PostBackward,
    ReleaseAll,    // stage3.py step: _partition_all_parameters (release_and_reset_all)
    GradientFlush, // stage3.py __reduce_and_partition_ipg_grads: its reduce-event throttle, then the reduce
    ReduceSync,    // stage3.py independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize()
};
const char* host_kind_name(HostKind k);
std::optional<HostKind> host_kind_from_name(std::string_view name);

struct HostEvent {
    HostKind kind = HostKind::PreForward;
    int step = -1;
    int micro = -1;
    int module = -1;                 // Model::modules index; -1 for none
    int64_t first_op = 0;            // the first op the host issues after this event
    // FetchWait: the fetch ops whose completion the host waits for (the __max_ongoing_fetch_events
    // throttle synchronising on the oldest outstanding fetch event). GradientFlush: the reduce op of
    // the flush three before (the max_param_reduce_events throttle); ReduceSync: the micro-step's
    // last reduce op (the epilogue's synchronize).
    std::vector<int64_t> waits;
    int fetch_events = 0;            // FetchWait: fetch events recorded at this wait
    int64_t released_elements = 0;   // Post*, ReleaseAll: whole parameter elements released
    bool operator==(const HostEvent&) const = default;
};

// The model's parameters as the schedule refers to them (Model::params order).
struct ScheduleParam {
    std::string name;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int group = 0;
};

struct Schedule {
    ScheduleMeta meta;
    std::vector<ScheduleParam> params;
    std::vector<Op> ops;        // issue order on every rank
    std::vector<HostEvent> host; // stage 3: the coordinator's host events, in host order

    Op& add(Op op) {
        op.id = static_cast<int64_t>(ops.size());
        ops.push_back(std::move(op));
        return ops.back();
    }
};

// The training phase an op falls in, in the form of the reference runs' markers: "initialize",
// "step0.micro1.backward"; optimizer-step ops belong to the last micro-step ("step0.micro3.step").
std::string phase_label(const Op& op, int64_t grad_accum);

}  // namespace zerosim
