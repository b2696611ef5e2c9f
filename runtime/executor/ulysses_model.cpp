// A rank of the real Ulysses model (executor/ulysses_mlp.hpp; docs/runtime.md "3D layouts"): its
// modules at their compute ops, the attention beside the output's and the first gradient's
// all_to_alls, real q, k, v, output and their gradients through the IR's eight sequence-group
// all_to_alls of a micro batch (DeepSpeed v0.14.2 sequence/layer.py single_all_to_all ~32,
// DistributedAttention.forward ~99-106), each checked against UlyssesMlpReference.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

void Executor::set_ulysses_mlp() {
    if (!a_.ulysses_mlp) return;
    uly_ = a_.ulysses_mlp;
    if (mdt() != DType::FP32) throw std::runtime_error("the Ulysses model runs in fp32 only");
    if (world_ != be_.world()) throw std::runtime_error("the Ulysses model needs ZeRO's group to be the world (sequence x data)");
    if (verify_) uly_shadow_ = std::make_unique<UlyssesMlpReference>(*uly_, be_.world(), a_.seed, s_.meta.grad_accum, a_.lr);
}

UlyssesMlpReference& Executor::uly_reference(int step) const {
    UlyssesMlpReference& r = *uly_shadow_;
    if (r.updates() != step) throw std::runtime_error("the Ulysses reference holds " + std::to_string(r.updates()) + " updates at step " + std::to_string(step));
    if (r.computed() != step) r.compute(step);
    return r;
}

Executor::UlyssesState& Executor::uly_micro(const Op& op) {
    std::lock_guard<std::mutex> lock(micro_mu_);
    return uly_micro_[{op.step, op.micro}];
}

void Executor::uly_compute(const Op& op, bool forward) {
    UlyssesMicro& s = uly_micro(op).data;
    UlyssesParams w(s_.params.size()), g(s_.params.size());
    for (size_t p = 0; p < s_.params.size(); ++p) w[p] = work_[p].as<float>();
    // This micro batch's gradients of the op's own parameters, added to the accumulators after.
    std::map<int, std::vector<float>> grads;
    if (!forward)
        for (int p : op.params) g[static_cast<size_t>(p)] = (grads[p] = std::vector<float>(static_cast<size_t>(numel(p)), 0.0f)).data();
    uly_module(op, forward, w, g, s);
    for (const auto& [p, v] : grads) add_gradient(p, v, op.micro);
}

void Executor::uly_module(const Op& op, bool forward, const std::vector<float*>& w, const std::vector<float*>& g, UlyssesMicro& s) {
    const UlyssesMlp& m = *uly_;
    const int p0 = op.params.empty() ? -1 : op.params[0];
    const int module = p0 == m.ln_w ? 0 : p0 == m.qkv_w ? 1 : p0 == m.o_w ? 2 : p0 == m.head_w ? 3 : -1;
    if (module < 0) broken(op, "a compute op of no module of the Ulysses model");
    if (forward && module == 0) s.x = ulysses_input(m, a_.seed, grank_, op.step, op.micro);
    if (forward) return module < 2 ? ulysses_pre_forward(m, w, module, s) : ulysses_post_forward(m, w, module, s);
    if (module >= 2) return ulysses_post_backward(m, w, g, module, ulysses_target(m, a_.seed, grank_, op.step, op.micro), s);
    ulysses_pre_backward(m, w, g, module, s);
}

// The n-th sequence-group all_to_all of a micro batch (q, k, v, output; the output's gradient, q's,
// k's, v's): the attention runs first where its results are what goes out.
const std::vector<float>& Executor::uly_outgoing(const Op& op) {
    UlyssesState& st = uly_micro(op);
    if (st.exchanges > 7) broken(op, "a ninth sequence-group all_to_all in micro batch " + std::to_string(op.micro));
    if (st.exchanges == 3) ulysses_attention_forward(*uly_, st.data);
    if (st.exchanges == 5) ulysses_attention_backward(*uly_, st.data);
    const std::vector<float>& v = st.data.send[st.exchanges];
    if (static_cast<int64_t>(v.size()) != op.elements) broken(op, std::to_string(op.elements) + " elements; the tensor to exchange has " + std::to_string(v.size()));
    return v;
}

void Executor::uly_received(const Op& op, const void* got, Check& c) {
    UlyssesState& st = uly_micro(op);
    std::vector<float>& v = st.data.recv[st.exchanges];
    v.resize(static_cast<size_t>(op.elements));
    unpack_floats(got, v.data(), op.dtype, op.elements);
    if (verify_) {
        const std::vector<float>& want = uly_reference(op.step).micro(grank_, op.micro).recv[st.exchanges];
        if (want.size() != v.size()) broken(op, "the reference's tensor has " + std::to_string(want.size()) + " elements");
        float scale = 0.0f;
        for (float e : want) scale = std::max(scale, std::fabs(e));
        static const char* const kWhat[] = {"q", "k", "v", "attention output", "output gradient", "q gradient", "k gradient", "v gradient"};
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
