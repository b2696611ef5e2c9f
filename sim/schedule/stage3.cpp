// ZeRO stage 3 as DeepSpeed v0.14.2 runs it, for a model built outside zero.Init:
// deepspeed/runtime/zero/stage3.py, partitioned_param_coordinator.py, parameter_offload.py and
// partition_parameters.py. docs/zero-comm.md states the rules.
//
// The parameter coordinator is simulated as a state machine over module calls: which parameters
// are gathered, when the trace is recorded, what the prefetcher bundles and when parameters are
// released all follow from the same state DeepSpeed keeps, so first and later steps, gradient
// accumulation and large models come out of one mechanism rather than special cases.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "schedule/partition.hpp"
#include "schedule/release_rules.hpp"
#include "build.hpp"
#include "stage3_host.hpp"
#include "stage3_variants.hpp"

namespace zerosim::detail {

namespace {

// Invalid: the state a trace starts in from v0.15.4 (#6662, partitioned_param_coordinator.py).
enum class TraceMode { Invalid, Record, Complete };

struct HookEvent {
    enum Kind { PreForward, PostForward, PreBackward, PostBackward } kind;
    int node;
};

// Forward hooks in call order; backward hooks as autograd runs them: the reverse, with a call's
// pre-backward where its post-forward was and its post-backward where its pre-forward was.
// Calls whose output carries no gradient get no backward hooks; calls fed token ids get no
// post-backward. A checkpointed call (recompute.cpp) ran its forward under no_grad, so none of
// its calls registered backward hooks then (parameter_offload.py _pre_backward_module_hook applies
// PreBackwardFunctionForModule to outputs that carry no graph); where autograd reaches it,
// CheckpointFunction.backward runs its forward again (every forward hook again, now registering
// the backward ones), then its backward: the call's forward events, then its backward events.
void hook_events(const Build& b, std::vector<HookEvent>& fwd, std::vector<HookEvent>& bwd) {
    const Model& m = b.model;
    std::vector<size_t> opened(m.calls.size(), 0);   // each call's PreForward position in fwd
    std::function<void(int)> walk = [&](int n) {
        opened[static_cast<size_t>(n)] = fwd.size();
        fwd.push_back({HookEvent::PreForward, n});
        for (int c : m.calls[n].children) walk(c);
        fwd.push_back({HookEvent::PostForward, n});
    };
    walk(0);
    for (size_t i = fwd.size(); i-- > 0;) {
        const HookEvent& e = fwd[i];
        const CallNode& node = m.calls[e.node];
        if (!node.grad_out) continue;
        if (e.kind == HookEvent::PostForward && b.checkpointed_call(e.node)) {
            const size_t first = opened[static_cast<size_t>(e.node)];
            bwd.insert(bwd.end(), fwd.begin() + static_cast<std::ptrdiff_t>(first), fwd.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        }
        if (e.kind == HookEvent::PostForward)
            bwd.push_back({HookEvent::PreBackward, e.node});
        else if (node.grad_in)
            bwd.push_back({HookEvent::PostBackward, e.node});
    }
}

struct Stage3 {
    Build& b;
    const ZeroConfig& z;
    const Model& m;
    int64_t world;
    std::vector<bool> persistent;
    std::vector<bool> available;
    std::vector<std::set<int>> active;       // modules currently using each parameter
    std::vector<std::vector<int>> sub_groups; // optimizer sub-groups (stage3 fp16_groups)

    // Coordinator state.
    TraceMode mode = TraceMode::Record;
    std::vector<int> trace_modules;          // recorded module of every fetch (-1: no parameters)
    struct ParamUse {
        int param;
        int step_id;
    };
    std::vector<ParamUse> param_order;
    std::deque<ParamUse> queue;
    std::map<int, int64_t> most_recent;      // parameter -> latest trace step it was fetched for
    int step_id = 0;
    int64_t n_available = 0;
    int64_t live = 0;                         // elements of all parameters gathered right now
    Stage3Host host;                          // the coordinator's host events
    Stage3Variants var;                       // ZeRO++ / MiCS: groups, sizes, hpZ secondary copies
    void set_available(int p, bool on) {
        if (available[p] == on) return;
        available[p] = on;
        if (!on) var.partitioned(p);          // partition() rebuilds the hpZ secondary copy
        live += on ? m.params[p].numel : -m.params[p].numel;
        if (!on) host.released(m.params[p].numel);
        b.out.meta.stage3_peak_gathered_elements = std::max(b.out.meta.stage3_peak_gathered_elements, live);
    }
    std::map<std::pair<int, int>, std::set<int>> release_cache;  // (module, step) -> params (lru_cache)

    // Gradient bucket.
    std::vector<int> bucket;
    int64_t counted_elements = 0;             // the bucket's element count as DeepSpeed keeps it (release_rules
                                              // Stage3BucketElementsKept: v0.17.2 never resets it)
    int flushes = 0;

    explicit Stage3(Build& build)
        : b(build), z(build.cfg.zero), m(build.model), world(build.parameter_world()),
          persistent(m.params.size(), false), available(m.params.size(), false), active(m.params.size()),
          host(build, m.params.size()), var(build) {
        if (applies(ReleaseRuleId::Stage3TraceCheckAtForward, b.cfg.release)) mode = TraceMode::Invalid;
        // mark_persistent_parameters: registration order, inclusive threshold, model-wide cap.
        int64_t total = 0;
        for (size_t p = 0; p < m.params.size(); ++p) {
            int64_t n = m.params[p].numel;
            if (n + total > z.model_persistence_threshold) continue;
            if (n <= z.param_persistence_threshold) {
                persistent[p] = true;
                total += n;
            }
        }
        b.out.meta.stage3_persistent_elements = total;
        // _create_fp16_sub_groups: each parameter group cut after sub_group_size partition elements.
        for (int g = 0; g < m.num_groups; ++g) {
            std::vector<int> group;
            int64_t group_numel = 0;
            for (size_t p = 0; p < m.params.size(); ++p)
                if (m.params[p].group == g) {
                    group.push_back(static_cast<int>(p));
                    group_numel += part(static_cast<int>(p));
                }
            if (z.sub_group_size >= group_numel) {
                sub_groups.push_back(group);
                continue;
            }
            std::vector<int> sub;
            int64_t local = 0;
            for (int p : group) {
                sub.push_back(p);
                local += part(p);
                if (local >= z.sub_group_size || p == group.back()) {
                    sub_groups.push_back(sub);
                    sub.clear();
                    local = 0;
                }
            }
        }
    }

    int64_t part(int p) const { return var.part(p); }  // ceil(numel / world), or / MiCS shard size
    // A gradient in the reduce_scatter: padded to a multiple of the group it is scattered over (the
    // MiCS shard group, else ZeRO's group, which under Ulysses is larger than the parameters' partition).
    int64_t scatter_numel(int p) const {
        if (b.param_world == 0) return b.out.meta.shard_count() * part(p);
        return b.opt.world * stage3_partition_numel(m.params[p].numel, b.opt.world);
    }

    std::vector<int> module_params(int node) const {
        int mod = m.calls[node].module;
        if (mod < 0) return {};
        std::vector<int> ps = m.modules[mod].params;
        std::sort(ps.begin(), ps.end());  // sorted(set(iter_params(m)), key=ds_id)
        ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
        return ps;
    }

    // all_gather_coalesced: the parameters still partitioned, by ds_id, one all_gather of their
    // shards (one dtype here). No communication with a single rank.
    void gather(const std::vector<int>& candidates, RuleId rule, int node) {
        std::vector<int> todo;
        for (int p : candidates)
            if (!available[p]) todo.push_back(p);
        if (todo.empty()) return;
        std::sort(todo.begin(), todo.end());
        int64_t elements = 0;
        for (int p : todo) {
            elements += part(p);
            n_available += m.params[p].numel;
            set_available(p, true);
        }
        if (world == 1) return;
        std::string module_name;
        if (node >= 0 && m.calls[node].module >= 0) module_name = m.modules[m.calls[node].module].name;
        var.fetch(todo, rule, module_name, host);
    }

    // fetch_sub_module: gather this call's parameters, then (trace complete) prefetch upcoming ones.
    void fetch(int node, bool forward_hook) {
        if (mode == TraceMode::Record) trace_modules.push_back(node);
        const int mod = m.calls[node].module;
        host.event(forward_hook ? HostKind::PreForward : HostKind::PreBackward, mod);
        std::vector<int> ps = module_params(node);
        for (int p : ps) active[p].insert(mod);
        gather(ps, RuleId::Stage3Fetch, node);
        host.wait(ps, mod);  // before the prefetch, as fetch_sub_module orders them
        if (mode == TraceMode::Complete) {
            std::set<int> not_yet_popped;
            for (int p : ps)
                if (recent(p) < step_id) not_yet_popped.insert(p);
            std::set<int> discarded;
            while (!queue.empty() && discarded.size() < not_yet_popped.size()) {
                ParamUse u = queue.front();
                queue.pop_front();
                most_recent[u.param] = u.step_id;
                discarded.insert(u.param);
            }
            if (z.prefetch_bucket_size > 0) {
                int64_t limit = std::min(z.max_live_parameters - n_available, z.prefetch_bucket_size);
                int64_t numel = 0;
                std::set<int> chosen;
                while (!queue.empty() && numel < limit) {
                    ParamUse u = queue.front();
                    queue.pop_front();
                    if (!available[u.param]) {
                        chosen.insert(u.param);
                        numel += m.params[u.param].numel;  // counted per trace entry, as DeepSpeed does
                    }
                    most_recent[u.param] = std::max(recent(u.param), static_cast<int64_t>(u.step_id));
                }
                if (numel > 0) gather(std::vector<int>(chosen.begin(), chosen.end()), RuleId::Stage3Prefetch, node);
            }
        }
        ++step_id;
    }

    int64_t recent(int p) const {
        auto it = most_recent.find(p);
        return it == most_recent.end() ? static_cast<int64_t>(-1e10) : it->second;
    }

    // release_sub_module. While recording, everything the call used is released; with a complete
    // trace, __params_to_release keeps persistent parameters, parameters already prefetched for a
    // later use, and parameters used again within max_reuse_distance (cached per module and step).
    void release(int node, bool forward_hook) {
        int mod = m.calls[node].module;
        host.event(forward_hook ? HostKind::PostForward : HostKind::PostBackward, mod);
        if (mod < 0) return;
        std::vector<int> ps = module_params(node);
        std::set<int> to_release;
        if (mode == TraceMode::Record) {
            to_release.insert(ps.begin(), ps.end());
        } else {
            auto key = std::make_pair(mod, step_id);
            auto it = release_cache.find(key);
            if (it == release_cache.end()) {
                std::set<int> r;
                for (int p : ps)
                    if (!persistent[p] && recent(p) <= step_id) r.insert(p);
                int64_t traversed = 0;
                for (size_t k = static_cast<size_t>(step_id); k < trace_modules.size(); ++k) {
                    if (traversed >= z.max_reuse_distance) break;
                    for (int p : module_params(trace_modules[k])) {
                        r.erase(p);
                        traversed += m.params[p].numel;
                    }
                }
                it = release_cache.emplace(key, std::move(r)).first;
            }
            to_release = it->second;
        }
        for (int p : ps) {
            active[p].erase(mod);
            if (to_release.count(p) && available[p] && active[p].empty()) {
                set_available(p, false);
                n_available -= m.params[p].numel;
            }
        }
    }

    // reduce_independent_p_g_buckets_and_remove_grads: flush first when the gradient would pass
    // the bucket, but never an empty bucket.
    void add_gradient(int p, int mod) {
        int64_t n = m.params[p].numel;
        if (counted_elements + n > z.reduce_bucket_size && counted_elements > 0) flush(mod);
        bucket.push_back(p);
        counted_elements += n;
    }

    // __reduce_and_partition_ipg_grads, from module `mod`'s gradient hook (-1: the epilogue).
    void flush(int mod) {
        if (bucket.empty()) return;
        host.flush(mod);  // the reduce-event throttle, before the reduce is issued
        const size_t first = b.out.ops.size();
        Stream st = z.overlap_comm ? Stream::Reduce : Stream::Comm;
        Op* op;
        if (z.contiguous_gradients && counted_elements <= z.reduce_bucket_size && !z.reduce_scatter) {
            // The contiguous buffer narrowed to the counted elements (v0.17.2: the running total).
            op = &b.collective(OpKind::AllReduce, counted_elements, b.cfg.comm_dtype(), "__avg_scatter_contiguous_grads",
                               RuleId::Stage3FlushAllreduce, st);
        } else if (var.quantized_gradients()) {
            // qgZ (stage3.py __avg_scatter_grads -> all_to_all_quant_reduce): per gradient, ds_id order.
            std::vector<int> sorted = bucket;
            std::sort(sorted.begin(), sorted.end());
            var.quantized_reduce(sorted, flushes++, st);
            op = nullptr;
        } else {
            // reduce_scatter_coalesced: each gradient padded to world * ceil(numel / world) and
            // interleaved by rank; one reduce_scatter per flush.
            int64_t elements = 0;
            for (int p : bucket) elements += scatter_numel(p);
            op = &b.collective(OpKind::ReduceScatter, elements, b.cfg.comm_dtype(), "reduce_scatter_fn",
                               RuleId::Stage3FlushReduceScatter, st);
        }
        if (op) {
            op->bucket = flushes++;
            op->params = bucket;
            op->group = var.shard_group();
            std::sort(op->params.begin(), op->params.end());
            var.after_flush(op->params, op->bucket, st);  // MiCS: the replication all_reduce
        }
        // The event is recorded on the reduce stream after everything the flush issued there.
        host.flushed(b.out.ops.size() > first ? static_cast<int64_t>(b.out.ops.size()) - 1 : -1);
        bucket.clear();
        if (!applies(ReleaseRuleId::Stage3BucketElementsKept, b.cfg.release)) counted_elements = 0;
    }

    // One list broadcast of assert_ints_same_as_other_ranks (runtime/zero/utils.py), preceded from
    // v0.17.6 by the 8-byte length broadcast of assert_lst_len_same_as_other_ranks (#7525).
    void trace_broadcast(int64_t n, RuleId rule) {
        if (applies(ReleaseRuleId::Stage3TraceLengthCheck, b.cfg.release))
            b.collective(OpKind::Broadcast, 1, DType::INT64, "assert_lst_len_same_as_other_ranks",
                         RuleId::Stage3TraceCheckLength);
        b.collective(OpKind::Broadcast, n, DType::INT64, "get_lst_from_rank0", rule);
    }

    // reset_step, after every backward: the first one checks the recorded trace across ranks
    // (three int64 broadcasts from rank 0) and freezes it; every one restarts the fetch queue.
    // From v0.15.4 (#6662) it runs in the root module's forward pre-hook instead (forward_reset_step).
    void reset_step() {
        if (mode == TraceMode::Invalid) {
            // v0.15.4+: an incomplete trace broadcasts its (empty) module list and starts recording.
            trace_broadcast(0, RuleId::Stage3TraceStart);
            mode = TraceMode::Record;
        } else if (mode == TraceMode::Record) {
            if (!applies(ReleaseRuleId::Stage3TraceCheckAtForward, b.cfg.release)) b.phase = Phase::Backward;
            auto bcast = [&](int64_t n) { trace_broadcast(n, RuleId::Stage3TraceCheck); };
            param_order.clear();
            for (size_t k = 0; k < trace_modules.size(); ++k)
                for (int p : module_params(trace_modules[k])) param_order.push_back({p, static_cast<int>(k)});
            bcast(static_cast<int64_t>(trace_modules.size()));
            bcast(static_cast<int64_t>(param_order.size()));
            bcast(static_cast<int64_t>(param_order.size()));
            mode = TraceMode::Complete;
        }
        queue.assign(param_order.begin(), param_order.end());
        most_recent.clear();
        step_id = 0;
        n_available = 0;
    }

    // A forward hook pair's work: in the forward phase the module's forward, in backward its
    // recompute (the same fetch, compute and layer hooks).
    void forward_event(const HookEvent& e) {
        const int mod = m.calls[e.node].module;
        if (e.kind == HookEvent::PostForward) {
            release(e.node, true);
            return;
        }
        fetch(e.node, true);
        if (mod >= 0) (b.phase == Phase::Forward ? b.forward(mod) : b.recompute(mod));
        b.hook(HookPoint::AfterForward, mod, e.node);
    }

    void micro_step(const std::vector<HookEvent>& fwd, const std::vector<HookEvent>& bwd,
                    const std::vector<std::vector<int>>& ready_at_node) {
        b.phase = Phase::Forward;
        const bool reset_at_forward = applies(ReleaseRuleId::Stage3TraceCheckAtForward, b.cfg.release);
        if (reset_at_forward) reset_step();   // parameter_offload.py _start_of_forward_hook (v0.15.4+)
        for (const auto& e : fwd) forward_event(e);
        b.phase = Phase::Backward;
        flushes = 0;
        for (const auto& e : bwd) {
            int mod = m.calls[e.node].module;
            if (e.kind == HookEvent::PreForward || e.kind == HookEvent::PostForward) {
                forward_event(e);   // a checkpointed call's forward again (compute.recompute)
            } else if (e.kind == HookEvent::PreBackward) {
                if (mod >= 0) b.hook(HookPoint::BeforeBackward, mod);
                fetch(e.node, false);
                if (mod >= 0) {
                    b.backward(mod);
                    for (int p : ready_at_node[e.node]) add_gradient(p, mod);
                }
                b.hook(HookPoint::AfterBackward, mod, e.node);
            } else {
                release(e.node, false);
            }
        }
        if (!reset_at_forward) reset_step();
        flush(-1);  // the epilogue, every micro-step: its last flush, then the stream's synchronize
        host.reduce_sync();
    }

    void optimizer_step(int s) {
        b.phase = Phase::Step;
        b.micro = -1;
        // _partition_all_parameters: everything back to its partition before the step.
        host.event(HostKind::ReleaseAll, -1);
        host.clear_inflight();
        for (size_t p = 0; p < m.params.size(); ++p) {
            set_available(static_cast<int>(p), false);
            active[p].clear();
        }
        n_available = 0;
        if (b.cfg.model_dtype == DType::FP16) {
            Op& flag = b.collective(OpKind::AllReduce, 1, DType::UINT8, "has_overflow", RuleId::StepOverflowCheck);
            flag.redop = ReduceOp::Max;
            flag.group = var.shard_group();
            model_parallel_allreduce(b, DType::UINT8, ReduceOp::Max);   // has_overflow ~2168
            // Skipped step: persistent parameters stay partitioned, hpZ secondary copies stay valid.
            if (b.overflows(s)) return;
        }
        // With offload_optimizer the norm is complete_grad_norm_calculation_for_cpu_offload's fp32 scalar
        // (stage3.py, docs/zero-variants.md §5.2), else get_grad_norm_direct's fp64 one.
        for (size_t g = 0; g < sub_groups.size(); ++g) {
            (z.offload_optimizer ? b.collective(OpKind::AllReduce, 1, DType::FP32, "complete_grad_norm_calculation_for_cpu_offload",
                                                RuleId::Stage3StepGradNormCpuOffload)
                                 : b.collective(OpKind::AllReduce, 1, DType::FP64, "get_grad_norm_direct", RuleId::Stage3StepGradNorm))
                .group = var.shard_group();
            // stage3.py ~1404 / ~1761: the same scalar over the model-parallel group.
            model_parallel_allreduce(b, z.offload_optimizer ? DType::FP32 : DType::FP64, ReduceOp::Sum);
        }
        for (size_t g = 0; g < sub_groups.size(); ++g) {
            int64_t elements = 0;
            for (int p : sub_groups[g]) elements += part(p);
            b.optimizer_step(m.params[sub_groups[g].front()].group, elements).params = sub_groups[g];
        }
        // _post_step: persistent parameters gathered again, one all_gather each (or the single
        // one through _allgather_params, which communicates even on one rank).
        std::vector<int> pers;
        for (size_t p = 0; p < m.params.size(); ++p)
            if (persistent[p]) pers.push_back(static_cast<int>(p));
        for (int p : pers) {
            if (pers.size() == 1) {
                Op& op = b.collective(OpKind::AllGather, part(p), b.cfg.model_dtype, "_allgather_params",
                                      RuleId::Stage3StepPersistentRegather);
                op.params = {p};
                op.group = var.shard_group();
            } else if (world > 1) {
                Op& op = b.collective(OpKind::AllGather, part(p), b.cfg.model_dtype, "_allgather_params_coalesced",
                                      RuleId::Stage3StepPersistentRegather);
                op.params = {p};
                op.group = var.shard_group();
            }
            set_available(p, true);
        }
        var.invalidate_secondary();  // _post_step: invalidate_secondary_tensor on the trainable parameters
    }
};

// Engine start for a model built outside zero.Init: after _broadcast_model, Init(module=...)
// broadcasts each parameter as it partitions it, the optimizer set-up runs three barriers, and
// the gradient hooks are created on gathered parameters (one all_gather each, group order).
// Built under zero.Init (--zero-init), each parameter was broadcast and partitioned as it was
// constructed (partition_parameters.py _zero_init_param), before deepspeed.initialize set up the
// comms logger, and _broadcast_model skips every parameter that is not AVAILABLE (engine.py):
// neither is logged (../shared/reference/deepspeed-v0.14.2-cpu-variants/z3_zeroinit_w4).
void stage3_engine_start(Stage3& s) {
    Build& b = s.b;
    for (size_t p = 0; p < s.m.params.size() && !b.opt.zero_init; ++p)
        b.collective(OpKind::Broadcast, s.m.params[p].numel, b.cfg.model_dtype, "_zero_init_param",
                     RuleId::Stage3InitZeroInitParam).params = {static_cast<int>(p)};
    b.collective(OpKind::Barrier, 0, DType::FP32, "_create_fp16_partitions_with_defragmentation", RuleId::Stage3InitBarrier);
    b.collective(OpKind::Barrier, 0, DType::FP32, "_setup_for_real_optimizer", RuleId::Stage3InitBarrier);
    b.collective(OpKind::Barrier, 0, DType::FP32, "_setup_for_real_optimizer", RuleId::Stage3InitBarrier);
    for (const auto& sub : s.sub_groups)
        for (int p : sub)
        {
            Op& op = b.collective(OpKind::AllGather, s.part(p), b.cfg.model_dtype, "_allgather_params",
                                  RuleId::Stage3InitAllgatherParams);
            op.params = {p};
            op.group = s.var.shard_group();  // MiCS: get_partition_dp_group is the shard group
        }
}

}  // namespace

void generate_stage3(Build& b) {
    // Every parameter partitioned on its own (partition_parameters.py _partition_param).
    b.out.meta.partition.kind = PartitionKind::PerParameter;
    b.out.meta.zero_init = b.opt.zero_init;
    if (b.opt.zero_init) {
        b.step = -1;
        b.micro = -1;
        b.phase = Phase::Init;
    } else {
        engine_start_broadcasts(b);
    }
    Stage3 s(b);
    stage3_engine_start(s);
    std::vector<HookEvent> fwd, bwd;
    hook_events(b, fwd, bwd);
    // Gradients become ready during the backward of their first-use call.
    std::vector<std::vector<int>> ready_at_node(b.model.calls.size());
    std::vector<int> first_use_node(b.model.params.size(), -1);
    for (const auto& e : fwd) {
        if (e.kind != HookEvent::PreForward) continue;
        int mod = b.model.calls[e.node].module;
        if (mod < 0) continue;
        for (int p : b.model.modules[mod].params)
            if (first_use_node[p] < 0) first_use_node[p] = e.node;
    }
    for (size_t n = 0; n < b.model.calls.size(); ++n) {
        int mod = b.model.calls[n].module;
        if (mod < 0) continue;
        for (int p : b.autograd_order(mod))
            if (first_use_node[p] == static_cast<int>(n)) ready_at_node[n].push_back(p);
    }
    for (int step = 0; step < b.opt.steps; ++step) {
        b.step = step;
        for (int micro = 0; micro < b.batch.grad_accum; ++micro) {
            b.micro = micro;
            s.micro_step(fwd, bwd, ready_at_node);
            if (b.past_size_limit()) return;
        }
        s.optimizer_step(step);
        if (b.past_size_limit()) return;
    }
}

}  // namespace zerosim::detail
