// PyTorch FSDP's schedule as a what-if (schedule/what_if_fsdp.hpp; docs/what-if.md). The sources
// cited are PyTorch v2.0-v2.5's torch/distributed/fsdp/_runtime_utils.py (hooks), _exec_order_utils.py
// (backward prefetch target) and _limiter_utils.py (the all-gather rate limiter).
#include "schedule/what_if_fsdp.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <string>

#include "inputs/model.hpp"
#include "schedule/mesh.hpp"

namespace zerosim {

namespace {

constexpr RuleId kUnshard = RuleId::WhatifFsdpUnshard;
constexpr RuleId kReduceScatter = RuleId::WhatifFsdpReduceScatter;
constexpr RuleId kReplicaAllReduce = RuleId::WhatifHsdpAllreduce;

struct Generator {
    FsdpStrategy strategy;
    const Schedule& in;
    Schedule out;
    std::vector<FsdpUnit> units;
    std::vector<int> unit_of_param;
    int64_t shard_ranks = 1;
    int64_t replicas = 1;
    GroupKind shard_group = GroupKind::Dp;
    std::vector<int64_t> padded;        // per unit: numel padded to a multiple of shard_ranks
    std::vector<bool> unsharded;
    std::vector<int64_t> gather_of;     // per unit: the gather that last unsharded it
    std::deque<int64_t> free_events;    // _FreeEventQueue: the op after which a unit was freed
    int64_t live = 0, peak = 0;
    int64_t last_compute = -1, last_reduce = -1;

    Generator(FsdpStrategy st, const Schedule& s) : strategy(st), in(s) {}

    int unit_of(const Op& op) const { return op.params.empty() ? 0 : unit_of_param[static_cast<size_t>(op.params[0])]; }

    void host(HostKind k, const Op& at, std::vector<int64_t> waits = {}) {
        HostEvent e;
        e.kind = k;
        e.step = at.step;
        e.micro = at.micro;
        e.first_op = static_cast<int64_t>(out.ops.size());
        e.waits = std::move(waits);
        out.host.push_back(std::move(e));
    }

    // _unshard: the rate limiter's host wait, then the flat parameter's all_gather on the unshard
    // stream, in the parameter dtype (MixedPrecision.param_dtype: the training dtype here).
    void unshard(int u, const Op& at) {
        if (unsharded[static_cast<size_t>(u)]) return;
        if (free_events.size() >= 2) {   // dequeue_if_needed: 2 all-gathers in flight, then event.synchronize()
            host(HostKind::FetchWait, at, {free_events.front()});
            free_events.pop_front();
        }
        Op g;
        g.kind = OpKind::AllGather;
        g.step = at.step;
        g.micro = at.micro;
        g.phase = at.phase;
        g.stream = Stream::Fetch;
        g.rule = kUnshard;
        g.payload = rule_info(g.rule).payload;
        g.caller = "FSDP _unshard (what-if, not DeepSpeed)";
        g.elements = padded[static_cast<size_t>(u)] / shard_ranks;   // one rank's shard, as DeepSpeed logs all_gathers
        g.dtype = in.meta.model_dtype;
        g.group = shard_group;
        g.params = units[static_cast<size_t>(u)].params;
        // _root_pre_forward's _wait_for_computation_stream: the unshard stream waits for the default
        // stream (the optimizer step) before the forward's first gather.
        if (at.phase == Phase::Forward && u == 0 && last_compute >= 0) g.deps.push_back(last_compute);
        gather_of[static_cast<size_t>(u)] = out.add(std::move(g)).id;
        unsharded[static_cast<size_t>(u)] = true;
        live += padded[static_cast<size_t>(u)];
        peak = std::max(peak, live);
    }

    // _reshard with free_unsharded_flat_param: the free's event is enqueued for the rate limiter.
    void free_unit(int u) {
        unsharded[static_cast<size_t>(u)] = false;
        live -= padded[static_cast<size_t>(u)];
        free_events.push_back(last_compute);
    }

    void compute(Op op, int u, bool first_of_unit) {
        op.deps.clear();
        // current_stream().wait_stream(unshard stream) in _pre_forward_unshard / _pre_backward_hook.
        if (first_of_unit && gather_of[static_cast<size_t>(u)] >= 0) op.deps.push_back(gather_of[static_cast<size_t>(u)]);
        last_compute = out.add(std::move(op)).id;
    }

    // _post_backward_hook: the post-backward stream waits for the gradient computation, then
    // reduce_scatters the padded flat gradient (reduce_dtype: the config's communication dtype);
    // HYBRID_SHARD all_reduces the resulting shard across the replica group.
    void reduce(int u, const Op& at) {
        Op r;
        r.kind = OpKind::ReduceScatter;
        r.step = at.step;
        r.micro = at.micro;
        r.phase = Phase::Backward;
        r.stream = Stream::Reduce;
        r.rule = kReduceScatter;
        r.payload = rule_info(r.rule).payload;
        r.caller = "FSDP _post_backward_hook (what-if, not DeepSpeed)";
        r.elements = padded[static_cast<size_t>(u)];   // the full input, as DeepSpeed logs reduce_scatter_tensor
        r.dtype = in.meta.comm_dtype;
        r.redop = ReduceOp::Sum;
        r.group = shard_group;
        r.params = units[static_cast<size_t>(u)].params;
        r.deps.push_back(last_compute);
        last_reduce = out.add(r).id;
        if (strategy == FsdpStrategy::HybridShard && replicas > 1) {
            Op a = r;
            a.kind = OpKind::AllReduce;
            a.rule = kReplicaAllReduce;
            a.payload = rule_info(a.rule).payload;
            a.caller = "FSDP allreduce_hook on _inter_node_state (what-if, not DeepSpeed)";
            a.elements = padded[static_cast<size_t>(u)] / shard_ranks;
            a.group = GroupKind::FsdpReplica;
            a.deps.clear();
            last_reduce = out.add(std::move(a)).id;
        }
    }

    void forward(const std::vector<const Op*>& ops) {
        host(HostKind::PreForward, *ops.front());   // the root's pre-forward
        unshard(0, *ops.front());
        int current = -1;
        for (size_t i = 0; i < ops.size(); ++i) {
            const int u = unit_of(*ops[i]);
            const bool first = u != current;
            if (first && u != 0) {
                host(HostKind::PreForward, *ops[i]);
                unshard(u, *ops[i]);
            }
            current = u;
            compute(*ops[i], u, first);
            const bool last = i + 1 == ops.size() || unit_of(*ops[i + 1]) != u;
            if (last && u != 0) {
                host(HostKind::PostForward, *ops[i]);
                // _post_forward_reshard: FULL_SHARD (and HYBRID_SHARD) free, never the root's.
                if (strategy != FsdpStrategy::ShardGradOp) free_unit(u);
            }
        }
    }

    void backward(const std::vector<const Op*>& ops, const std::vector<int>& forward_order) {
        std::map<int, size_t> first_at, last_at;
        for (size_t i = 0; i < ops.size(); ++i) {
            const int u = unit_of(*ops[i]);
            if (!first_at.count(u)) first_at[u] = i;
            last_at[u] = i;
        }
        for (size_t i = 0; i < ops.size(); ++i) {
            const int u = unit_of(*ops[i]);
            const bool first = first_at[u] == i;
            if (first) {
                host(HostKind::PreBackward, *ops[i]);
                unshard(u, *ops[i]);   // a no-op when prefetched or kept from forward
                // BACKWARD_PRE: the unit before this one in the forward's pre-forward order
                // (_exec_order_utils get_handle_to_backward_prefetch: index - 1), before this
                // unit's gradient computation.
                auto at = std::find(forward_order.begin(), forward_order.end(), u);
                if (at != forward_order.end() && at != forward_order.begin()) unshard(*(at - 1), *ops[i]);
            }
            compute(*ops[i], u, first);
            if (last_at[u] == i) {
                host(HostKind::PostBackward, *ops[i]);
                free_unit(u);   // _should_free_in_backward: every sharded strategy when syncing gradients
                reduce(u, *ops[i]);
            }
        }
    }

    void step(const std::vector<const Op*>& ops) {
        for (size_t i = 0; i < ops.size(); ++i) {
            Op op = *ops[i];
            op.deps.clear();
            // The post-backward final callback makes the default stream wait for the reductions.
            if (i == 0 && last_reduce >= 0) op.deps.push_back(last_reduce);
            if (strategy == FsdpStrategy::HybridShard) {   // the shard is world / shard_ranks times stage 3's
                const double f = static_cast<double>(in.meta.world) / static_cast<double>(shard_ranks);
                op.elements = static_cast<int64_t>(static_cast<double>(op.elements) * f);
                op.flops *= f;
                op.mem_bytes = static_cast<int64_t>(static_cast<double>(op.mem_bytes) * f);
            }
            last_compute = out.add(std::move(op)).id;
        }
    }

    void run() {
        std::vector<int> forward_order;   // units by their first pre-forward (the root's comes first)
        std::vector<const Op*> phase_ops;
        auto flush = [&] {
            if (phase_ops.empty()) return;
            const Phase p = phase_ops.front()->phase;
            if (p == Phase::Forward) {
                if (forward_order.empty()) {
                    forward_order.push_back(0);
                    for (const Op* op : phase_ops)
                        if (std::find(forward_order.begin(), forward_order.end(), unit_of(*op)) == forward_order.end())
                            forward_order.push_back(unit_of(*op));
                }
                forward(phase_ops);
            } else if (p == Phase::Backward) {
                backward(phase_ops, forward_order);
            } else {
                step(phase_ops);
            }
            phase_ops.clear();
        };
        for (const Op& op : in.ops) {
            if (op.step < 0 || op.kind != OpKind::Compute) continue;
            if (!phase_ops.empty()) {
                const Op& f = *phase_ops.front();
                if (f.step != op.step || f.micro != op.micro || f.phase != op.phase) flush();
            }
            phase_ops.push_back(&op);
        }
        flush();
    }
};

}  // namespace

std::optional<FsdpStrategy> fsdp_strategy(const std::string& what_if) {
    if (what_if == "fsdp-full-shard") return FsdpStrategy::FullShard;
    if (what_if == "fsdp-shard-grad-op") return FsdpStrategy::ShardGradOp;
    if (what_if == "hybrid-shard") return FsdpStrategy::HybridShard;
    return std::nullopt;
}

std::vector<FsdpUnit> fsdp_units(const Schedule& s) {
    std::vector<FsdpUnit> units(1);
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < s.params.size(); ++i) {
        const std::string b = transformer_block_of(s.params[i].name);
        size_t k = 0;
        if (!b.empty()) {
            auto it = index.find(b);
            if (it == index.end()) {
                k = units.size();
                index[b] = k;
                units.push_back({b, {}, 0});
            } else {
                k = it->second;
            }
        }
        units[k].params.push_back(static_cast<int>(i));
        units[k].numel += s.params[i].numel;
    }
    return units;
}

bool is_fsdp_schedule(const Schedule& s) {
    return std::any_of(s.ops.begin(), s.ops.end(), [](const Op& op) { return op.rule == kUnshard; });
}

Result<int> apply_fsdp_what_if(FsdpStrategy strategy, Schedule& s) {
    if (s.meta.stage != 3)
        return Error{"", "--what-if", "the FSDP what-ifs replace stage 3's schedule (FSDP shards parameters as ZeRO-3 does); "
                                      "this schedule is stage " + std::to_string(s.meta.stage)};
    if (s.meta.variants.any())
        return Error{"", "--what-if", "the FSDP what-ifs compare with plain stage 3; this config turns on ZeRO++ or MiCS"};
    Generator g(strategy, s);
    g.units = fsdp_units(s);
    g.unit_of_param.assign(s.params.size(), 0);
    for (size_t u = 0; u < g.units.size(); ++u)
        for (int p : g.units[u].params) g.unit_of_param[static_cast<size_t>(p)] = static_cast<int>(u);
    const int64_t world = s.meta.world;
    g.shard_ranks = world;
    g.out.meta = s.meta;
    g.out.params = s.params;
    g.out.meta.groups.clear();
    if (strategy == FsdpStrategy::HybridShard) {
        const int64_t n = s.meta.variants.gpus_per_node;
        if (n <= 0)
            return Error{"", "--what-if", "hybrid-shard shards inside a node: give the ranks per node (--gpus-per-node, or a topology)"};
        if (world % n != 0 && world > n)
            return Error{"", "--what-if", "hybrid-shard needs whole nodes: the world (" + std::to_string(world) +
                                              ") is not a multiple of the ranks per node (" + std::to_string(n) + ")"};
        g.shard_ranks = std::min(n, world);
        g.replicas = world / g.shard_ranks;
        g.shard_group = GroupKind::FsdpShard;
        // The node-shaped groups from the mesh (schedule/mesh.hpp): one node's ranks, and the same
        // local rank on every node (torch.distributed.fsdp _init_intra_and_inter_node_groups).
        ParallelLayout layout;
        layout.world = world;
        layout.fsdp_shard = n;
        auto mesh = Mesh::build(layout);
        if (!mesh.ok()) return mesh.error();
        g.out.meta.groups.push_back(mesh_process_group(mesh.value(), MeshGroup::FsdpShard));
        g.out.meta.groups.push_back(mesh_process_group(mesh.value(), MeshGroup::FsdpReplica));
    }
    for (const auto& u : g.units) g.padded.push_back((u.numel + g.shard_ranks - 1) / g.shard_ranks * g.shard_ranks);
    g.unsharded.assign(g.units.size(), false);
    g.gather_of.assign(g.units.size(), -1);
    g.run();
    g.out.meta.stage3_peak_gathered_elements = g.peak;
    g.out.meta.stage3_persistent_elements = 0;
    // No deepspeed.zero.Init construction to time: FSDP shards each unit locally at wrapping
    // (sync_module_states' broadcasts are left out, docs/what-if.md).
    g.out.meta.zero_init = false;
    const int n_units = static_cast<int>(g.units.size());
    s = std::move(g.out);
    return n_units;
}

int64_t fsdp_model_state_bytes(const Schedule& s) {
    const auto units = fsdp_units(s);
    const int64_t k = s.meta.groups.empty() ? s.meta.world : s.meta.group_size(GroupKind::FsdpShard);
    const int64_t b = dtype_size(s.meta.model_dtype);
    const bool mixed = s.meta.model_dtype != DType::FP32;
    int64_t shard = 0, largest = 0;
    for (const auto& u : units) {
        const int64_t padded = (u.numel + k - 1) / k * k;
        shard += padded / k;
        largest = std::max(largest, padded);
    }
    return shard * (4 + (mixed ? b : 0) + 4 + 8) + s.meta.stage3_peak_gathered_elements * b + largest * b;
}

}  // namespace zerosim
