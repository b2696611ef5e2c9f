// A rank of the real expert-parallel model (executor/moe_mlp.hpp; docs/runtime.md "3D layouts"):
// its modules at their compute ops, real tokens through the IR's four expert-group all_to_alls of a
// micro batch (DeepSpeed v0.14.2 moe/sharded_moe.py MOELayer.forward ~545-559: dispatch and combine
// in forward, their two gradients in backward), each checked against MoeMlpReference.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::ComputeKind;
using zerosim::OpKind;

void Executor::set_moe_mlp() {
    if (!a_.moe_mlp) return;
    moe_ = a_.moe_mlp;
    if (mdt() != DType::FP32) throw std::runtime_error("the MoE model runs in fp32 only");
    auto it = groups_.find(zerosim::GroupKind::Expert);
    if (it == groups_.end() || it->second.size() != moe_->ep) throw std::runtime_error("the MoE model needs the expert group of meta.groups");
    ep_rank_ = it->second.index;
    if (verify_) {
        // Every rank's model: the same but its experts, which are the ones at its place in its expert group.
        std::vector<MoeMlp> all(static_cast<size_t>(be_.world()), *moe_);
        moe_shadow_ = std::make_unique<MoeMlpReference>(all, a_.seed, s_.meta.grad_accum, a_.lr);
    }
}

MoeMlpReference& Executor::moe_reference(int step) const {
    MoeMlpReference& r = *moe_shadow_;
    if (r.updates() != step) throw std::runtime_error("the MoE reference holds " + std::to_string(r.updates()) + " updates at step " + std::to_string(step));
    if (r.computed() != step) r.compute(step);
    return r;
}

Executor::MoeState& Executor::moe_micro(const Op& op) {
    std::lock_guard<std::mutex> lock(micro_mu_);
    return moe_micro_[{op.step, op.micro}];
}

// The module an op computes: pre Linear k, the gate, expert l's layer, post Linear k.
void Executor::moe_compute(const Op& op, bool forward) {
    MoeState& st = moe_micro(op);
    MoeMicro& s = st.data;
    MoeParams w(s_.params.size()), g(s_.params.size());
    for (size_t p = 0; p < s_.params.size(); ++p) w[p] = work_[p].as<float>();
    // This micro batch's gradients of the op's own parameters, added to the accumulators after.
    std::map<int, std::vector<float>> grads;
    if (!forward)
        for (int p : op.params) g[static_cast<size_t>(p)] = (grads[p] = std::vector<float>(static_cast<size_t>(numel(p)), 0.0f)).data();
    moe_module(op, forward, w, g, s);
    for (const auto& [p, v] : grads) add_gradient(p, v, op.micro);
}

void Executor::moe_module(const Op& op, bool forward, const std::vector<float*>& w, const std::vector<float*>& g, MoeMicro& s) {
    const MoeMlp& m = *moe_;
    const int p0 = op.params.empty() ? -1 : op.params[0];
    if (p0 == m.gate) return forward ? moe_gate_forward(m, w, s) : moe_gate_backward(m, w, g, s);
    for (size_t k = 0; k < m.pre.size(); ++k)
        if (m.pre[k].weight == p0) {
            if (forward && k == 0) {
                s.pre_x.assign(1, std::vector<float>(static_cast<size_t>(m.tokens * m.pre[0].in)));
                for (size_t i = 0; i < s.pre_x[0].size(); ++i) s.pre_x[0][i] = mlp_input(a_.seed, grank_, op.step, op.micro, static_cast<int64_t>(i));
            }
            return forward ? moe_pre_forward(m, w, k, s) : moe_pre_backward(m, w, g, k, s);
        }
    for (size_t k = 0; k < m.post.size(); ++k)
        if (m.post[k].weight == p0) {
            if (forward) return moe_post_forward(m, w, k, s);
            std::vector<float> target(static_cast<size_t>(m.tokens * m.post.back().out));
            for (size_t i = 0; i < target.size(); ++i) target[i] = mlp_target(a_.seed, grank_, op.step, op.micro, static_cast<int64_t>(i));
            return moe_post_backward(m, w, g, k, target, s);
        }
    for (size_t l = 0; l < m.experts.size(); ++l)
        for (int layer = 0; layer < 2; ++layer)
            if ((layer == 0 ? m.experts[l].first : m.experts[l].second).weight == p0)
                return forward ? moe_expert_forward(m, w, l, layer, s) : moe_expert_backward(m, w, g, l, layer, s);
    broken(op, "a compute op of no module of the MoE model");
}

// The n-th expert-group all_to_all of a micro batch: dispatch, combine, the combine's gradient, the
// dispatch's gradient.
std::vector<float>& Executor::moe_buffer(MoeMicro& s, int n, bool send) {
    switch (n) {
        case 0: return send ? s.dispatch : s.expert_in;
        case 1: return send ? s.expert_out : s.combined;
        case 2: return send ? s.g_combined : s.g_expert_out;
        default: return send ? s.g_expert_in : s.g_dispatch;
    }
}

const std::vector<float>& Executor::moe_outgoing(const Op& op) {
    MoeState& st = moe_micro(op);
    if (st.exchanges > 3) broken(op, "a fifth expert-group all_to_all in micro batch " + std::to_string(op.micro));
    const std::vector<float>& v = moe_buffer(st.data, st.exchanges, true);
    if (static_cast<int64_t>(v.size()) != op.elements) broken(op, std::to_string(op.elements) + " elements; the tensor to exchange has " + std::to_string(v.size()));
    return v;
}

// What arrived, against what the reference says this rank receives (its members' blocks for it),
// within 1e-5 of its largest magnitude; then taken.
void Executor::moe_received(const Op& op, const void* got, Check& c) {
    MoeState& st = moe_micro(op);
    std::vector<float>& v = moe_buffer(st.data, st.exchanges, false);
    v.resize(static_cast<size_t>(op.elements));
    unpack_floats(got, v.data(), op.dtype, op.elements);
    if (verify_) {
        MoeMicro ref = moe_reference(op.step).micro(grank_, op.micro);
        const std::vector<float>& want = moe_buffer(ref, st.exchanges, false);
        if (want.size() != v.size()) broken(op, "the reference's tensor has " + std::to_string(want.size()) + " elements");
        float scale = 0.0f;
        for (float e : want) scale = std::max(scale, std::fabs(e));
        static const char* const kWhat[] = {"dispatched tokens", "expert outputs", "expert output gradients", "dispatched token gradients"};
        for (size_t i = 0; i < v.size(); ++i)
            c.see(std::fabs(static_cast<double>(v[i]) - want[i]) <= 1e-5 * static_cast<double>(scale) + 1e-30, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "%s of micro batch %d, element %zu = %.9g, the reference model's %.9g", kWhat[st.exchanges], op.micro, i,
                              static_cast<double>(v[i]), static_cast<double>(want[i]));
                return std::string(b);
            });
    }
    ++st.exchanges;
}

}  // namespace detail
}  // namespace zerorun
