#include "schedule/ir.hpp"

#include "schedule/collective_table.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace zerosim {

const char* op_record_name(OpKind k) {
    switch (k) {
        case OpKind::AllReduce: return "all_reduce";
        case OpKind::AllGather: return "all_gather_into_tensor";
        case OpKind::ReduceScatter: return "reduce_scatter_tensor";
        case OpKind::Broadcast: return "broadcast";
        case OpKind::Reduce: return "reduce";
        case OpKind::Barrier: return "barrier";
        case OpKind::Compute: return "compute";
        case OpKind::AllToAll: return "all_to_all_single";
    }
    return "?";
}

const char* phase_name(Phase p) {
    switch (p) {
        case Phase::Init: return "init";
        case Phase::Forward: return "forward";
        case Phase::Backward: return "backward";
        case Phase::Step: return "step";
    }
    return "?";
}

const char* stream_name(Stream s) {
    switch (s) {
        case Stream::Compute: return "compute";
        case Stream::Comm: return "comm";
        case Stream::Reduce: return "reduce";
        case Stream::Fetch: return "fetch";
    }
    return "?";
}

const char* reduce_op_name(ReduceOp r) {
    switch (r) {
        case ReduceOp::None: return "none";
        case ReduceOp::Sum: return "sum";
        case ReduceOp::Max: return "max";
    }
    return "?";
}

const char* compute_kind_name(ComputeKind k) {
    switch (k) {
        case ComputeKind::None: return "none";
        case ComputeKind::Forward: return "forward";
        case ComputeKind::Backward: return "backward";
        case ComputeKind::OptimizerStep: return "optimizer_step";
    }
    return "?";
}

const char* host_kind_name(HostKind k) {
    switch (k) {
        case HostKind::PreForward: return "pre_forward";
        case HostKind::PreBackward: return "pre_backward";
        case HostKind::FetchWait: return "fetch_wait";
        case HostKind::PostForward: return "post_forward";
        case HostKind::PostBackward: return "post_backward";
        case HostKind::ReleaseAll: return "release_all";
        case HostKind::GradientFlush: return "gradient_flush";
        case HostKind::ReduceSync: return "reduce_sync";
    }
    return "?";
}

const char* payload_name(Payload p) {
    switch (p) {
        case Payload::Compute: return "compute";
        case Payload::GradientBucket: return "gradient_bucket";
        case Payload::GradientSlices: return "gradient_slices";
        case Payload::GradientShards: return "gradient_shards";
        case Payload::ParameterShards: return "parameter_shards";
        case Payload::ParameterPartitions: return "parameter_partitions";
        case Payload::ParameterBroadcast: return "parameter_broadcast";
        case Payload::OverflowFlag: return "overflow_flag";
        case Payload::GradientNorm: return "gradient_norm";
        case Payload::TraceCheck: return "trace_check";
        case Payload::Barrier: return "barrier";
        case Payload::QuantizedShards: return "quantized_shards";
        case Payload::QuantScales: return "quant_scales";
        case Payload::QuantizedGradient: return "quantized_gradient";
        case Payload::GradientPartitions: return "gradient_partitions";
    }
    return "?";
}

std::optional<Payload> payload_from_name(const std::string& name) {
    for (Payload p : {Payload::Compute, Payload::GradientBucket, Payload::GradientSlices, Payload::GradientShards,
                      Payload::ParameterShards, Payload::ParameterPartitions, Payload::ParameterBroadcast,
                      Payload::OverflowFlag, Payload::GradientNorm, Payload::TraceCheck, Payload::Barrier,
                      Payload::QuantizedShards, Payload::QuantScales, Payload::QuantizedGradient,
                      Payload::GradientPartitions})
        if (name == payload_name(p)) return p;
    return std::nullopt;
}

const char* partition_kind_name(PartitionKind k) {
    switch (k) {
        case PartitionKind::Replicated: return "replicated";
        case PartitionKind::FlatGroups: return "flat_groups";
        case PartitionKind::PerParameter: return "per_parameter";
    }
    return "?";
}

std::optional<PartitionKind> partition_kind_from_name(const std::string& name) {
    for (PartitionKind k : {PartitionKind::Replicated, PartitionKind::FlatGroups, PartitionKind::PerParameter})
        if (name == partition_kind_name(k)) return k;
    return std::nullopt;
}

bool is_collective(OpKind k) { return k != OpKind::Compute; }

int64_t ScheduleMeta::group_size(const std::string& name) const {
    if (name == "dp") return world;
    for (const auto& g : groups)
        if (g.name == name) return g.size();
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
const std::vector<Rule>& all_rules() {
    static const std::vector<Rule> rules = {
        {"init.broadcast_model", "engine start: rank 0 broadcasts every parameter (registration order)", "", Payload::ParameterBroadcast},
        {"stage3.init.zero_init_param", "stage 3 start: each parameter broadcast again as it is partitioned",
         "zero_optimization.stage", Payload::ParameterBroadcast},
        {"stage3.init.barrier", "stage 3 start: barriers around the optimizer set-up", "zero_optimization.stage", Payload::Barrier},
        {"stage3.init.allgather_params", "stage 3 start: each parameter gathered once after partitioning",
         "zero_optimization.stage", Payload::ParameterShards},
        {"stage0.bucket_allreduce", "stage 0: all_reduce of gradient buckets at the accumulation boundary",
         "gradient_accumulation_steps", Payload::GradientSlices},
        {"stage12.flush.allreduce_predivide",
         "stage 1/2 bucket flush with reduce_scatter off: one all_reduce of the whole bucket",
         "zero_optimization.reduce_scatter,zero_optimization.reduce_bucket_size,zero_optimization.contiguous_gradients", Payload::GradientSlices},
        {"stage12.flush.allreduce_per_dtype",
         "stage 1/2 bucket flush without contiguous gradients: one all_reduce per dtype of the bucket",
         "zero_optimization.contiguous_gradients,zero_optimization.reduce_bucket_size", Payload::GradientSlices},
        {"stage12.flush.multi_rank_allreduce",
         "stage 1/2 bucket flush: slices per owning rank, all_reduce each time reduce_bucket_size is passed",
         "zero_optimization.reduce_scatter,zero_optimization.use_multi_rank_bucket_allreduce,"
         "zero_optimization.reduce_bucket_size,zero_optimization.round_robin_gradients", Payload::GradientSlices},
        {"stage12.flush.reduce_per_rank",
         "stage 1/2 bucket flush: one reduce per destination rank, sized to its share of the bucket",
         "zero_optimization.reduce_scatter,zero_optimization.use_multi_rank_bucket_allreduce,"
         "zero_optimization.reduce_bucket_size,zero_optimization.round_robin_gradients", Payload::GradientSlices},
        {"stage0.clip_grad_norm", "stage 0, fp32 with gradient_clipping: all_reduce of the gradient norm",
         "gradient_clipping", Payload::GradientNorm},
        {"bf16.grad_allreduce",
         "bf16 optimizer: all_reduce of the padded fp32 gradient buffers (in the communication dtype)",
         "bf16.enabled,communication_data_type", Payload::GradientSlices},
        {"step.overflow_check", "fp16: all_reduce(MAX) of the overflow flag before the step", "fp16.enabled", Payload::OverflowFlag},
        {"stage12.step.grad_norm", "gradient norm: one fp32 all_reduce per parameter group", "", Payload::GradientNorm},
        {"stage12.step.allgather_partitions", "updated partitions gathered: one all_gather per parameter group",
         "zero_optimization.stage", Payload::ParameterPartitions},
        {"bf16.step.allgather_partitions", "bf16 optimizer (stage 0): updated fp32 partitions gathered per group",
         "bf16.enabled", Payload::ParameterPartitions},
        {"stage3.fetch", "stage 3: gather a module's parameters before it runs", "zero_optimization.stage", Payload::ParameterShards},
        {"stage3.prefetch",
         "stage 3: gather a module's parameters bundled with upcoming ones (prefetch from the recorded trace)",
         "zero_optimization.stage3_prefetch_bucket_size,zero_optimization.stage3_max_live_parameters", Payload::ParameterShards},
        {"stage3.trace_check", "stage 3, first step: rank 0 broadcasts the recorded trace for a consistency check",
         "zero_optimization.stage", Payload::TraceCheck},
        {"stage3.trace_start", "stage 3, first forward (v0.15.4+): rank 0 broadcasts the empty trace of an invalid one",
         "zero_optimization.stage", Payload::TraceCheck},
        {"stage3.trace_check_length", "stage 3 (v0.17.6+): rank 0 broadcasts the length of the list it checks next",
         "zero_optimization.stage", Payload::TraceCheck},
        {"stage3.flush.reduce_scatter", "stage 3 bucket flush: reduce_scatter of the padded, interleaved gradients",
         "zero_optimization.reduce_bucket_size,zero_optimization.reduce_scatter", Payload::GradientShards},
        {"stage3.flush.allreduce", "stage 3 bucket flush with reduce_scatter off: all_reduce of the bucket",
         "zero_optimization.reduce_bucket_size,zero_optimization.reduce_scatter,zero_optimization.contiguous_gradients", Payload::GradientBucket},
        {"stage3.step.grad_norm", "stage 3 gradient norm: fp64 all_reduce per sub-group", "zero_optimization.sub_group_size", Payload::GradientNorm},
        {"stage3.step.grad_norm_cpu_offload", "stage 3 with offload_optimizer: the gradient norm as one fp32 all_reduce per sub-group",
         "zero_optimization.offload_optimizer", Payload::GradientNorm},
        {"stage3.step.persistent_regather", "stage 3 after the step: re-gather each persistent parameter",
         "zero_optimization.stage3_param_persistence_threshold", Payload::ParameterShards},
        // ZeRO++ and MiCS, DeepSpeed v0.14.2 (docs/zero-variants.md). hpZ and MiCS keep the stage-3
        // rules above and change their group and sizes; these are the ops they add.
        {"qwz.fetch_scales", "qwZ: fp32 scales of the int8 parameter gather just before, one per group of <= 8000 elements",
         "zero_optimization.zero_quantized_weights", Payload::QuantScales},
        {"qgz.intra_all_to_all", "qgZ: int4 gradient (two values a byte) exchanged inside the node",
         "zero_optimization.zero_quantized_gradients", Payload::QuantizedGradient},
        {"qgz.intra_scales", "qgZ: the fp32 scales of the intra-node exchange, G = max(rows, cols, world)",
         "zero_optimization.zero_quantized_gradients", Payload::QuantScales},
        {"qgz.inter_all_to_all", "qgZ: the node-reduced int4 gradient (1/ranks-per-node of it) exchanged across nodes",
         "zero_optimization.zero_quantized_gradients", Payload::QuantizedGradient},
        {"qgz.inter_scales", "qgZ: the fp32 scales of the inter-node exchange, G / ranks-per-node",
         "zero_optimization.zero_quantized_gradients", Payload::QuantScales},
        {"qgz.fallback_reduce_scatter",
         "qgZ: a 1-D gradient, or one whose size is not a multiple of 2 x world, reduce-scattered alone over the world",
         "zero_optimization.zero_quantized_gradients", Payload::GradientShards},
        {"mics.allreduce_shard_grads",
         "MiCS, accumulation boundary: the bucket's gradient partitions all_reduced across shard groups (replication group)",
         "zero_optimization.mics_shard_size", Payload::GradientPartitions},
        // What-if rules (prediction/what_if_fsdp.hpp, docs/what-if.md): PyTorch FSDP's, never DeepSpeed's.
        {"whatif.fsdp.unshard", "what-if, PyTorch FSDP (not DeepSpeed): all_gather of one unit's flat parameter",
         "zero_optimization.stage", Payload::ParameterShards},
        {"whatif.fsdp.reduce_scatter", "what-if, PyTorch FSDP (not DeepSpeed): reduce_scatter of one unit's flat gradient",
         "zero_optimization.stage", Payload::GradientShards},
        {"whatif.hsdp.allreduce", "what-if, FSDP HYBRID_SHARD (not DeepSpeed): the gradient shard all_reduced across nodes",
         "zero_optimization.stage", Payload::GradientPartitions},
        {"compute.forward", "forward of one module for the micro batch", "train_micro_batch_size_per_gpu", Payload::Compute},
        {"compute.backward", "backward of one module (about twice its forward)", "train_micro_batch_size_per_gpu", Payload::Compute},
        {"compute.optimizer_step", "Adam update of this rank's partition of a parameter group", "zero_optimization.stage", Payload::Compute},
    };
    return rules;
}

const Rule& rule_info(const std::string& id) {
    static const std::map<std::string, const Rule*> index = [] {
        std::map<std::string, const Rule*> m;
        for (const auto& r : all_rules()) m[r.id] = &r;
        return m;
    }();
    auto it = index.find(id);
    if (it == index.end()) {
        std::fprintf(stderr, "zerosim: internal error: unknown rule id '%s'\n", id.c_str());
        std::abort();
    }
    return *it->second;
}

}  // namespace zerosim
