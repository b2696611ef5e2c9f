// The expert-parallel run's real model (executor/moe_mlp.hpp): read from a rank's program, its
// modules one by one, and the single-process reference of every rank.
#include "executor/moe_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "executor/mlp.hpp"

namespace zerorun {

using zerosim::ComputeKind;
using zerosim::Error;
using zerosim::GroupKind;
using zerosim::OpKind;
using zerosim::Payload;

namespace {

zerosim::Error moe_error(const zerosim::Schedule& s, const std::string& what) { return Error{s.meta.model_file, "moe", what}; }

zerosim::Result<MoeLinear> moe_linear(const zerosim::Schedule& s, const zerosim::Op& op) {
    if (op.params.size() != 2) return moe_error(s, "module " + op.module_name + " is not a Linear (weight and bias)");
    const auto& w = s.params.at(static_cast<size_t>(op.params[0]));
    const auto& b = s.params.at(static_cast<size_t>(op.params[1]));
    if (w.shape.size() != 2 || b.shape.size() != 1 || b.shape[0] != w.shape[0]) return moe_error(s, "module " + op.module_name + " is not a Linear");
    return MoeLinear{op.params[0], op.params[1], w.shape[1], w.shape[0], w.name, b.name};
}

// Row r of a [ep, L, C, H] buffer for local expert l: member j = r / C, slot c = r % C.
int64_t expert_row(const MoeMlp& m, size_t l, int64_t r) {
    const int64_t j = r / m.capacity, c = r % m.capacity;
    return ((j * m.local() + static_cast<int64_t>(l)) * m.capacity + c) * m.hidden;
}

}  // namespace

zerosim::Result<MoeMlp> moe_mlp(const zerosim::Schedule& s) {
    MoeMlp m;
    m.ep = static_cast<int>(s.meta.group_size(GroupKind::Expert));
    m.tokens = s.meta.micro_batch * std::max<int64_t>(1, s.meta.seq_len);
    int step = -1, micro = -1, a2a = 0;
    std::vector<MoeLinear> inside;
    for (const auto& op : s.ops) {
        if (op.kind == OpKind::Compute && op.compute == ComputeKind::Backward) break;
        if (op.kind == OpKind::Compute && op.compute == ComputeKind::Forward) {
            if (step < 0) step = op.step, micro = op.micro;
            if (op.step != step || op.micro != micro) break;
            if (a2a == 0 && op.params.size() == 1) {
                const auto& g = s.params.at(static_cast<size_t>(op.params[0]));
                if (g.shape.size() != 2 || m.gate >= 0) return moe_error(s, "module " + op.module_name + " is not a gate [experts, hidden]");
                m.gate = op.params[0], m.gate_name = g.name, m.num_experts = g.shape[0], m.hidden = g.shape[1];
                continue;
            }
            auto l = moe_linear(s, op);
            if (!l) return l.error();
            (a2a == 0 ? m.pre : a2a == 1 ? inside : m.post).push_back(l.value());
        } else if (step >= 0 && op.group == GroupKind::Expert && op.payload == Payload::Activations) {
            if (op.kind != OpKind::AllToAll || m.gate < 0) return moe_error(s, "op " + std::to_string(op.id) + " is not an all_to_all after the gate");
            if (++a2a > 2) return moe_error(s, "more than two all_to_alls in a micro batch's forward");
            if (m.num_experts % m.ep || op.elements % (m.num_experts * m.hidden))
                return moe_error(s, "op " + std::to_string(op.id) + ": " + std::to_string(op.elements) + " elements are not experts (" +
                                        std::to_string(m.num_experts) + ") x capacity x hidden (" + std::to_string(m.hidden) + ")");
            m.capacity = op.elements / (m.num_experts * m.hidden);
        }
    }
    if (a2a != 2 || m.pre.empty() || m.post.empty()) return moe_error(s, "not dense Linears, a gate, a dispatch, experts, a combine and dense Linears");
    if (inside.size() != 2 * static_cast<size_t>(m.local())) return moe_error(s, "holds " + std::to_string(inside.size()) + " expert Linears, not 2 for each of its " + std::to_string(m.local()) + " experts");
    for (size_t l = 0; l < inside.size(); l += 2) {
        if (inside[l].in != m.hidden || inside[l + 1].out != m.hidden || inside[l].out != inside[l + 1].in)
            return moe_error(s, "expert " + inside[l].weight_name + " is not hidden -> inner -> hidden");
        m.experts.emplace_back(inside[l], inside[l + 1]);
    }
    if (m.pre.back().out != m.hidden || m.post.front().in != m.hidden) return moe_error(s, "the dense Linears around the experts are not of the hidden width");
    return m;
}

float moe_initial_weight(const MoeMlp& m, uint64_t seed, int p, int64_t i, int ep_rank) {
    auto dense = [&](const std::vector<MoeLinear>& ls) -> const MoeLinear* {
        for (const auto& l : ls)
            if (l.weight == p || l.bias == p) return &l;
        return nullptr;
    };
    if (p == m.gate) return mlp_initial_weight(seed, m.gate_name, i, m.hidden);
    for (const auto* ls : {&m.pre, &m.post})
        if (const MoeLinear* l = dense(*ls)) return mlp_initial_weight(seed, p == l->weight ? l->weight_name : l->bias_name, i, l->in);
    for (size_t e = 0; e < m.experts.size(); ++e)
        for (int layer = 0; layer < 2; ++layer) {
            const MoeLinear& l = layer == 0 ? m.experts[e].first : m.experts[e].second;
            if (l.weight != p && l.bias != p) continue;
            const std::string key = "expert " + std::to_string(ep_rank * m.local() + static_cast<int64_t>(e)) + " layer " + std::to_string(layer) + (p == l.weight ? " weight" : " bias");
            return mlp_initial_weight(seed, key, i, l.in);
        }
    throw std::logic_error("parameter " + std::to_string(p) + " is in no module of the MoE model");
}

void moe_pre_forward(const MoeMlp& m, const MoeParams& w, size_t k, MoeMicro& s) {
    const MoeLinear& l = m.pre[k];
    std::vector<float> y(static_cast<size_t>(m.tokens * l.out));
    linear_forward(s.pre_x.back().data(), w[l.weight], w[l.bias], y.data(), m.tokens, l.in, l.out, false);
    s.pre_x.push_back(std::move(y));
}

void moe_gate_forward(const MoeMlp& m, const MoeParams& w, MoeMicro& s) {
    const int64_t T = m.tokens, E = m.num_experts, H = m.hidden, C = m.capacity;
    const std::vector<float>& h = s.pre_x.back();
    s.probs.assign(static_cast<size_t>(T * E), 0.0f);
    s.expert.assign(static_cast<size_t>(T), 0);
    s.slot.assign(static_cast<size_t>(T), -1);
    s.dispatch.assign(static_cast<size_t>(E * C * H), 0.0f);
    std::vector<int64_t> used(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t) {
        float* p = &s.probs[static_cast<size_t>(t * E)];
        for (int64_t e = 0; e < E; ++e) {
            float acc = 0.0f;
            for (int64_t j = 0; j < H; ++j) acc += h[t * H + j] * w[m.gate][e * H + j];
            p[e] = acc;
        }
        const float top = *std::max_element(p, p + E);
        float sum = 0.0f;
        for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - top));
        for (int64_t e = 0; e < E; ++e) p[e] /= sum;
        const int64_t e = std::max_element(p, p + E) - p;   // top-1: the first largest
        s.expert[t] = e;
        if (used[e] < C) {   // drop_tokens: an expert takes at most `capacity` tokens
            s.slot[t] = used[e]++;
            std::copy(h.begin() + t * H, h.begin() + (t + 1) * H, s.dispatch.begin() + (e * C + s.slot[t]) * H);
        }
    }
}

void moe_expert_forward(const MoeMlp& m, const MoeParams& w, size_t l, int layer, MoeMicro& s) {
    const int64_t rows = m.ep * m.capacity, H = m.hidden;
    const MoeLinear& a = m.experts[l].first;
    const MoeLinear& b = m.experts[l].second;
    s.hidden.resize(m.experts.size());
    if (layer == 0) {
        std::vector<float> x(static_cast<size_t>(rows * H));
        for (int64_t r = 0; r < rows; ++r) std::copy_n(s.expert_in.begin() + expert_row(m, l, r), H, x.begin() + r * H);
        s.hidden[l].assign(static_cast<size_t>(rows * a.out), 0.0f);
        linear_forward(x.data(), w[a.weight], w[a.bias], s.hidden[l].data(), rows, a.in, a.out, true);
        return;
    }
    std::vector<float> y(static_cast<size_t>(rows * H));
    linear_forward(s.hidden[l].data(), w[b.weight], w[b.bias], y.data(), rows, b.in, b.out, false);
    s.expert_out.resize(s.expert_in.size());
    for (int64_t r = 0; r < rows; ++r) std::copy_n(y.begin() + r * H, H, s.expert_out.begin() + expert_row(m, l, r));
}

void moe_post_forward(const MoeMlp& m, const MoeParams& w, size_t k, MoeMicro& s) {
    const int64_t T = m.tokens, H = m.hidden, C = m.capacity;
    if (k == 0) {   // the combine: each kept token's expert output times its gate probability
        std::vector<float> y(static_cast<size_t>(T * H), 0.0f);
        for (int64_t t = 0; t < T; ++t)
            if (s.slot[t] >= 0) {
                const float p = s.probs[t * m.num_experts + s.expert[t]];
                for (int64_t j = 0; j < H; ++j) y[t * H + j] = p * s.combined[(s.expert[t] * C + s.slot[t]) * H + j];
            }
        s.post_x = {std::move(y)};
    }
    const MoeLinear& l = m.post[k];
    std::vector<float> y(static_cast<size_t>(T * l.out));
    linear_forward(s.post_x.back().data(), w[l.weight], w[l.bias], y.data(), T, l.in, l.out, false);
    s.post_x.push_back(std::move(y));
}

void moe_post_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t k, const std::vector<float>& target, MoeMicro& s) {
    const int64_t T = m.tokens, H = m.hidden, C = m.capacity;
    if (k + 1 == m.post.size()) {
        const auto& y = s.post_x.back();
        s.grad.resize(y.size());
        s.loss = 0.0;
        for (size_t i = 0; i < y.size(); ++i) {
            const float d = y[i] - target[i];
            s.loss += 0.5 * d * d / static_cast<double>(T);
            s.grad[i] = d / static_cast<float>(T);
        }
    }
    const MoeLinear& l = m.post[k];
    std::vector<float> gx(static_cast<size_t>(T * l.in));
    linear_backward(s.post_x[k].data(), w[l.weight], s.post_x[k + 1].data(), s.grad.data(), g[l.weight], g[l.bias], gx.data(), T, l.in, l.out, false);
    s.grad = std::move(gx);
    if (k != 0) return;
    s.g_combined.assign(static_cast<size_t>(m.num_experts * C * H), 0.0f);
    s.g_prob.assign(static_cast<size_t>(T), 0.0f);
    for (int64_t t = 0; t < T; ++t)
        if (s.slot[t] >= 0) {
            const int64_t at = (s.expert[t] * C + s.slot[t]) * H;
            const float p = s.probs[t * m.num_experts + s.expert[t]];
            for (int64_t j = 0; j < H; ++j) {
                s.g_combined[at + j] = p * s.grad[t * H + j];
                s.g_prob[t] += s.grad[t * H + j] * s.combined[at + j];
            }
        }
}

void moe_expert_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t l, int layer, MoeMicro& s) {
    const int64_t rows = m.ep * m.capacity, H = m.hidden;
    const MoeLinear& a = m.experts[l].first;
    const MoeLinear& b = m.experts[l].second;
    s.g_hidden.resize(m.experts.size());
    if (layer == 1) {
        std::vector<float> gy(static_cast<size_t>(rows * H));
        for (int64_t r = 0; r < rows; ++r) std::copy_n(s.g_expert_out.begin() + expert_row(m, l, r), H, gy.begin() + r * H);
        s.g_hidden[l].assign(static_cast<size_t>(rows * b.in), 0.0f);
        linear_backward(s.hidden[l].data(), w[b.weight], gy.data(), gy.data(), g[b.weight], g[b.bias], s.g_hidden[l].data(), rows, b.in, b.out, false);
        return;
    }
    std::vector<float> x(static_cast<size_t>(rows * H)), gx(static_cast<size_t>(rows * H));
    for (int64_t r = 0; r < rows; ++r) std::copy_n(s.expert_in.begin() + expert_row(m, l, r), H, x.begin() + r * H);
    linear_backward(x.data(), w[a.weight], s.hidden[l].data(), s.g_hidden[l].data(), g[a.weight], g[a.bias], gx.data(), rows, a.in, a.out, true);
    s.g_expert_in.resize(s.expert_in.size());
    for (int64_t r = 0; r < rows; ++r) std::copy_n(gx.begin() + r * H, H, s.g_expert_in.begin() + expert_row(m, l, r));
}

void moe_gate_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, MoeMicro& s) {
    const int64_t T = m.tokens, E = m.num_experts, H = m.hidden, C = m.capacity;
    const std::vector<float>& h = s.pre_x.back();
    std::vector<float> gh(static_cast<size_t>(T * H), 0.0f);
    for (int64_t t = 0; t < T; ++t) {
        if (s.slot[t] < 0) continue;   // a dropped token's output is zero whatever the gate says
        const int64_t e = s.expert[t];
        for (int64_t j = 0; j < H; ++j) gh[t * H + j] = s.g_dispatch[(e * C + s.slot[t]) * H + j];
        const float* p = &s.probs[static_cast<size_t>(t * E)];
        for (int64_t k = 0; k < E; ++k) {   // d p_e / d logit_k = p_e (delta_ek - p_k)
            const float gl = s.g_prob[t] * p[e] * ((k == e ? 1.0f : 0.0f) - p[k]);
            for (int64_t j = 0; j < H; ++j) {
                g[m.gate][k * H + j] += gl * h[t * H + j];
                gh[t * H + j] += gl * w[m.gate][k * H + j];
            }
        }
    }
    s.grad = std::move(gh);
}

void moe_pre_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t k, MoeMicro& s) {
    const MoeLinear& l = m.pre[k];
    std::vector<float> gx(k > 0 ? static_cast<size_t>(m.tokens * l.in) : 0);
    linear_backward(s.pre_x[k].data(), w[l.weight], s.pre_x[k + 1].data(), s.grad.data(), g[l.weight], g[l.bias], k > 0 ? gx.data() : nullptr,
                    m.tokens, l.in, l.out, false);
    s.grad = std::move(gx);
}

MoeMlpReference::MoeMlpReference(const std::vector<MoeMlp>& models, uint64_t seed, int64_t grad_accum, float lr)
    : models_(models), seed_(seed), grad_accum_(grad_accum) {
    adam_.lr = lr;
    const size_t W = models.size();
    w_.resize(W), is_expert_.resize(W), micro_.assign(W, std::vector<MoeMicro>(static_cast<size_t>(grad_accum)));
    for (size_t g = 0; g < W; ++g) {
        const MoeMlp& m = models[g];
        std::vector<std::pair<int, int64_t>> sizes = {{m.gate, m.num_experts * m.hidden}};
        for (const auto* ls : {&m.pre, &m.post})
            for (const auto& l : *ls) sizes.push_back({l.weight, l.in * l.out}), sizes.push_back({l.bias, l.out});
        const size_t dense = sizes.size();
        for (const auto& [a, b] : m.experts)
            for (const MoeLinear* l : {&a, &b}) sizes.push_back({l->weight, l->in * l->out}), sizes.push_back({l->bias, l->out});
        int params = 0;
        for (const auto& [p, n] : sizes) params = std::max(params, p + 1);
        w_[g].resize(static_cast<size_t>(params));
        is_expert_[g].assign(static_cast<size_t>(params), false);
        for (size_t k = 0; k < sizes.size(); ++k) {
            const auto [p, n] = sizes[k];
            is_expert_[g][static_cast<size_t>(p)] = k >= dense;
            auto& v = w_[g][static_cast<size_t>(p)];
            v.resize(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = moe_initial_weight(m, seed, p, i, static_cast<int>(g) % m.ep);
        }
    }
    m_ = w_, v_ = w_, grad_ = w_;
    micro_grad_.assign(W, {});
    for (size_t g = 0; g < W; ++g) micro_grad_[g].assign(static_cast<size_t>(grad_accum), w_[g]);
    for (auto* s : {&m_, &v_})
        for (auto& per_g : *s)
            for (auto& p : per_g) std::fill(p.begin(), p.end(), 0.0f);
}

void MoeMlpReference::compute(int step) {
    if (step != t_) throw std::logic_error("MoeMlpReference: step " + std::to_string(step) + " computed after " + std::to_string(t_) + " updates");
    const size_t W = models_.size();
    const int ep = models_.front().ep;
    const int64_t block = models_.front().block();
    loss_ = 0.0;
    for (auto& per_g : micro_grad_)
        for (auto& per_m : per_g)
            for (auto& p : per_m) std::fill(p.begin(), p.end(), 0.0f);
    std::vector<MoeParams> w(W), g(W);
    for (size_t r = 0; r < W; ++r)
        for (size_t p = 0; p < w_[r].size(); ++p) w[r].push_back(w_[r][p].data());
    // The all_to_all of the expert group: member j's block for member i lands at i's block j.
    auto exchange = [&](auto send, auto recv) {
        for (size_t r = 0; r < W; ++r) {
            const size_t base = r / static_cast<size_t>(ep) * static_cast<size_t>(ep), me = r % static_cast<size_t>(ep);
            for (size_t j = 0; j < static_cast<size_t>(ep); ++j) {
                const std::vector<float>& from = send(base + j);
                std::vector<float>& to = recv(r);
                to.resize(from.size());
                std::copy_n(from.begin() + static_cast<int64_t>(me) * block, block, to.begin() + static_cast<int64_t>(j) * block);
            }
        }
    };
    for (int mi = 0; mi < grad_accum_; ++mi) {
        auto S = [&](size_t r) -> MoeMicro& { return micro_[r][static_cast<size_t>(mi)]; };
        for (size_t r = 0; r < W; ++r) {
            g[r].clear();
            for (auto& p : micro_grad_[r][static_cast<size_t>(mi)]) g[r].push_back(p.data());
        }
        for (size_t r = 0; r < W; ++r) {
            const MoeMlp& m = models_[r];
            S(r) = MoeMicro{};
            S(r).pre_x.emplace_back(static_cast<size_t>(m.tokens * m.pre.front().in));
            for (size_t i = 0; i < S(r).pre_x[0].size(); ++i) S(r).pre_x[0][i] = mlp_input(seed_, static_cast<int>(r), step, mi, static_cast<int64_t>(i));
            for (size_t k = 0; k < m.pre.size(); ++k) moe_pre_forward(m, w[r], k, S(r));
            moe_gate_forward(m, w[r], S(r));
        }
        exchange([&](size_t r) -> const std::vector<float>& { return S(r).dispatch; }, [&](size_t r) -> std::vector<float>& { return S(r).expert_in; });
        for (size_t r = 0; r < W; ++r)
            for (size_t l = 0; l < models_[r].experts.size(); ++l) moe_expert_forward(models_[r], w[r], l, 0, S(r)), moe_expert_forward(models_[r], w[r], l, 1, S(r));
        exchange([&](size_t r) -> const std::vector<float>& { return S(r).expert_out; }, [&](size_t r) -> std::vector<float>& { return S(r).combined; });
        for (size_t r = 0; r < W; ++r) {
            const MoeMlp& m = models_[r];
            for (size_t k = 0; k < m.post.size(); ++k) moe_post_forward(m, w[r], k, S(r));
            std::vector<float> target(S(r).post_x.back().size());
            for (size_t i = 0; i < target.size(); ++i) target[i] = mlp_target(seed_, static_cast<int>(r), step, mi, static_cast<int64_t>(i));
            for (size_t k = m.post.size(); k-- > 0;) moe_post_backward(m, w[r], g[r], k, target, S(r));
            loss_ += S(r).loss;
        }
        exchange([&](size_t r) -> const std::vector<float>& { return S(r).g_combined; }, [&](size_t r) -> std::vector<float>& { return S(r).g_expert_out; });
        for (size_t r = 0; r < W; ++r)
            for (size_t l = models_[r].experts.size(); l-- > 0;) moe_expert_backward(models_[r], w[r], g[r], l, 1, S(r)), moe_expert_backward(models_[r], w[r], g[r], l, 0, S(r));
        exchange([&](size_t r) -> const std::vector<float>& { return S(r).g_expert_in; }, [&](size_t r) -> std::vector<float>& { return S(r).g_dispatch; });
        for (size_t r = 0; r < W; ++r) {
            moe_gate_backward(models_[r], w[r], g[r], S(r));
            for (size_t k = models_[r].pre.size(); k-- > 0;) moe_pre_backward(models_[r], w[r], g[r], k, S(r));
        }
    }
    for (size_t r = 0; r < W; ++r)
        for (size_t p = 0; p < grad_[r].size(); ++p) {
            std::vector<std::vector<float>> per_m;
            for (const auto& gm : micro_grad_[r]) per_m.push_back(gm[p]);
            add_micro_gradients(per_m, grad_[r][p]);
        }
    computed_ = step;
}

const std::vector<float>& MoeMlpReference::local_gradient(int g, int p, const std::vector<int>& micros) const {
    if (micros.size() == 1) return micro_grad_.at(static_cast<size_t>(g)).at(static_cast<size_t>(micros[0])).at(static_cast<size_t>(p));
    if (static_cast<int64_t>(micros.size()) != grad_accum_) throw std::logic_error("a reduction of " + std::to_string(micros.size()) + " micro batches' gradients");
    return local_gradient(g, p);
}

void MoeMlpReference::update(int step) {
    if (computed_ != step) compute(step);
    ++t_;
    const size_t W = models_.size();
    const int ep = models_.front().ep;
    for (size_t r = 0; r < W; ++r)
        for (size_t p = 0; p < w_[r].size(); ++p) {
            // Dense parameters averaged over the world, experts over their expert-data group (the
            // ranks at the same place of every expert group), summed in rank order.
            const bool expert = is_expert_[r][p];
            const size_t n = w_[r][p].size();
            std::vector<float> sum(n, 0.0f);
            int count = 0;
            for (size_t q = 0; q < W; ++q) {
                if (expert && q % static_cast<size_t>(ep) != r % static_cast<size_t>(ep)) continue;
                for (size_t i = 0; i < n; ++i) sum[i] = count == 0 ? grad_[q][p][i] : sum[i] + grad_[q][p][i];
                ++count;
            }
            const float scale = 1.0f / static_cast<float>(count * grad_accum_);
            for (auto& e : sum) e *= scale;
            adam_update(w_[r][p].data(), m_[r][p].data(), v_[r][p].data(), sum.data(), static_cast<int64_t>(n), t_, adam_);
        }
}

}  // namespace zerorun
