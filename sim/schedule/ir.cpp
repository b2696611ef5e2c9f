#include "schedule/ir.hpp"

#include "schedule/collective_table.hpp"

#include <iterator>
#include <ostream>

#include "name_table.hpp"

namespace zerosim {

namespace {

using detail::Named;
using detail::dense_and_unique;
using detail::name_in;
using detail::value_named;

constexpr Named<OpKind> kOpRecords[] = {
    {OpKind::AllReduce, "all_reduce"},         {OpKind::AllGather, "all_gather_into_tensor"},
    {OpKind::ReduceScatter, "reduce_scatter_tensor"}, {OpKind::Broadcast, "broadcast"},
    {OpKind::Reduce, "reduce"},                {OpKind::Barrier, "barrier"},
    {OpKind::Compute, "compute"},              {OpKind::AllToAll, "all_to_all_single"},
    {OpKind::Send, "send"},                    {OpKind::Recv, "recv"},
};
static_assert(dense_and_unique(kOpRecords) && std::size(kOpRecords) == 1 + static_cast<size_t>(OpKind::Recv));

constexpr Named<Phase> kPhases[] = {
    {Phase::Init, "init"}, {Phase::Forward, "forward"}, {Phase::Backward, "backward"}, {Phase::Step, "step"}};
static_assert(dense_and_unique(kPhases) && std::size(kPhases) == 1 + static_cast<size_t>(Phase::Step));

constexpr Named<Stream> kStreams[] = {
    {Stream::Compute, "compute"}, {Stream::Comm, "comm"}, {Stream::Reduce, "reduce"}, {Stream::Fetch, "fetch"}};
static_assert(dense_and_unique(kStreams) && std::size(kStreams) == 1 + static_cast<size_t>(Stream::Fetch));

constexpr Named<ReduceOp> kReduceOps[] = {{ReduceOp::None, "none"}, {ReduceOp::Sum, "sum"}, {ReduceOp::Max, "max"}};
static_assert(dense_and_unique(kReduceOps) && std::size(kReduceOps) == 1 + static_cast<size_t>(ReduceOp::Max));

constexpr Named<ComputeKind> kComputeKinds[] = {{ComputeKind::None, "none"},
                                                {ComputeKind::Forward, "forward"},
                                                {ComputeKind::Backward, "backward"},
                                                {ComputeKind::OptimizerStep, "optimizer_step"}};
static_assert(dense_and_unique(kComputeKinds) &&
              std::size(kComputeKinds) == 1 + static_cast<size_t>(ComputeKind::OptimizerStep));

constexpr Named<HostKind> kHostKinds[] = {
    {HostKind::PreForward, "pre_forward"},     {HostKind::PreBackward, "pre_backward"},
    {HostKind::FetchWait, "fetch_wait"},       {HostKind::PostForward, "post_forward"},
    {HostKind::PostBackward, "post_backward"}, {HostKind::ReleaseAll, "release_all"},
    {HostKind::GradientFlush, "gradient_flush"}, {HostKind::ReduceSync, "reduce_sync"},
};
static_assert(dense_and_unique(kHostKinds) && std::size(kHostKinds) == 1 + static_cast<size_t>(HostKind::ReduceSync));

constexpr Named<Payload> kPayloads[] = {
    {Payload::Compute, "compute"},
    {Payload::GradientBucket, "gradient_bucket"},
    {Payload::GradientSlices, "gradient_slices"},
    {Payload::GradientShards, "gradient_shards"},
    {Payload::ParameterShards, "parameter_shards"},
    {Payload::ParameterPartitions, "parameter_partitions"},
    {Payload::ParameterBroadcast, "parameter_broadcast"},
    {Payload::OverflowFlag, "overflow_flag"},
    {Payload::GradientNorm, "gradient_norm"},
    {Payload::TraceCheck, "trace_check"},
    {Payload::Barrier, "barrier"},
    {Payload::QuantizedShards, "quantized_shards"},
    {Payload::QuantScales, "quant_scales"},
    {Payload::QuantizedGradient, "quantized_gradient"},
    {Payload::GradientPartitions, "gradient_partitions"},
    {Payload::Activations, "activations"},
    {Payload::Scalars, "scalars"},
};
static_assert(dense_and_unique(kPayloads) && std::size(kPayloads) == 1 + static_cast<size_t>(Payload::Scalars));

constexpr Named<PartitionKind> kPartitionKinds[] = {{PartitionKind::Replicated, "replicated"},
                                                    {PartitionKind::FlatGroups, "flat_groups"},
                                                    {PartitionKind::PerParameter, "per_parameter"}};
static_assert(dense_and_unique(kPartitionKinds) &&
              std::size(kPartitionKinds) == 1 + static_cast<size_t>(PartitionKind::PerParameter));

// DeepSpeed v0.14.2's groups keep no names; these are zerosim's, as the schedule JSON writes them.
constexpr Named<GroupKind> kGroupKinds[] = {
    {GroupKind::Dp, "dp"},
    {GroupKind::Hpz, "hpz"},
    {GroupKind::QgzIntra, "qgz_intra"},
    {GroupKind::QgzInter, "qgz_inter"},
    {GroupKind::MicsShard, "mics_shard"},
    {GroupKind::MicsReplica, "mics_replica"},
    {GroupKind::FsdpShard, "fsdp_shard"},
    {GroupKind::FsdpReplica, "fsdp_replica"},
    {GroupKind::Pipe, "pipe"},
    {GroupKind::Tensor, "tensor"},
    {GroupKind::ModelParallel, "model_parallel"},
    {GroupKind::Sequence, "sequence"},
    {GroupKind::Expert, "expert"},
    {GroupKind::ExpertData, "expert_data"},
};
static_assert(dense_and_unique(kGroupKinds) && std::size(kGroupKinds) == 1 + static_cast<size_t>(GroupKind::ExpertData));

}  // namespace

const char* op_record_name(OpKind k) { return name_in(kOpRecords, k); }
std::optional<OpKind> op_record_from_name(std::string_view name) { return value_named(kOpRecords, name); }
const char* phase_name(Phase p) { return name_in(kPhases, p); }
std::optional<Phase> phase_from_name(std::string_view name) { return value_named(kPhases, name); }
const char* stream_name(Stream s) { return name_in(kStreams, s); }
std::optional<Stream> stream_from_name(std::string_view name) { return value_named(kStreams, name); }
const char* reduce_op_name(ReduceOp r) { return name_in(kReduceOps, r); }
std::optional<ReduceOp> reduce_op_from_name(std::string_view name) { return value_named(kReduceOps, name); }
const char* compute_kind_name(ComputeKind k) { return name_in(kComputeKinds, k); }
std::optional<ComputeKind> compute_kind_from_name(std::string_view name) { return value_named(kComputeKinds, name); }
const char* host_kind_name(HostKind k) { return name_in(kHostKinds, k); }
std::optional<HostKind> host_kind_from_name(std::string_view name) { return value_named(kHostKinds, name); }
const char* payload_name(Payload p) { return name_in(kPayloads, p); }
std::optional<Payload> payload_from_name(std::string_view name) { return value_named(kPayloads, name); }
const char* partition_kind_name(PartitionKind k) { return name_in(kPartitionKinds, k); }
std::optional<PartitionKind> partition_kind_from_name(std::string_view name) { return value_named(kPartitionKinds, name); }
const char* group_name(GroupKind k) { return name_in(kGroupKinds, k); }
std::optional<GroupKind> group_from_name(std::string_view name) { return value_named(kGroupKinds, name); }
std::ostream& operator<<(std::ostream& out, GroupKind k) { return out << group_name(k); }

bool is_collective(OpKind k) { return k != OpKind::Compute; }

int64_t ScheduleMeta::group_size(GroupKind kind) const {
    if (kind == GroupKind::Dp) return world;
    for (const auto& g : groups)
        if (g.kind == kind) return g.size();
    return 0;
}

bool deepspeed_calls_in_place(OpKind k) { return is_collective(k) && collective_info(k).deepspeed_in_place; }

std::string phase_label(const Op& op, int64_t grad_accum) {
    if (op.step < 0) return "initialize";
    int64_t micro = op.phase == Phase::Step ? grad_accum - 1 : op.micro;
    return "step" + std::to_string(op.step) + ".micro" + std::to_string(micro) + "." + phase_name(op.phase);
}

// Every rule of docs/zero-comm.md that produces an op, in one table. The generator names the rule
// of each op it emits (and the op takes the rule's payload); explain/table outputs print the summary.
namespace {

constexpr Rule kRules[] = {
    {RuleId::InitBroadcastModel, "init.broadcast_model", "engine start: rank 0 broadcasts every parameter (registration order)", "", Payload::ParameterBroadcast},
    {RuleId::Stage3InitZeroInitParam, "stage3.init.zero_init_param", "stage 3 start: each parameter broadcast again as it is partitioned",
     "zero_optimization.stage", Payload::ParameterBroadcast},
    {RuleId::Stage3InitBarrier, "stage3.init.barrier", "stage 3 start: barriers around the optimizer set-up", "zero_optimization.stage", Payload::Barrier},
    {RuleId::Stage3InitAllgatherParams, "stage3.init.allgather_params", "stage 3 start: each parameter gathered once after partitioning",
     "zero_optimization.stage", Payload::ParameterShards},
    {RuleId::Stage0BucketAllreduce, "stage0.bucket_allreduce", "stage 0: all_reduce of gradient buckets at the accumulation boundary",
     "gradient_accumulation_steps", Payload::GradientSlices},
    {RuleId::Stage12FlushAllreducePredivide, "stage12.flush.allreduce_predivide",
     "stage 1/2 bucket flush with reduce_scatter off: one all_reduce of the whole bucket",
     "zero_optimization.reduce_scatter,zero_optimization.reduce_bucket_size,zero_optimization.contiguous_gradients", Payload::GradientSlices},
    {RuleId::Stage12FlushAllreducePerDtype, "stage12.flush.allreduce_per_dtype",
     "stage 1/2 bucket flush without contiguous gradients: one all_reduce per dtype of the bucket",
     "zero_optimization.contiguous_gradients,zero_optimization.reduce_bucket_size", Payload::GradientSlices},
    {RuleId::Stage12FlushMultiRankAllreduce, "stage12.flush.multi_rank_allreduce",
     "stage 1/2 bucket flush: slices per owning rank, all_reduce each time reduce_bucket_size is passed",
     "zero_optimization.reduce_scatter,zero_optimization.use_multi_rank_bucket_allreduce,"
     "zero_optimization.reduce_bucket_size,zero_optimization.round_robin_gradients", Payload::GradientSlices},
    {RuleId::Stage12FlushReducePerRank, "stage12.flush.reduce_per_rank",
     "stage 1/2 bucket flush: one reduce per destination rank, sized to its share of the bucket",
     "zero_optimization.reduce_scatter,zero_optimization.use_multi_rank_bucket_allreduce,"
     "zero_optimization.reduce_bucket_size,zero_optimization.round_robin_gradients", Payload::GradientSlices},
    {RuleId::Stage0ClipGradNorm, "stage0.clip_grad_norm", "stage 0, fp32 with gradient_clipping: all_reduce of the gradient norm",
     "gradient_clipping", Payload::GradientNorm},
    {RuleId::Bf16GradAllreduce, "bf16.grad_allreduce",
     "bf16 optimizer: all_reduce of the padded fp32 gradient buffers (in the communication dtype)",
     "bf16.enabled,communication_data_type", Payload::GradientSlices},
    {RuleId::StepOverflowCheck, "step.overflow_check", "fp16: all_reduce(MAX) of the overflow flag before the step", "fp16.enabled", Payload::OverflowFlag},
    {RuleId::Stage12StepGradNorm, "stage12.step.grad_norm", "gradient norm: one fp32 all_reduce per parameter group", "", Payload::GradientNorm},
    {RuleId::Stage12StepAllgatherPartitions, "stage12.step.allgather_partitions", "updated partitions gathered: one all_gather per parameter group",
     "zero_optimization.stage", Payload::ParameterPartitions},
    {RuleId::Bf16StepAllgatherPartitions, "bf16.step.allgather_partitions", "bf16 optimizer (stage 0): updated fp32 partitions gathered per group",
     "bf16.enabled", Payload::ParameterPartitions},
    {RuleId::Stage3Fetch, "stage3.fetch", "stage 3: gather a module's parameters before it runs", "zero_optimization.stage", Payload::ParameterShards},
    {RuleId::Stage3Prefetch, "stage3.prefetch",
     "stage 3: gather a module's parameters bundled with upcoming ones (prefetch from the recorded trace)",
     "zero_optimization.stage3_prefetch_bucket_size,zero_optimization.stage3_max_live_parameters", Payload::ParameterShards},
    {RuleId::Stage3TraceCheck, "stage3.trace_check", "stage 3, first step: rank 0 broadcasts the recorded trace for a consistency check",
     "zero_optimization.stage", Payload::TraceCheck},
    {RuleId::Stage3TraceStart, "stage3.trace_start", "stage 3, first forward (v0.15.4+): rank 0 broadcasts the empty trace of an invalid one",
     "zero_optimization.stage", Payload::TraceCheck},
    {RuleId::Stage3TraceCheckLength, "stage3.trace_check_length", "stage 3 (v0.17.6+): rank 0 broadcasts the length of the list it checks next",
     "zero_optimization.stage", Payload::TraceCheck},
    {RuleId::Stage3FlushReduceScatter, "stage3.flush.reduce_scatter", "stage 3 bucket flush: reduce_scatter of the padded, interleaved gradients",
     "zero_optimization.reduce_bucket_size,zero_optimization.reduce_scatter", Payload::GradientShards},
    {RuleId::Stage3FlushAllreduce, "stage3.flush.allreduce", "stage 3 bucket flush with reduce_scatter off: all_reduce of the bucket",
     "zero_optimization.reduce_bucket_size,zero_optimization.reduce_scatter,zero_optimization.contiguous_gradients", Payload::GradientBucket},
    {RuleId::Stage3StepGradNorm, "stage3.step.grad_norm", "stage 3 gradient norm: fp64 all_reduce per sub-group", "zero_optimization.sub_group_size", Payload::GradientNorm},
    {RuleId::Stage3StepGradNormCpuOffload, "stage3.step.grad_norm_cpu_offload", "stage 3 with offload_optimizer: the gradient norm as one fp32 all_reduce per sub-group",
     "zero_optimization.offload_optimizer", Payload::GradientNorm},
    {RuleId::Stage3StepPersistentRegather, "stage3.step.persistent_regather", "stage 3 after the step: re-gather each persistent parameter",
     "zero_optimization.stage3_param_persistence_threshold", Payload::ParameterShards},
    // ZeRO++ and MiCS, DeepSpeed v0.14.2 (docs/zero-variants.md). hpZ and MiCS keep the stage-3
    // rules above and change their group and sizes; these are the ops they add.
    // qwZ sends stage3.fetch's and stage3.prefetch's gathers as int8 data (partition_parameters.py
    // all_gather_coalesced, quantize=True): the same calls, a different payload, so rules of their own.
    {RuleId::QwzFetch, "qwz.fetch", "qwZ: stage3.fetch's gather, as the int8 data of the module's shards",
     "zero_optimization.stage,zero_optimization.zero_quantized_weights", Payload::QuantizedShards},
    {RuleId::QwzPrefetch, "qwz.prefetch", "qwZ: stage3.prefetch's gather, as the int8 data of the bundled shards",
     "zero_optimization.stage3_prefetch_bucket_size,zero_optimization.stage3_max_live_parameters,"
     "zero_optimization.zero_quantized_weights", Payload::QuantizedShards},
    {RuleId::QwzFetchScales, "qwz.fetch_scales", "qwZ: fp32 scales of the int8 parameter gather just before, one per group of <= 8000 elements",
     "zero_optimization.zero_quantized_weights", Payload::QuantScales},
    {RuleId::QgzIntraAllToAll, "qgz.intra_all_to_all", "qgZ: int4 gradient (two values a byte) exchanged inside the node",
     "zero_optimization.zero_quantized_gradients", Payload::QuantizedGradient},
    {RuleId::QgzIntraScales, "qgz.intra_scales", "qgZ: the fp32 scales of the intra-node exchange, G = max(rows, cols, world)",
     "zero_optimization.zero_quantized_gradients", Payload::QuantScales},
    {RuleId::QgzInterAllToAll, "qgz.inter_all_to_all", "qgZ: the node-reduced int4 gradient (1/ranks-per-node of it) exchanged across nodes",
     "zero_optimization.zero_quantized_gradients", Payload::QuantizedGradient},
    {RuleId::QgzInterScales, "qgz.inter_scales", "qgZ: the fp32 scales of the inter-node exchange, G / ranks-per-node",
     "zero_optimization.zero_quantized_gradients", Payload::QuantScales},
    {RuleId::QgzFallbackReduceScatter, "qgz.fallback_reduce_scatter",
     "qgZ: a 1-D gradient, or one whose size is not a multiple of 2 x world, reduce-scattered alone over the world",
     "zero_optimization.zero_quantized_gradients", Payload::GradientShards},
    {RuleId::MicsAllreduceShardGrads, "mics.allreduce_shard_grads",
     "MiCS, accumulation boundary: the bucket's gradient partitions all_reduced across shard groups (replication group)",
     "zero_optimization.mics_shard_size", Payload::GradientPartitions},
    // What-if rules (schedule/what_if_fsdp.hpp, docs/what-if.md): PyTorch FSDP's, never DeepSpeed's.
    {RuleId::WhatifFsdpUnshard, "whatif.fsdp.unshard", "what-if, PyTorch FSDP (not DeepSpeed): all_gather of one unit's flat parameter",
     "zero_optimization.stage", Payload::ParameterShards},
    {RuleId::WhatifFsdpReduceScatter, "whatif.fsdp.reduce_scatter", "what-if, PyTorch FSDP (not DeepSpeed): reduce_scatter of one unit's flat gradient",
     "zero_optimization.stage", Payload::GradientShards},
    {RuleId::WhatifHsdpAllreduce, "whatif.hsdp.allreduce", "what-if, FSDP HYBRID_SHARD (not DeepSpeed): the gradient shard all_reduced across nodes",
     "zero_optimization.stage", Payload::GradientPartitions},
    // ZeRO inside pipeline, tensor, sequence and expert parallelism, DeepSpeed v0.14.2
    // (../shared/docs/zero-in-3d.md; docs/zero-comm.md "ZeRO inside 3D parallelism").
    {RuleId::PipeInitParamCount, "pipe.init.param_count", "pipeline engine start: all_reduce of the stage's parameter counts over the model-parallel group",
     "", Payload::Scalars},
    {RuleId::PipeWarmupSend, "pipe.warmup_send", "pipeline engine start: a 4-byte send to the next stage (p2p warm-up)", "", Payload::Scalars},
    {RuleId::PipeWarmupRecv, "pipe.warmup_recv", "pipeline engine start: the 4-byte receive from the previous stage", "", Payload::Scalars},
    {RuleId::PipeMetaSend, "pipe.meta_send", "pipeline, first batch: the activation's dtype, rank and shape sent to the next stage", "", Payload::Scalars},
    {RuleId::PipeMetaRecv, "pipe.meta_recv", "pipeline, first batch: the activation's dtype, rank and shape received", "", Payload::Scalars},
    {RuleId::PipeActivationSend, "pipe.activation_send", "pipeline: a micro batch's activations sent to the next stage",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::PipeActivationRecv, "pipe.activation_recv", "pipeline: a micro batch's activations received from the previous stage",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::PipeGradSend, "pipe.grad_send", "pipeline: the activations' gradients sent back to the previous stage",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::PipeGradRecv, "pipe.grad_recv", "pipeline: the activations' gradients received from the next stage",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::PipeLossAllreduce, "pipe.loss_allreduce", "pipeline, last stage: the loss averaged over its data-parallel group", "", Payload::Scalars},
    {RuleId::PipeLossBroadcast, "pipe.loss_broadcast", "pipeline: the last stage broadcasts the loss over the pipe group", "", Payload::Scalars},
    {RuleId::PipeTiedGradAllreduce, "pipe.tied_grad_allreduce", "pipeline: gradients of weights tied across stages all_reduced over the tie group",
     "", Payload::GradientBucket},
    {RuleId::ZeroModelParallelAllreduce, "zero.model_parallel_allreduce",
     "ZeRO's gradient norm (or overflow flag) all_reduced over the model-parallel group", "", Payload::Scalars},
    {RuleId::TpForwardAllreduce, "tp.forward_allreduce", "tensor parallel: a row-parallel layer all_reduces its output in forward",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::TpBackwardAllreduce, "tp.backward_allreduce", "tensor parallel: a column-parallel layer all_reduces its input gradient in backward",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::MoeAllToAll, "moe.all_to_all", "MoE: dispatch and combine all_to_all of each MoE layer (twice forward, twice backward)",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::MoeCapacityAllreduce, "moe.capacity_allreduce", "MoE without token dropping: all_reduce(MAX) of the capacity over the expert group",
     "", Payload::Scalars},
    {RuleId::MoeExpertGradNorm, "moe.expert_grad_norm", "MoE: expert gradient norms averaged over the expert-data-parallel group (the BF16 optimizer: summed over the expert group)", "", Payload::Scalars},
    {RuleId::UlyssesAllToAll, "ulysses.all_to_all", "Ulysses: all_to_all of q, k, v and the output per attention (4 forward, 4 backward)",
     "train_micro_batch_size_per_gpu", Payload::Activations},
    {RuleId::MpuNormAllreduce, "mpu.norm_allreduce",
     "a gradient norm summed over the mpu's model-parallel group (BF16 optimizer; stage 0's fp32 clipping)",
     "gradient_clipping", Payload::Scalars},
    {RuleId::PipePartitionMetaSend, "pipe.partition_meta_send",
     "pipeline under tensor parallelism: the partition's layout (PartitionedTensor.to_meta) sent before its part",
     "pipeline.pipe_partitioned", Payload::Scalars},
    {RuleId::PipePartitionMetaRecv, "pipe.partition_meta_recv",
     "pipeline under tensor parallelism: the partition's layout received before its part", "pipeline.pipe_partitioned",
     Payload::Scalars},
    {RuleId::PipePartitionAllGather, "pipe.partition_allgather",
     "pipeline under tensor parallelism: a stage's tensor group all_gathers the activation (or gradient) parts each rank received",
     "pipeline.pipe_partitioned", Payload::Activations},
    {RuleId::ComputeForward, "compute.forward", "forward of one module for the micro batch", "train_micro_batch_size_per_gpu", Payload::Compute},
    {RuleId::ComputeBackward, "compute.backward", "backward of one module (about twice its forward)", "train_micro_batch_size_per_gpu", Payload::Compute},
    {RuleId::ComputeRecompute, "compute.recompute", "activation checkpointing: a checkpointed module's forward again, in backward before its backward",
     "activation_checkpointing", Payload::Compute},
    {RuleId::ComputeOptimizerStep, "compute.optimizer_step", "Adam update of this rank's partition of a parameter group", "zero_optimization.stage", Payload::Compute},
};
static_assert(dense_and_unique(kRules, [](const Rule& r) { return r.id; }, [](const Rule& r) { return r.name; }) &&
              std::size(kRules) == 1 + static_cast<size_t>(RuleId::ComputeOptimizerStep));

}  // namespace

const std::vector<Rule>& all_rules() {
    static const std::vector<Rule> rules(std::begin(kRules), std::end(kRules));
    return rules;
}

const Rule& rule_info(RuleId id) { return kRules[static_cast<size_t>(id)]; }

const char* rule_name(RuleId id) { return rule_info(id).name; }

std::optional<RuleId> rule_from_name(std::string_view name) {
    for (const Rule& r : kRules)
        if (name == r.name) return r.id;
    return std::nullopt;
}

std::ostream& operator<<(std::ostream& out, RuleId id) { return out << rule_name(id); }

}  // namespace zerosim
