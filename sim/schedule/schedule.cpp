#include "build.hpp"
#include "stage3_variants.hpp"

#include "schedule/ordering.hpp"
#include "schedule/release_rules.hpp"

#include <algorithm>
#include <cmath>

namespace zerosim {
namespace detail {

Op& Build::collective(OpKind kind, int64_t elements, DType dtype, const char* caller, RuleId rule, Stream stream) {
    Op op;
    op.kind = kind;
    op.step = step;
    op.micro = micro;
    op.phase = phase;
    op.stream = stream;
    op.elements = elements;
    op.dtype = dtype;
    op.caller = caller;
    op.rule = rule;
    op.payload = rule_info(rule).payload;
    op.redop = (kind == OpKind::AllReduce || kind == OpKind::ReduceScatter || kind == OpKind::Reduce) ? ReduceOp::Sum
                                                                                                         : ReduceOp::None;
    if (kind == OpKind::Broadcast) op.root = 0;
    return out.add(std::move(op));
}

Op& Build::group_op(OpKind kind, int64_t elements, DType dtype, const char* caller, RuleId rule, GroupKind group) {
    Op& op = collective(kind, elements, dtype, caller, rule);
    op.group = group;
    return op;
}

Op& Build::p2p(OpKind send_or_recv, int64_t elements, DType dtype, RuleId rule, int64_t peer) {
    // pipe/p2p.py send/recv -> deepspeed.comm send/recv, logged with their own names as callers.
    Op& op = collective(send_or_recv, elements, dtype, send_or_recv == OpKind::Send ? "send" : "recv", rule);
    op.redop = ReduceOp::None;
    op.group = GroupKind::Pipe;
    op.peer = peer;
    return op;
}

}  // namespace detail

ScheduleOptions options_for_rank(const ScheduleMeta& meta, int64_t rank) {
    ScheduleOptions o;
    o.world = meta.layout.world;
    o.steps = meta.steps;
    o.seq_len = meta.seq_len;
    o.layout = meta.layout;
    o.rank = rank;
    o.pp_partition = meta.pipe_partition;
    o.pp_partition_type = meta.pipe_partition_type;
    o.activation_checkpointing = meta.activation_checkpointing;
    return o;
}

ScheduleOptions options_for_stage(const ScheduleMeta& meta, int64_t stage) {
    const int64_t per_stage = meta.layout.world / meta.layout.pipe;   // DeepSpeed's grid: pipe slowest
    return options_for_rank(meta, stage * per_stage + meta.rank % per_stage);
}

namespace detail {

void model_parallel_allreduce(Build& b, DType dtype, ReduceOp redop) {
    // Without an mpu (no 3D, or expert parallelism alone: groups.py builds MoE's groups itself) DeepSpeed's
    // model_parallel_group is None. The pipeline engine hands its grid as the mpu; tensor and Ulysses runs pass one.
    if (!b.mesh) return;
    const auto& L = b.mesh->layout();
    if (!L.pipelined() && L.tensor == 1 && L.sequence == 1) return;
    // The mpu's model-parallel group: under the pipeline engine the grid's ds_model_proc_group
    // (pipe x tensor, topology.py 302-311), else the tensor-parallel group.
    const bool pipe = L.pipelined();
    if (b.cfg.zero.stage != 3 && b.group_size(pipe ? MeshGroup::ModelParallel : MeshGroup::Tensor) <= 1) return;
    b.group_op(OpKind::AllReduce, 1, dtype, "_model_parallel_all_reduce", RuleId::ZeroModelParallelAllreduce,
               pipe ? GroupKind::ModelParallel : GroupKind::Tensor)
        .redop = redop;
}

namespace {

// Forward FLOPs and bytes of one module for `tokens` tokens (one micro batch on one rank).
// Weight matrices cost a multiply-add per element per token; vectors (biases, norm weights) a
// few element-wise operations; embeddings are lookups. Attention's score and value matmuls are
// charged to the module after them (Module::attention_width). A routed expert of a Hugging Face
// MoE block sees top_k / num_experts of the tokens (Model::token_share): its FLOPs and activation
// bytes are that share, its weights are read whole.
void module_cost(const Model& m, int module, int64_t all_tokens, int64_t seq_len, DType dt, double& flops, int64_t& bytes) {
    const Module& mod = m.modules[module];
    const double share = m.routed_experts.empty() ? 1.0 : m.token_share(mod.name);
    const double tokens = share * static_cast<double>(all_tokens);
    flops = 0.0;
    bytes = 0;
    int es = dtype_size(dt);
    for (int p : mod.params) {
        const auto& par = m.params[p];
        bytes += par.numel * es;
        if (mod.kind == ModuleKind::Embedding) {
            bytes += all_tokens * par.shape.back() * es;
        } else if (par.shape.size() >= 2) {
            flops += 2.0 * tokens * static_cast<double>(par.numel);
            bytes += static_cast<int64_t>(std::llround(tokens * static_cast<double>(par.shape[0] + par.shape[1]))) * es;
        } else {
            flops += (mod.kind == ModuleKind::Norm ? 5.0 : 1.0) * tokens * static_cast<double>(par.numel);
        }
    }
    flops += 4.0 * tokens * static_cast<double>(seq_len) * static_cast<double>(mod.attention_width);
}

}  // namespace

Op& Build::forward(int module) {
    Op op;
    op.kind = OpKind::Compute;
    op.compute = ComputeKind::Forward;
    op.step = step;
    op.micro = micro;
    op.phase = Phase::Forward;
    op.stream = Stream::Compute;
    op.rule = RuleId::ComputeForward;
    op.payload = rule_info(op.rule).payload;
    op.module = module;
    op.module_name = model.modules[module].name;
    op.params = model.modules[module].params;
    module_cost(model, module, batch.micro_batch * seq_len, seq_len, cfg.model_dtype, op.flops, op.mem_bytes);
    return out.add(std::move(op));
}

Op& Build::backward(int module) {
    Op& op = forward(module);
    op.compute = ComputeKind::Backward;
    op.phase = Phase::Backward;
    op.rule = RuleId::ComputeBackward;
    op.payload = rule_info(op.rule).payload;
    op.flops *= 2.0;       // gradients for inputs and for weights
    op.mem_bytes *= 2;
    return op;
}

Op& Build::optimizer_step(int group, int64_t elements) {
    Op op;
    op.kind = OpKind::Compute;
    op.compute = ComputeKind::OptimizerStep;
    op.step = step;
    op.micro = micro;
    op.phase = Phase::Step;
    op.stream = Stream::Compute;
    op.rule = RuleId::ComputeOptimizerStep;
    op.payload = rule_info(op.rule).payload;
    op.param_group = group;
    op.elements = elements;
    op.dtype = DType::FP32;
    // Adam on fp32 master weights: read weight, gradient, two moments; write weight and moments;
    // about a dozen floating-point operations per element.
    op.flops = 12.0 * static_cast<double>(elements);
    op.mem_bytes = elements * 28;
    return out.add(std::move(op));
}

bool Build::overflows(int s) const {
    return std::find(opt.overflow_steps.begin(), opt.overflow_steps.end(), s) != opt.overflow_steps.end();
}

std::vector<int> Build::autograd_order(int module) const {
    // The order autograd's engine runs the module's parameters' AccumulateGrad nodes (DeepSpeed's
    // reduce hooks sit on them): it queues a backward node's inputs in argument order and runs
    // AccumulateGrad first among ready nodes, earlier-queued first on a tie (docs/zero-comm.md §3).
    //  - Linear (addmm(bias, x, weight.t()) / HF Conv1D addmm(bias, x, weight)): the bias is the
    //    first argument, the weight comes through t() or after it: bias, then weight, i.e.
    //    reverse registration order.
    //  - LayerNorm (native_layer_norm(input, shape, weight, bias)): weight, then bias, i.e.
    //    registration order.
    const Module& mod = model.modules[module];
    std::vector<int> order(mod.params.begin(), mod.params.end());
    if (mod.kind != ModuleKind::Norm) std::reverse(order.begin(), order.end());
    return order;
}

std::vector<std::pair<int, std::vector<int>>> Build::backward_plan() const {
    // A parameter's gradient is complete once the backward of its first forward use has run
    // (autograd sums all uses before the accumulate-grad hook fires).
    std::vector<int> first_use_pos(model.params.size(), -1);
    for (size_t pos = 0; pos < model.forward_order.size(); ++pos)
        for (int p : model.modules[model.forward_order[pos]].params)
            if (first_use_pos[p] < 0) first_use_pos[p] = static_cast<int>(pos);
    std::vector<std::pair<int, std::vector<int>>> plan;
    for (size_t k = model.forward_order.size(); k-- > 0;) {
        int module = model.forward_order[k];
        std::vector<int> ready;
        for (int p : autograd_order(module))
            if (first_use_pos[p] == static_cast<int>(k)) ready.push_back(p);
        plan.emplace_back(module, std::move(ready));
    }
    return plan;
}

void engine_start_broadcasts(Build& b) {
    // DeepSpeedEngine._broadcast_model: every parameter, registration order, in the model's dtype
    // (the engine casts the module to fp16/bf16 before broadcasting); an expert's over its
    // expert-data group (engine.py 1070-1074), logged even where that group has one rank.
    b.step = -1;
    b.micro = -1;
    b.phase = Phase::Init;
    for (size_t i = 0; i < b.model.params.size(); ++i) {
        Op& op = b.collective(OpKind::Broadcast, b.model.params[i].numel, b.cfg.model_dtype, "_broadcast_model",
                              RuleId::InitBroadcastModel);
        op.params = {static_cast<int>(i)};
        op.group = param_group_over(b, b.model.params[i].group);
    }
}

}  // namespace detail

namespace detail {

Result<Schedule> build_whole(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt) {
    if (opt.world < 1) return Error{"", "--world", "expected a world size of at least 1, found " + std::to_string(opt.world)};
    if (opt.steps < 1) return Error{"", "--steps", "expected at least 1 step, found " + std::to_string(opt.steps)};
    if (opt.seq_len < 0) return Error{"", "--seq-len", "expected a positive sequence length"};
    for (int s : opt.overflow_steps)
        if (s < 0 || s >= opt.steps)
            return Error{"", "--overflow-steps", "step " + std::to_string(s) + " is outside 0.." + std::to_string(opt.steps - 1)};
    // bf16 at stages 1/2 checks too where bf16.check_grad_overflow is on (release_rules.hpp).
    bool bf16_checks = cfg.model_dtype == DType::BF16 && cfg.bf16_check_grad_overflow &&
                       (cfg.zero.stage == 1 || cfg.zero.stage == 2) &&
                       applies(ReleaseRuleId::Stage12Bf16OverflowCheck, cfg.release);
    if (!opt.overflow_steps.empty() && cfg.model_dtype != DType::FP16 && !bf16_checks)
        return Error{cfg.source, "fp16.enabled", "--overflow-steps needs fp16 training (only fp16 checks for overflow)"};
    if (opt.zero_init && cfg.zero.stage != 3)
        return Error{"", "--zero-init", "deepspeed.zero.Init partitions parameters only under ZeRO stage 3; " + cfg.source +
                                            " has stage " + std::to_string(cfg.zero.stage)};
    // A Hugging Face MoE model's experts are plain modules (dense to ZeRO); expert parallelism
    // needs DeepSpeed's MoE layers, which only a parameter list declares.
    if (opt.layout.expert > 1 && model.parallel.moe.empty() && !model.routed_experts.empty())
        return Error{model.source, "--ep",
                     "expert parallelism of a Hugging Face MoE model is not modelled: DeepSpeed MoE layers come from "
                     "a parameter list's \"moe\" section"};
    // A model with MoE layers runs DeepSpeed's MoE path even at --ep 1 (one-rank expert groups still
    // all_to_all; expert parameters are still their own optimizer groups).
    if (opt.layout.is_3d() || !model.parallel.moe.empty()) return detail::build_rank_schedule(model, cfg, opt);
    auto batch = resolve_batch(cfg, opt.world);
    if (!batch) return batch.error();
    // Bounded work: the size is known from the inputs; refuse before building what cannot fit (or,
    // counting while building, once what is built passes the limits: Build::past_size_limit).
    if (auto e = check_schedule_size(model, cfg, opt, batch->grad_accum)) return *e;
    detail::Build b{model, cfg, opt, batch.value(), 0, {}, -1, -1, Phase::Init, std::nullopt, nullptr, 0, 0, {}};
    if (auto e = detail::start_schedule(b)) return *e;
    return detail::finish_schedule(b);
}

Status start_schedule(Build& b) {
    const Model& model = b.model;
    const DsConfig& cfg = b.cfg;
    const ScheduleOptions& opt = b.opt;
    b.seq_len = opt.seq_len > 0 ? opt.seq_len : model.default_seq_len > 0 ? model.default_seq_len : 1024;
    auto& meta = b.out.meta;
    meta.model_name = model.name;
    meta.model_file = model.source;
    meta.release = cfg.release;
    meta.dialect = "deepspeed-" + cfg.release.number();
    meta.ds_config_file = cfg.source;
    meta.world = opt.world;
    meta.stage = cfg.zero.stage;
    meta.steps = opt.steps;
    meta.micro_batch = b.batch.micro_batch;
    meta.grad_accum = b.batch.grad_accum;
    meta.seq_len = b.seq_len;
    meta.total_params = model.total_numel();
    meta.num_groups = model.num_groups;
    meta.model_dtype = cfg.model_dtype;
    meta.comm_dtype = cfg.comm_dtype();
    meta.overflow_steps = opt.overflow_steps;
    meta.round_robin_gradients = cfg.zero.round_robin_gradients;
    for (const auto& p : model.params) b.out.params.push_back({p.name, p.shape, p.numel, p.group});
    meta.activation_checkpointing = opt.activation_checkpointing;
    set_checkpoint_regions(b);
    // ZeRO++ / MiCS groups and DeepSpeed's refusals of their settings (stage3_variants.hpp).
    return detail::setup_zero_variants(b);
}

bool Build::past_size_limit() {
    if (!opt.count_while_building) return false;
    if (failure) return true;
    for (; counted_ops < out.ops.size(); ++counted_ops) counted_bytes += op_memory_estimate(out.ops[counted_ops]);
    failure = check_building_size(static_cast<int64_t>(out.ops.size()), counted_bytes, model.params.size(), step, micro, out.meta, opt);
    return failure.has_value();
}

Result<Schedule> finish_schedule(Build& b) {
    if (b.out.meta.layout.pipelined())
        generate_pipeline(b);
    else if (b.cfg.zero.stage == 3)
        generate_stage3(b);
    else
        generate_stage012(b);
    if (b.failure) return *b.failure;
    // The generators emit ops in issue order; every wait beyond stream order comes from here.
    add_ordering_deps(b.out);
    return std::move(b.out);
}

}  // namespace detail

}  // namespace zerosim
