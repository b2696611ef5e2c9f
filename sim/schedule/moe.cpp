// DeepSpeed MoE layers under expert parallelism, as v0.14.2 runs them (deepspeed/moe/layer.py,
// sharded_moe.py, utils.py; docs/zero-comm.md "MoE"): each layer's all_to_all (and, without token
// dropping, its capacity all_reduce) at its modules, the optimizer parameter groups DeepSpeed splits the
// experts into, the group ZeRO runs each over, and DeepSpeed's own refusals. stage012.cpp reduces,
// norms and gathers the groups; engine_start_broadcasts broadcasts each parameter over its group.
#include <algorithm>
#include <cmath>
#include <memory>

#include "build.hpp"

namespace zerosim::detail {

namespace {

// `name` lies under module path `prefix` ("a.b" under "a", not "ab").
bool moe_under(const std::string& name, const std::string& prefix) {
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}

// moe/utils.py is_moe_param (27-30): experts.py (22-25) sets allreduce=False on every parameter of
// every local expert; the gate's wg stays a dense parameter.
bool is_expert_param(const Model& m, const Parameter& p) {
    for (const auto& l : m.parallel.moe)
        if (moe_under(p.name, l.experts)) return true;
    return false;
}

// Where one MoE layer issues its collectives, as Model::modules indices of the rank's model.
struct MoeSite {
    const MoeLayer* layer = nullptr;
    int dispatch_after = -1;   // the gate (TopKGate's wg, the last module of the layer before its experts)
    int first_expert = -1;     // the first local expert's first module in forward order
    int last_expert = -1;      // the last local expert's last module
};

std::vector<MoeSite> moe_sites(const Model& m) {
    std::vector<MoeSite> sites;
    for (const auto& l : m.parallel.moe) {
        MoeSite s;
        s.layer = &l;
        for (int mod : m.forward_order) {
            const std::string& name = m.modules[static_cast<size_t>(mod)].name;
            if (moe_under(name, l.experts)) {
                if (s.first_expert < 0) s.first_expert = mod;
                s.last_expert = mod;
            } else if (s.first_expert < 0 && moe_under(name, l.module)) {
                s.dispatch_after = mod;
            }
        }
        // Without a gate module in the list the dispatch all_to_all goes just before the combine one:
        // the same logged order (stages 0-2 issue nothing else in forward).
        if (s.dispatch_after < 0) s.dispatch_after = s.last_expert;
        if (s.first_expert >= 0) sites.push_back(s);
    }
    return sites;
}

// Tokens one MoE layer routes per micro batch: MOELayer.forward (sharded_moe.py 519) flattens the
// input to [micro_batch x seq_len, hidden].
int64_t moe_tokens(const Build& b) { return b.batch.micro_batch * b.seq_len; }

// Capacity C, the slots per expert of the dispatched tensor [experts, C, hidden].
// With token dropping: _capacity (sharded_moe.py 159-168), ceil(tokens / experts x factor) raised
// to min_capacity; the factor is torch.tensor(capacity_factor), a float32, so the product is
// float32 (tokens / experts = 12.5, factor 1.2: 15.000001 and C = 16, where double arithmetic gives
// 15.0 and 15). top2gating doubles the factor (328). Without it the capacity is the largest expert load of the step, all_reduced
// over the expert group (216, 336): data the config does not hold; its bound, every token on one
// expert (top-1 clamps to the tokens, 224; top-2's load cannot pass them either), is what is modelled.
int64_t moe_capacity(const MoeLayer& l, int64_t tokens) {
    if (!l.drop_tokens) return tokens;
    const double factor = l.top_k == 2 ? l.capacity_factor * 2 : l.capacity_factor;
    const float per_expert = static_cast<float>(static_cast<double>(tokens) / static_cast<double>(l.num_experts));
    const float slots = per_expert * static_cast<float>(factor);
    return std::max(static_cast<int64_t>(std::ceil(slots)), l.min_capacity);
}

// _AllToAll (sharded_moe.py 96-108) from MOELayer.forward (545, 559); its backward applies _AllToAll
// again, so all four log caller "forward". The tensor is [num_experts (the whole layer's), C, hidden]
// in the activations' dtype (531: dispatch_mask.type_as(input)); the expert output has the same shape.
void moe_all_to_all(Build& b, const MoeLayer& l) {
    const int64_t elements = l.num_experts * moe_capacity(l, moe_tokens(b)) * l.hidden;
    b.group_op(OpKind::AllToAll, elements, b.cfg.model_dtype, "forward", RuleId::MoeAllToAll, GroupKind::Expert);
}

void moe_forward_dispatch(Build& b, const MoeLayer& l) {
    // top1gating 213-216 / top2gating 333-336: without token dropping the int64 max expert load
    // (exp_counts is a sum of int64 one_hots) is all_reduced (MAX) over the gate's ep_group, the expert
    // group (layer.py 103 -> sharded_moe.py 503-505).
    if (!l.drop_tokens)
        b.group_op(OpKind::AllReduce, 1, DType::INT64, l.top_k == 1 ? "top1gating" : "top2gating",
                   RuleId::MoeCapacityAllreduce, GroupKind::Expert)
            .redop = ReduceOp::Max;
    moe_all_to_all(b, l);
}

// Forward: gate (+ capacity all_reduce), dispatch all_to_all, experts, combine all_to_all. Backward,
// in autograd's order: the combine's all_to_all before any expert's backward; the dispatch's after the
// first local expert's backward and its gradients' hooks, before the gate's (it was created earlier).
void moe_hook(Build& b, const std::vector<MoeSite>& sites, HookPoint at, int module) {
    for (const auto& s : sites) {
        const bool forward = at == HookPoint::AfterForward;
        if (forward && module == s.dispatch_after) moe_forward_dispatch(b, *s.layer);
        if ((forward || at == HookPoint::BeforeBackward) && module == s.last_expert) moe_all_to_all(b, *s.layer);
        if (at == HookPoint::AfterBackward && module == s.first_expert) moe_all_to_all(b, *s.layer);
    }
}

Status moe_layout_refusal(const Build& b) {
    const auto& L = b.mesh->layout();
    // mappings.py drop_tokens / gather_tokens cut the capacity over a tensor-parallel mpu and all_gather
    // it back: not modelled.
    if (L.tensor > 1)
        return Error{"", "--tp", "MoE layers with tensor parallelism (DeepSpeed's token drop and gather over the tensor group) "
                                 "are not modelled; use --tp 1"};
    if (L.pipelined())
        return Error{"", "--pp", "MoE layers inside DeepSpeed's pipeline engine are not modelled; use --pp 1"};
    // engine.py _configure_zero_optimizer 1548: assert not self.has_moe_layers, "MoE not supported with Stage 3".
    if (b.cfg.zero.stage == 3)
        return Error{b.cfg.source, "zero_optimization.stage",
                     "DeepSpeed v0.14.2 does not run MoE layers under ZeRO stage 3 (engine.py asserts \"MoE not supported with "
                     "Stage 3\"); use stage 0, 1 or 2"};
    return std::nullopt;
}

// TopKGate in training mode: top1gating asserts the tokens reach min_capacity (242-243) and picks
// the capacity's tokens per expert with torch.topk (245), which fails when it exceeds the tokens.
Status moe_capacity_refusal(const Build& b, const MoeLayer& l) {
    const int64_t tokens = moe_tokens(b);
    if (l.top_k != 1) return std::nullopt;
    const std::string field = "moe." + l.module + ".";
    if (tokens < l.min_capacity)
        return Error{b.model.source, field + "min_capacity",
                     "top-1 gating needs at least min_capacity (" + std::to_string(l.min_capacity) + ") tokens per micro batch, found " +
                         std::to_string(tokens) + " (micro batch x sequence length; sharded_moe.py top1gating asserts it)"};
    if (l.drop_tokens && moe_capacity(l, tokens) > tokens)
        return Error{b.model.source, field + "capacity_factor",
                     "the capacity (" + std::to_string(moe_capacity(l, tokens)) + " tokens per expert) exceeds the " +
                         std::to_string(tokens) + " tokens of a micro batch: top-1 gating's torch.topk fails"};
    return std::nullopt;
}

}  // namespace

GroupKind param_group_over(const Build& b, int group) {
    if (!b.mesh || b.model.parallel.moe.empty()) return GroupKind::Dp;
    for (const auto& p : b.model.params)
        if (p.group == group) return is_expert_param(b.model, p) ? GroupKind::ExpertData : GroupKind::Dp;
    return GroupKind::Dp;
}

int64_t param_group_world(const Build& b, int group) {
    return param_group_over(b, group) == GroupKind::ExpertData ? b.group_size(MeshGroup::ExpertData) : b.opt.world;
}

void split_moe_param_groups(Model& m) {
    // moe/utils.py split_params_into_different_moe_groups_for_optimizer (72-148) on the engine's
    // groups (engine.py 1230-1231; configure_moe_param_groups 155-182): every group keeps its dense
    // parameters (111-119); then, per original group in order, a 'moe' group of its experts (one
    // expert-data group name: every layer has ep_size --ep), cut where the running element count
    // would pass max_group_size (74, 122-142). The engine drops empty groups (engine.py 1247).
    constexpr int64_t kMaxMoeGroupElements = 178956971;
    std::vector<int> dense(static_cast<size_t>(m.num_groups), -1);
    int next = 0;
    for (auto& p : m.params)
        if (!is_expert_param(m, p) && dense[static_cast<size_t>(p.group)] < 0) dense[static_cast<size_t>(p.group)] = next++;
    std::vector<int> group(m.params.size());
    for (size_t i = 0; i < m.params.size(); ++i)
        if (!is_expert_param(m, m.params[i])) group[i] = dense[static_cast<size_t>(m.params[i].group)];
    for (int g = 0; g < m.num_groups; ++g) {
        int chunk = -1;
        int64_t elements = 0;
        for (size_t i = 0; i < m.params.size(); ++i) {
            if (m.params[i].group != g || !is_expert_param(m, m.params[i])) continue;
            if (chunk < 0 || (elements > 0 && elements + m.params[i].numel > kMaxMoeGroupElements)) {
                chunk = next++;
                elements = 0;
            }
            elements += m.params[i].numel;
            group[i] = chunk;
        }
    }
    for (size_t i = 0; i < m.params.size(); ++i) m.params[i].group = group[i];
    m.num_groups = next;
}

void install_moe_hooks(Build& b) {
    if (b.model.parallel.moe.empty()) return;
    Status refused = moe_layout_refusal(b);
    for (const auto& l : b.model.parallel.moe)
        if (!refused) refused = moe_capacity_refusal(b, l);
    if (refused) {
        if (!b.failure) b.failure = *refused;
        return;
    }
    auto sites = std::make_shared<const std::vector<MoeSite>>(moe_sites(b.model));
    auto inner = b.layer_hook;
    b.layer_hook = [inner, sites](Build& bb, HookPoint at, int module, int node) {
        if (inner) inner(bb, at, module, node);
        if (module >= 0) moe_hook(bb, *sites, at, module);
    };
}

}  // namespace zerosim::detail
