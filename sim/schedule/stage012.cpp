// ZeRO stages 0, 1 and 2 (and DeepSpeed's BF16 optimizer) as DeepSpeed v0.14.2 runs them:
// deepspeed/runtime/zero/stage_1_and_2.py, engine.py (allreduce_gradients,
// buffered_allreduce_fallback) and bf16_optimizer.py. docs/zero-comm.md states the rules.
#include <algorithm>
#include <map>
#include <memory>

#include "schedule/partition.hpp"
#include "schedule/release_rules.hpp"
#include "build.hpp"

namespace zerosim::detail {

namespace {

// The engine's fixed bucket for stage 0 and the BF16 optimizer (MEMORY_OPT_ALLREDUCE_SIZE): the
// config's bucket sizes do not apply on that path.
constexpr int64_t kEngineAllreduceBucket = 500000000;

enum class Optimizer {
    Plain,   // stage 0, fp32 or fp16: the engine all_reduces gradients itself
    BF16,    // BF16_Optimizer: fp32 master partitions, engine all_reduce of padded group buffers
    Zero12,  // DeepSpeedZeroOptimizer (stages 1 and 2)
};

// Splits a sequence of tensor sizes the way allreduce_no_retain / allreduce_and_scatter do: add a
// tensor, and once the running count passes the limit send everything so far (the crossing
// tensor included); send the rest at the end.
// Returns [begin, end) index ranges into `sizes`.
std::vector<std::pair<size_t, size_t>> chunk_after_crossing(const std::vector<int64_t>& sizes, int64_t limit) {
    std::vector<std::pair<size_t, size_t>> out;
    int64_t acc = 0;
    size_t begin = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        acc += sizes[i];
        if (acc > limit) {
            out.emplace_back(begin, i + 1);
            acc = 0;
            begin = i + 1;
        }
    }
    if (begin < sizes.size()) out.emplace_back(begin, sizes.size());
    return out;
}

// A run of segments owned by one rank of one process group (DeepSpeed's rank_and_offsets entry).
struct OwnerSlice {
    int owner;
    GroupKind over;
    std::vector<Segment> segments;
    int64_t numel() const {
        int64_t n = 0;
        for (const auto& s : segments) n += s.numel;
        return n;
    }
};

// The mpu's norm all_reduce outside ZeRO's _model_parallel_all_reduce: runtime/utils.py
// get_global_norm_of_tensors (~888, the BF16 optimizer's step) and clip_grad_norm_ (~366, stage 0's
// fp32 clipping) sum over mpu.get_model_parallel_group() whenever an mpu is given, a one-rank group
// included. The pipeline engine hands its grid (model-parallel group = the pipe x tensor ranks of a
// data index, topology.py 302-311); tensor and Ulysses runs pass their own mpu.
void mpu_norm_allreduce(Build& b, const char* caller) {
    if (!b.mesh) return;
    const auto& L = b.mesh->layout();
    if (!L.pipelined() && L.tensor == 1 && L.sequence == 1) return;
    b.group_op(OpKind::AllReduce, 1, DType::FP32, caller, RuleId::MpuNormAllreduce,
               L.pipelined() ? GroupKind::ModelParallel : GroupKind::Tensor);
}

struct Stage012 : ZeroOptimizer {
    Build& b;
    ZeroConfig z;   // a copy: the pipeline engine turns overlap_comm off
    Optimizer kind;
    std::vector<FlatGroupLayout> layouts;   // one per optimizer parameter group
    std::vector<GroupKind> over;            // the group each is partitioned over (Dp; ExpertData: MoE)
    std::vector<int> bucket;                // the IPG bucket: parameters in fill order
    int64_t bucket_elements = 0;
    int flushes = 0;                        // flush counter within the micro-step

    Stage012(Build& build, Optimizer k) : b(build), z(build.cfg.zero), kind(k) {
        // engine.py _configure_zero_optimizer (1512-1515): "Pipeline parallelism does not support
        // overlapped communication, will be disabled."
        if (b.mesh && b.mesh->layout().pipelined()) z.overlap_comm = false;
        bool round_robin = k == Optimizer::Zero12 && z.round_robin_gradients;
        for (int g = 0; g < b.model.num_groups; ++g) {
            over.push_back(param_group_over(b, g));
            layouts.push_back(flat_group_layout(b.model, g, param_group_world(b, g), round_robin));
        }
    }

    Stream reduce_stream() const { return z.overlap_comm ? Stream::Reduce : Stream::Comm; }

    Op& reduction(OpKind kind_, int64_t elements, const char* caller, RuleId rule,
                  std::vector<Segment> segments = {}) {
        Op& op = b.collective(kind_, elements, b.cfg.comm_dtype(), caller, rule, reduce_stream());
        op.bucket = flushes;
        if (segments.empty())
            for (int p : bucket) segments.push_back({p, 0, b.model.params[p].numel});
        for (const auto& sg : segments)
            if (op.params.empty() || op.params.back() != sg.param) op.params.push_back(sg.param);
        op.segments = std::move(segments);
        return op;
    }

    // reduce_independent_p_g_buckets_and_remove_grads: flush first if the gradient would push the
    // bucket past reduce_bucket_size. Stages 1/2 have no "bucket not empty" test, so a gradient
    // larger than the bucket arriving first flushes an empty bucket.
    void add(int p) {
        int64_t n = b.model.params[p].numel;
        if (bucket_elements + n > z.reduce_bucket_size) flush();
        bucket.push_back(p);
        bucket_elements += n;
    }

    // reduce_ipg_grads -> average_tensor / buffered_reduce_fallback.
    void flush() {
        // offload_optimizer forces contiguous gradients on (stage_1_and_2.py __init__: contiguous_gradients
        // or cpu_offload), docs/zero-variants.md §5.1.
        if (!z.contiguous_gradients && !z.offload_optimizer) {
            // buffered_reduce_fallback: one all_reduce per dtype present (one dtype here).
            if (!bucket.empty())
                reduction(OpKind::AllReduce, bucket_elements, "allreduce_bucket", RuleId::Stage12FlushAllreducePerDtype);
        } else if (!z.reduce_scatter) {
            // gradient_reduction_w_predivide: the whole bucket, even an empty one (v0.14.2 has no
            // guard against a 0-element all_reduce; v0.14.5 returns early, #5868).
            if (bucket_elements > 0 || !applies(ReleaseRuleId::Stage12NoEmptyBucketReduce, b.cfg.release))
                reduction(OpKind::AllReduce, bucket_elements, "gradient_reduction_w_predivide",
                          RuleId::Stage12FlushAllreducePredivide);
        } else {
            flush_by_owner();
        }
        bucket.clear();
        bucket_elements = 0;
        ++flushes;
    }

    // average_tensor with reduce_scatter: cut the bucket into (owner, elements) slices, merging
    // neighbours with the same owner in the same process group (1100-1107: an expert parameter's
    // owners are expert-data ranks, 1068-1071), then all_reduce (multi-rank) or reduce per owner.
    void flush_by_owner() {
        std::vector<OwnerSlice> slices;
        for (int p : bucket) {
            const int g = b.model.params[p].group;
            for (const auto& gs : layouts[g].slices(b.model, p)) {
                Segment seg{p, gs.offset, gs.numel};
                if (!slices.empty() && slices.back().owner == gs.partition && slices.back().over == over[g])
                    slices.back().segments.push_back(seg);
                else
                    slices.push_back({gs.partition, over[g], {seg}});
            }
        }
        if (slices.empty()) return;
        auto send = [&](const std::vector<const OwnerSlice*>& list, OpKind k, RuleId rule, int root) {
            std::vector<int64_t> sizes;
            for (const auto* sl : list) sizes.push_back(sl->numel());
            for (auto [lo, hi] : chunk_after_crossing(sizes, z.reduce_bucket_size)) {
                std::vector<Segment> segs;
                int64_t n = 0;
                for (size_t i = lo; i < hi; ++i) {
                    segs.insert(segs.end(), list[i]->segments.begin(), list[i]->segments.end());
                    n += sizes[i];
                }
                Op& op = reduction(k, n, "allreduce_bucket", rule, std::move(segs));
                op.group = list.front()->over;
                if (root >= 0) op.root = root;
            }
        };
        // average_tensor:1114-1135: a dict keyed by the process group (multi-rank all_reduce) or by
        // (dst, group) (reduces to that owner), in first-insertion order, so an owner's slices form one
        // list even with other owners' slices between them; each list goes through
        // allreduce_and_scatter / allreduce_no_retain (docs/zero-comm.md §7, "Order of the per-rank
        // reduces"). A bucket of dense and expert gradients sends each group's list apart.
        const bool multi = z.use_multi_rank_bucket_allreduce;
        std::vector<std::pair<int, GroupKind>> keys;
        std::map<std::pair<int, GroupKind>, std::vector<const OwnerSlice*>> lists;
        for (const auto& sl : slices) {
            std::pair<int, GroupKind> key{multi ? -1 : sl.owner, sl.over};
            if (!lists.count(key)) keys.push_back(key);
            lists[key].push_back(&sl);
        }
        for (const auto& key : keys) {
            if (multi)
                send(lists[key], OpKind::AllReduce, RuleId::Stage12FlushMultiRankAllreduce, -1);
            else
                send(lists[key], OpKind::Reduce, RuleId::Stage12FlushReducePerRank, key.first);
        }
    }

    // engine.buffered_allreduce_fallback (engine.py 2454-2468): the dense gradients over the
    // data-parallel group, then, with MoE, the experts' over their expert-data group
    // (_reduce_expert_gradients 2431-2451), each list sent in chunks of the fixed engine bucket.
    void engine_allreduce() {
        for (GroupKind g : {GroupKind::Dp, GroupKind::ExpertData}) engine_allreduce_over(g);
    }

    void engine_allreduce_over(GroupKind group) {
        // Plain: every gradient, registration order (_get_gradients_for_reduction 2383-2412). BF16
        // optimizer: each group's padded fp32 gradient buffer, i.e. its parameters in flat order
        // (padding is not a segment; get_grads_for_reduction, bf16_optimizer.py 367-372).
        std::vector<int64_t> sizes;
        std::vector<std::vector<Segment>> pieces;
        if (kind == Optimizer::BF16) {
            for (size_t g = 0; g < layouts.size(); ++g) {
                if (over[g] != group) continue;
                sizes.push_back(layouts[g].padded_numel);
                std::vector<Segment> segs;
                for (int p : layouts[g].order) segs.push_back({p, 0, b.model.params[p].numel});
                pieces.push_back(std::move(segs));
            }
        } else {
            for (size_t p = 0; p < b.model.params.size(); ++p) {
                if (over[b.model.params[p].group] != group) continue;
                sizes.push_back(b.model.params[p].numel);
                pieces.push_back({{static_cast<int>(p), 0, b.model.params[p].numel}});
            }
        }
        RuleId rule = kind == Optimizer::BF16 ? RuleId::Bf16GradAllreduce : RuleId::Stage0BucketAllreduce;
        for (auto [lo, hi] : chunk_after_crossing(sizes, kEngineAllreduceBucket)) {
            int64_t n = 0;
            std::vector<Segment> segs;
            for (size_t i = lo; i < hi; ++i) {
                n += sizes[i];
                segs.insert(segs.end(), pieces[i].begin(), pieces[i].end());
            }
            Op& op = b.collective(OpKind::AllReduce, n, b.cfg.comm_dtype(), "allreduce_bucket", rule);
            op.group = group;
            for (const auto& sg : segs) op.params.push_back(sg.param);
            op.segments = std::move(segs);
        }
    }

    void micro_step(const std::vector<std::pair<int, std::vector<int>>>& plan) {
        b.phase = Phase::Forward;
        for (int m : b.model.forward_order) {
            b.forward(m);
            b.hook(HookPoint::AfterForward, m);
        }
        b.phase = Phase::Backward;
        flushes = 0;
        // Gradient hooks reduce as gradients become ready: stage 2 on every micro-step, stage 1
        // (with overlap_comm, which installs the hooks) only on the boundary micro-step.
        bool hooks = kind == Optimizer::Zero12 &&
                     (z.stage == 2 || (z.stage == 1 && z.overlap_comm && b.is_boundary()));
        for (size_t i = 0; i < plan.size(); ++i) {
            const auto& [module, ready] = plan[i];
            b.recompute_before(plan.size() - 1 - i);   // the plan is forward_order reversed
            b.hook(HookPoint::BeforeBackward, module);
            b.backward(module);
            if (hooks)
                for (int p : ready) add(p);
            b.hook(HookPoint::AfterBackward, module);
        }
        if (kind == Optimizer::Zero12 && z.stage == 2)
            flush();  // the epilogue, every micro-step
        else if (b.is_boundary())
            boundary_reduction();
    }

    // The gradient reduction at the accumulation boundary: stage 1's reduce_gradients, or the
    // engine's buffered_allreduce_fallback (stage 0, BF16 optimizer).
    void boundary_reduction() {
        if (kind != Optimizer::Zero12) {
            engine_allreduce();
            return;
        }
        // reduce_gradients (stage_1_and_2.py 695-715): without hooks, walk every group in registration order.
        if (!z.overlap_comm)
            for (int g = 0; g < b.model.num_groups; ++g)
                for (size_t p = 0; p < b.model.params.size(); ++p)
                    if (b.model.params[p].group == g) add(static_cast<int>(p));
        flush();
    }

    // ZeroOptimizer, for the pipeline engine (its ReduceGrads and OptimizerStep instructions).
    void reduce_gradients() override {
        flushes = 0;
        boundary_reduction();
    }
    void step(int s) override { optimizer_step(s); }
    DType tied_grad_dtype() const override {
        // pipe/engine.py _exec_reduce_tied_grads (279): the BF16 optimizer's fp32 _hp_grad, else weight.grad.
        return kind == Optimizer::BF16 ? DType::FP32 : b.cfg.model_dtype;
    }

    void optimizer_step(int s) {
        b.phase = Phase::Step;
        b.micro = -1;
        const DType model_dt = b.cfg.model_dtype;
        if (kind == Optimizer::Plain) {
            // fp16 checks overflow locally at stage 0; fp32 with clipping all_reduces the norm.
            if (model_dt == DType::FP32 && b.cfg.gradient_clipping > 0.0) {
                mpu_norm_allreduce(b, "clip_grad_norm_");
                b.collective(OpKind::AllReduce, 1, DType::FP32, "clip_grad_norm_", RuleId::Stage0ClipGradNorm);
            }
            if (!b.overflows(s)) {
                Op& opt = b.optimizer_step(-1, b.model.total_numel());
                for (size_t p = 0; p < b.model.params.size(); ++p) opt.params.push_back(static_cast<int>(p));
            }
            return;
        }
        // fp16 always checks for overflow; bf16 from v0.17.1 when bf16.check_grad_overflow is set (its
        // default from v0.19.3). Stage 1's check stays local in v0.17.1-v0.17.6 (release_rules.hpp).
        const Release rel = b.cfg.release;
        bool checks = model_dt == DType::FP16 || (model_dt == DType::BF16 && b.cfg.bf16_check_grad_overflow &&
                                                  applies(ReleaseRuleId::Stage12Bf16OverflowCheck, rel));
        if (kind == Optimizer::Zero12 && checks) {
            if (!(z.stage == 1 && applies(ReleaseRuleId::Stage1Fp16NoOverflowReduce, rel))) {
                b.collective(OpKind::AllReduce, 1, DType::UINT8, "has_overflow", RuleId::StepOverflowCheck).redop = ReduceOp::Max;
                model_parallel_allreduce(b, DType::UINT8, ReduceOp::Max);   // has_overflow ~2013
            }
            if (b.overflows(s)) return;  // gradients dropped, loss scale lowered, no update
        }
        if (kind == Optimizer::Zero12)
            for (int g = 0; g < b.model.num_groups; ++g) {
                b.collective(OpKind::AllReduce, 1, DType::FP32,  // offload: the CPU path's norm, same 4-byte scalar
                             z.offload_optimizer ? "complete_grad_norm_calculation_for_cpu_offload" : "get_grad_norm_direct",
                             RuleId::Stage12StepGradNorm)
                    .param_group = g;
                model_parallel_allreduce(b, DType::FP32, ReduceOp::Sum);   // get_grad_norm_direct ~1697
            }
        expert_norms();
        if (kind == Optimizer::BF16) mpu_norm_allreduce(b, "get_global_norm_of_tensors");   // bf16_optimizer.py 284
        // Each rank updates its partition of every group; `params` lists the group in flat order.
        for (int g = 0; g < b.model.num_groups; ++g) b.optimizer_step(g, layouts[g].partition_size).params = layouts[g].order;
        // all_gather_into_tensor_dp_groups (runtime/utils.py 952-960): each group over its own
        // process group, skipped where that group has one rank (an expert group with --ep = dp).
        for (int g = 0; g < b.model.num_groups; ++g) {
            if (param_group_world(b, g) <= 1) continue;
            Op& op = b.collective(OpKind::AllGather, layouts[g].partition_size, model_dt, "all_gather_into_tensor_dp_groups",
                                  kind == Optimizer::BF16 ? RuleId::Bf16StepAllgatherPartitions
                                                          : RuleId::Stage12StepAllgatherPartitions);
            op.param_group = g;
            op.group = over[g];
        }
    }

    // MoE: the experts' gradient norms. ZeRO: _average_expert_grad_norms (stage_1_and_2.py 1950-1957)
    // after every group's get_grad_norm_direct (whose all_reduce is over the data-parallel group even
    // for an expert group, 1697): each expert group's norm all_reduced over its expert-data group.
    // BF16 optimizer: get_norm_with_moe_layers (runtime/utils.py 1026-1049) sums each expert group
    // name's norm over the expert-parallel group (893-895); a run has one name (ep_size_<--ep>).
    void expert_norms() {
        if (kind == Optimizer::BF16) {
            if (std::find(over.begin(), over.end(), GroupKind::ExpertData) != over.end())
                b.group_op(OpKind::AllReduce, 1, DType::FP32, "get_global_norm_of_tensors", RuleId::MoeExpertGradNorm,
                           GroupKind::Expert);
            return;
        }
        for (int g = 0; g < b.model.num_groups; ++g)
            if (over[g] == GroupKind::ExpertData)
                b.group_op(OpKind::AllReduce, 1, DType::FP32, "_average_expert_grad_norms", RuleId::MoeExpertGradNorm,
                           GroupKind::ExpertData)
                    .param_group = g;
    }
};

// stage_1_and_2.py _configure_moe_settings (605-613) asserts for a model with MoE layers:
// contiguous gradients at stage 2 (offload forces them on, 205) and reduce_scatter at stages 1 and 2.
Status zero12_moe_refusal(const DsConfig& c) {
    if (c.zero.stage == 2 && !c.zero.contiguous_gradients && !c.zero.offload_optimizer)
        return Error{c.source, "zero_optimization.contiguous_gradients",
                     "DeepSpeed's ZeRO stage 2 needs contiguous_gradients true with MoE layers (stage_1_and_2.py asserts it)"};
    if (!c.zero.reduce_scatter)
        return Error{c.source, "zero_optimization.reduce_scatter",
                     "DeepSpeed's ZeRO stages 1 and 2 need reduce_scatter true with MoE layers (stage_1_and_2.py asserts it)"};
    return std::nullopt;
}

// The optimizer DeepSpeed builds for stages 0-2, with the partition layout it applies written into
// the schedule's meta.
std::unique_ptr<Stage012> make_stage012(Build& b) {
    const auto& c = b.cfg;
    // bf16 without ZeRO, or with stage 1 and fp32 gradient accumulation, runs DeepSpeed's BF16
    // optimizer instead (engine._do_optimizer_sanity_check). From v0.17.6 (#7515) bf16 without ZeRO
    // does so only with grad_accum_dtype fp32 written; unset, it takes stage 0's DDP path.
    bool stage0_bf16_optimizer = !applies(ReleaseRuleId::Stage0Bf16NoBf16Optimizer, c.release) ||
                                 c.grad_accum_dtype == DType::FP32;
    bool bf16_optimizer = c.model_dtype == DType::BF16 &&
                          ((c.zero.stage == 0 && stage0_bf16_optimizer) ||
                           (c.zero.stage == 1 && c.grad_accum_dtype == DType::FP32));
    Optimizer kind = bf16_optimizer ? Optimizer::BF16 : c.zero.stage == 0 ? Optimizer::Plain : Optimizer::Zero12;
    auto s = std::make_unique<Stage012>(b, kind);
    const bool moe = std::find(s->over.begin(), s->over.end(), GroupKind::ExpertData) != s->over.end();
    if (kind == Optimizer::Zero12 && moe)
        if (auto e = zero12_moe_refusal(c))
            if (!b.failure) b.failure = *e;
    // The layout actually applied: the BF16 optimizer never reorders round robin.
    b.out.meta.round_robin_gradients = kind == Optimizer::Zero12 && c.zero.round_robin_gradients;
    // Stage 0's plain optimizer keeps everything on every rank; the others own one partition of
    // each flattened group (stage_1_and_2.py / bf16_optimizer.py partition the flat buffers).
    PartitionLayout& part = b.out.meta.partition;
    part.kind = kind == Optimizer::Plain ? PartitionKind::Replicated : PartitionKind::FlatGroups;
    if (kind != Optimizer::Plain)
        for (const auto& L : s->layouts) {
            GroupPartition g{L.order, {}, L.partition_size, s->over[static_cast<size_t>(L.group)]};
            for (int p : L.order) g.offsets.push_back(L.flat_offset.at(p));
            part.groups.push_back(std::move(g));
        }
    return s;
}

}  // namespace

std::unique_ptr<ZeroOptimizer> stage01_optimizer(Build& b) { return make_stage012(b); }

void generate_stage012(Build& b) {
    engine_start_broadcasts(b);
    auto s = make_stage012(b);
    auto plan = b.backward_plan();
    for (int step = 0; step < b.opt.steps; ++step) {
        b.step = step;
        for (int micro = 0; micro < b.batch.grad_accum; ++micro) {
            b.micro = micro;
            s->micro_step(plan);
            if (b.past_size_limit()) return;
        }
        s->optimizer_step(step);
        if (b.past_size_limit()) return;
    }
}

}  // namespace zerosim::detail
