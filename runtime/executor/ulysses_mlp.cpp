// The Ulysses run's real model (executor/ulysses_mlp.hpp): read from a rank's program, its pieces
// one by one, and the single-process reference of every rank.
#include "executor/ulysses_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "executor/mlp.hpp"
#include "executor/tensor_mlp.hpp"   // LayerNorm's kernels

namespace zerorun {

using zerosim::ComputeKind;
using zerosim::Error;
using zerosim::GroupKind;
using zerosim::OpKind;
using zerosim::Payload;

namespace {

zerosim::Error ulysses_error(const zerosim::Schedule& s, const std::string& what) { return Error{s.meta.model_file, "attention", what}; }

// Rank-local rows (b, t) x columns [col, col + H) of a [rows, width] matrix, into blocks by member
// heads: block j = [B, S/P, heads/P, d] of member j's heads.
void pack_by_heads(const UlyssesMlp& m, const float* src, int64_t width, int64_t col, std::vector<float>& out) {
    const int64_t T = m.seq / m.sp, hl = m.heads / m.sp, d = m.head_size;
    out.assign(static_cast<size_t>(m.block() * m.sp), 0.0f);
    for (int64_t j = 0; j < m.sp; ++j)
        for (int64_t r = 0; r < m.batch * T; ++r)
            for (int64_t h = 0; h < hl; ++h)
                for (int64_t e = 0; e < d; ++e) out[j * m.block() + (r * hl + h) * d + e] = src[r * width + col + (j * hl + h) * d + e];
}

// The inverse: block i holds member i's heads for this rank's rows.
void unpack_by_heads(const UlyssesMlp& m, const std::vector<float>& in, float* dst, int64_t width, int64_t col) {
    const int64_t T = m.seq / m.sp, hl = m.heads / m.sp, d = m.head_size;
    for (int64_t i = 0; i < m.sp; ++i)
        for (int64_t r = 0; r < m.batch * T; ++r)
            for (int64_t h = 0; h < hl; ++h)
                for (int64_t e = 0; e < d; ++e) dst[r * width + col + (i * hl + h) * d + e] = in[i * m.block() + (r * hl + h) * d + e];
}

// Blocks from members (block i: member i's positions, this rank's heads) into [B, S, heads/P, d].
void unpack_by_positions(const UlyssesMlp& m, const std::vector<float>& in, std::vector<float>& full) {
    const int64_t T = m.seq / m.sp, hl = m.heads / m.sp, d = m.head_size;
    full.assign(static_cast<size_t>(m.batch * m.seq * hl * d), 0.0f);
    for (int64_t i = 0; i < m.sp; ++i)
        for (int64_t b = 0; b < m.batch; ++b)
            for (int64_t t = 0; t < T; ++t)
                std::copy_n(in.begin() + i * m.block() + (b * T + t) * hl * d, hl * d, full.begin() + (b * m.seq + i * T + t) * hl * d);
}

// The inverse: block j = member j's positions of [B, S, heads/P, d].
void pack_by_positions(const UlyssesMlp& m, const std::vector<float>& full, std::vector<float>& out) {
    const int64_t T = m.seq / m.sp, hl = m.heads / m.sp, d = m.head_size;
    out.assign(static_cast<size_t>(m.block() * m.sp), 0.0f);
    for (int64_t j = 0; j < m.sp; ++j)
        for (int64_t b = 0; b < m.batch; ++b)
            for (int64_t t = 0; t < T; ++t)
                std::copy_n(full.begin() + (b * m.seq + j * T + t) * hl * d, hl * d, out.begin() + j * m.block() + (b * T + t) * hl * d);
}

std::vector<float> batch_of(const UlyssesMlp& m, uint64_t seed, int r, int step, int micro, int64_t width, bool target) {
    const int64_t T = m.seq / m.sp, chunk = r % m.sp, data = r / m.sp;
    std::vector<float> v(static_cast<size_t>(m.batch * T * width));
    for (int64_t b = 0; b < m.batch; ++b)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < width; ++c) {
                const int64_t i = ((b * m.seq + chunk * T + t) * width + c);   // the sample's element, whoever holds it
                v[static_cast<size_t>((b * T + t) * width + c)] =
                    target ? mlp_target(seed, static_cast<int>(data), step, micro, i) : mlp_input(seed, static_cast<int>(data), step, micro, i);
            }
    return v;
}

}  // namespace

std::vector<float> ulysses_input(const UlyssesMlp& m, uint64_t seed, int r, int step, int micro) { return batch_of(m, seed, r, step, micro, m.hidden, false); }
std::vector<float> ulysses_target(const UlyssesMlp& m, uint64_t seed, int r, int step, int micro) { return batch_of(m, seed, r, step, micro, m.out, true); }

zerosim::Result<UlyssesMlp> ulysses_mlp(const zerosim::Schedule& s, int64_t heads, int64_t head_size) {
    UlyssesMlp m;
    m.sp = static_cast<int>(s.meta.group_size(GroupKind::Sequence));
    m.batch = s.meta.micro_batch, m.seq = s.meta.seq_len, m.heads = heads, m.head_size = head_size;
    for (const auto& p : s.params) m.names.push_back(p.name);
    std::vector<const zerosim::Op*> fwd;
    int a2a = 0, step = -1, micro = -1;
    for (const auto& op : s.ops) {
        if (op.kind == OpKind::Compute && op.compute == ComputeKind::Backward) break;
        if (op.kind == OpKind::Compute && op.compute == ComputeKind::Forward) {
            if (step < 0) step = op.step, micro = op.micro;
            if (op.step != step || op.micro != micro) break;
            if (op.params.size() != 2) return ulysses_error(s, "module " + op.module_name + " has not two parameters");
            if ((a2a == 0) != (fwd.size() < 2)) return ulysses_error(s, "not LayerNorm, qkv, the attention's all_to_alls, o, head");
            fwd.push_back(&op);
        } else if (step >= 0 && op.group == GroupKind::Sequence && op.payload == Payload::Activations) {
            if (op.kind != OpKind::AllToAll) return ulysses_error(s, "op " + std::to_string(op.id) + " is not an all_to_all");
            ++a2a;
            if (m.sp < 1 || heads % m.sp || m.seq % m.sp || op.elements != m.batch * (m.seq / m.sp) * heads * head_size)
                return ulysses_error(s, "op " + std::to_string(op.id) + ": " + std::to_string(op.elements) + " elements are not micro batch x seq/sp x " +
                                            std::to_string(heads) + " heads x " + std::to_string(head_size));
        }
    }
    if (fwd.size() != 4 || a2a != 4) return ulysses_error(s, "not LayerNorm, qkv, four all_to_alls, o, head");
    auto shape = [&](int p) { return s.params.at(static_cast<size_t>(p)).shape; };
    m.ln_w = fwd[0]->params[0], m.ln_b = fwd[0]->params[1], m.qkv_w = fwd[1]->params[0], m.qkv_b = fwd[1]->params[1];
    m.o_w = fwd[2]->params[0], m.o_b = fwd[2]->params[1], m.head_w = fwd[3]->params[0], m.head_b = fwd[3]->params[1];
    m.hidden = heads * head_size;
    m.out = shape(m.head_w).at(0);
    if (shape(m.ln_w) != std::vector<int64_t>{m.hidden} || shape(m.qkv_w) != std::vector<int64_t>{3 * m.hidden, m.hidden} ||
        shape(m.o_w) != std::vector<int64_t>{m.hidden, m.hidden} || shape(m.head_w).at(1) != m.hidden)
        return ulysses_error(s, "the modules are not LayerNorm(h), Linear(h, 3h), Linear(h, h), Linear(h, out) for h = heads x head size");
    return m;
}

float ulysses_initial_weight(const UlyssesMlp& m, uint64_t seed, int p, int64_t i) {
    const std::string& name = m.names.at(static_cast<size_t>(p));
    if (p == m.ln_w) return 1.0f + mlp_initial_weight(seed, name, i, 100);
    if (p == m.ln_b) return 0.0f;
    return mlp_initial_weight(seed, name, i, m.hidden);
}

void ulysses_pre_forward(const UlyssesMlp& m, const UlyssesParams& w, int module, UlyssesMicro& s) {
    const int64_t R = m.local_rows(), H = m.hidden;
    if (module == 0) {
        s.ln_y.assign(static_cast<size_t>(R * H), 0.0f), s.xhat.assign(s.ln_y.size(), 0.0f), s.rstd.assign(static_cast<size_t>(R), 0.0f);
        layer_norm_forward(s.x.data(), w[m.ln_w], w[m.ln_b], s.ln_y.data(), s.xhat.data(), s.rstd.data(), R, H);
        return;
    }
    s.qkv.assign(static_cast<size_t>(R * 3 * H), 0.0f);
    linear_forward(s.ln_y.data(), w[m.qkv_w], w[m.qkv_b], s.qkv.data(), R, H, 3 * H, false);
    for (int n = 0; n < 3; ++n) pack_by_heads(m, s.qkv.data(), 3 * H, n * H, s.send[n]);
}

void ulysses_attention_forward(const UlyssesMlp& m, UlyssesMicro& s) {
    unpack_by_positions(m, s.recv[0], s.q), unpack_by_positions(m, s.recv[1], s.k), unpack_by_positions(m, s.recv[2], s.v);
    const int64_t S = m.seq, hl = m.heads / m.sp, d = m.head_size;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    s.probs.assign(static_cast<size_t>(m.batch * hl * S * S), 0.0f);
    s.out.assign(s.q.size(), 0.0f);
    auto at = [&](int64_t b, int64_t pos, int64_t h) { return ((b * S + pos) * hl + h) * d; };
    for (int64_t b = 0; b < m.batch; ++b)
        for (int64_t h = 0; h < hl; ++h)
            for (int64_t i = 0; i < S; ++i) {
                float* p = &s.probs[static_cast<size_t>(((b * hl + h) * S + i) * S)];
                for (int64_t j = 0; j < S; ++j) {
                    float acc = 0.0f;
                    for (int64_t e = 0; e < d; ++e) acc += s.q[at(b, i, h) + e] * s.k[at(b, j, h) + e];
                    p[j] = acc * scale;
                }
                const float top = *std::max_element(p, p + S);
                float sum = 0.0f;
                for (int64_t j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - top));
                for (int64_t j = 0; j < S; ++j) p[j] /= sum;
                for (int64_t j = 0; j < S; ++j)
                    for (int64_t e = 0; e < d; ++e) s.out[at(b, i, h) + e] += p[j] * s.v[at(b, j, h) + e];
            }
    pack_by_positions(m, s.out, s.send[3]);
}

void ulysses_post_forward(const UlyssesMlp& m, const UlyssesParams& w, int module, UlyssesMicro& s) {
    const int64_t R = m.local_rows(), H = m.hidden;
    if (module == 2) {
        s.attn.assign(static_cast<size_t>(R * H), 0.0f);
        unpack_by_heads(m, s.recv[3], s.attn.data(), H, 0);
        s.o_y.assign(static_cast<size_t>(R * H), 0.0f);
        linear_forward(s.attn.data(), w[m.o_w], w[m.o_b], s.o_y.data(), R, H, H, false);
        for (size_t i = 0; i < s.o_y.size(); ++i) s.o_y[i] += s.x[i];   // the residual
        return;
    }
    s.y.assign(static_cast<size_t>(R * m.out), 0.0f);
    linear_forward(s.o_y.data(), w[m.head_w], w[m.head_b], s.y.data(), R, H, m.out, false);
}

void ulysses_post_backward(const UlyssesMlp& m, const UlyssesParams& w, const UlyssesParams& g, int module, const std::vector<float>& target,
                           UlyssesMicro& s) {
    const int64_t R = m.local_rows(), H = m.hidden;
    if (module == 3) {
        std::vector<float> gy(s.y.size());
        s.loss = 0.0;
        for (size_t i = 0; i < s.y.size(); ++i) {
            const float d = s.y[i] - target[i];
            s.loss += 0.5 * d * d / static_cast<double>(R);
            gy[i] = d / static_cast<float>(R);
        }
        s.grad.assign(static_cast<size_t>(R * H), 0.0f);
        linear_backward(s.o_y.data(), w[m.head_w], s.y.data(), gy.data(), g[m.head_w], g[m.head_b], s.grad.data(), R, H, m.out, false);
        return;
    }
    s.g_x = s.grad;   // the residual's share
    s.g_attn_local.assign(static_cast<size_t>(R * H), 0.0f);
    linear_backward(s.attn.data(), w[m.o_w], s.o_y.data(), s.grad.data(), g[m.o_w], g[m.o_b], s.g_attn_local.data(), R, H, H, false);
    pack_by_heads(m, s.g_attn_local.data(), H, 0, s.send[4]);
}

void ulysses_attention_backward(const UlyssesMlp& m, UlyssesMicro& s) {
    std::vector<float> go;
    unpack_by_positions(m, s.recv[4], go);
    const int64_t S = m.seq, hl = m.heads / m.sp, d = m.head_size;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<float> dq(s.q.size(), 0.0f), dk(s.q.size(), 0.0f), dv(s.q.size(), 0.0f), dp(static_cast<size_t>(S));
    auto at = [&](int64_t b, int64_t pos, int64_t h) { return ((b * S + pos) * hl + h) * d; };
    for (int64_t b = 0; b < m.batch; ++b)
        for (int64_t h = 0; h < hl; ++h)
            for (int64_t i = 0; i < S; ++i) {
                const float* p = &s.probs[static_cast<size_t>(((b * hl + h) * S + i) * S)];
                float dot = 0.0f;
                for (int64_t j = 0; j < S; ++j) {
                    float acc = 0.0f;
                    for (int64_t e = 0; e < d; ++e) {
                        acc += go[at(b, i, h) + e] * s.v[at(b, j, h) + e];
                        dv[at(b, j, h) + e] += p[j] * go[at(b, i, h) + e];
                    }
                    dp[j] = acc;
                    dot += p[j] * acc;
                }
                for (int64_t j = 0; j < S; ++j) {
                    const float ds = p[j] * (dp[j] - dot) * scale;   // softmax's backward, then the score's scale
                    for (int64_t e = 0; e < d; ++e) {
                        dq[at(b, i, h) + e] += ds * s.k[at(b, j, h) + e];
                        dk[at(b, j, h) + e] += ds * s.q[at(b, i, h) + e];
                    }
                }
            }
    pack_by_positions(m, dq, s.send[5]), pack_by_positions(m, dk, s.send[6]), pack_by_positions(m, dv, s.send[7]);
}

void ulysses_pre_backward(const UlyssesMlp& m, const UlyssesParams& w, const UlyssesParams& g, int module, UlyssesMicro& s) {
    const int64_t R = m.local_rows(), H = m.hidden;
    if (module == 1) {
        std::vector<float> gqkv(static_cast<size_t>(R * 3 * H), 0.0f);
        for (int n = 0; n < 3; ++n) unpack_by_heads(m, s.recv[5 + n], gqkv.data(), 3 * H, n * H);
        s.grad.assign(static_cast<size_t>(R * H), 0.0f);
        // The key's bias moves every score of a query by the same amount, which the softmax ignores:
        // its gradient is zero in exact arithmetic, and rounding noise there would become Adam steps
        // of +-lr whose signs depend on the order MPI sums the ranks in. It gets an exact zero.
        const std::vector<float> key_bias(g[m.qkv_b] + H, g[m.qkv_b] + 2 * H);
        linear_backward(s.ln_y.data(), w[m.qkv_w], s.qkv.data(), gqkv.data(), g[m.qkv_w], g[m.qkv_b], s.grad.data(), R, H, 3 * H, false);
        std::copy(key_bias.begin(), key_bias.end(), g[m.qkv_b] + H);
        return;
    }
    std::vector<float> gx(static_cast<size_t>(R * H));
    layer_norm_backward(s.xhat.data(), s.rstd.data(), w[m.ln_w], s.grad.data(), g[m.ln_w], g[m.ln_b], gx.data(), R, H);
    for (size_t i = 0; i < gx.size(); ++i) gx[i] += s.g_x[i];
    s.grad = std::move(gx);   // the input's gradient (nothing takes it)
}

UlyssesMlpReference::UlyssesMlpReference(const UlyssesMlp& m, int world, uint64_t seed, int64_t grad_accum, float lr)
    : m_model_(m), world_(world), seed_(seed), grad_accum_(grad_accum) {
    adam_.lr = lr;
    const std::vector<std::vector<int64_t>> sizes = {{m.ln_w, m.hidden}, {m.ln_b, m.hidden}, {m.qkv_w, 3 * m.hidden * m.hidden},
                                                     {m.qkv_b, 3 * m.hidden}, {m.o_w, m.hidden * m.hidden}, {m.o_b, m.hidden},
                                                     {m.head_w, m.out * m.hidden}, {m.head_b, m.out}};
    w_.resize(m.names.size());
    for (const auto& e : sizes) {
        auto& v = w_.at(static_cast<size_t>(e[0]));
        v.resize(static_cast<size_t>(e[1]));
        for (int64_t i = 0; i < e[1]; ++i) v[static_cast<size_t>(i)] = ulysses_initial_weight(m, seed, static_cast<int>(e[0]), i);
    }
    m_ = w_, v_ = w_;
    for (auto* s : {&m_, &v_})
        for (auto& p : *s) std::fill(p.begin(), p.end(), 0.0f);
    grad_.assign(static_cast<size_t>(world), w_);
    micro_grad_.assign(static_cast<size_t>(world), std::vector<std::vector<std::vector<float>>>(static_cast<size_t>(grad_accum), w_));
    micro_.assign(static_cast<size_t>(world), std::vector<UlyssesMicro>(static_cast<size_t>(grad_accum)));
}

void UlyssesMlpReference::compute(int step) {
    if (step != t_) throw std::logic_error("UlyssesMlpReference: step " + std::to_string(step) + " computed after " + std::to_string(t_) + " updates");
    const UlyssesMlp& m = m_model_;
    const size_t W = static_cast<size_t>(world_), P = static_cast<size_t>(m.sp);
    loss_ = 0.0;
    for (auto& per_r : micro_grad_)
        for (auto& per_m : per_r)
            for (auto& p : per_m) std::fill(p.begin(), p.end(), 0.0f);
    UlyssesParams w;
    for (auto& p : w_) w.push_back(p.data());
    std::vector<UlyssesParams> g(W);
    for (int mi = 0; mi < grad_accum_; ++mi) {
        for (size_t r = 0; r < W; ++r) {
            g[r].clear();
            for (auto& p : micro_grad_[r][static_cast<size_t>(mi)]) g[r].push_back(p.data());
        }
        auto S = [&](size_t r) -> UlyssesMicro& { return micro_[r][static_cast<size_t>(mi)]; };
        // The sequence group's all_to_all n: member j's block for member i lands at i's block j.
        auto exchange = [&](int n) {
            for (size_t r = 0; r < W; ++r) {
                const size_t base = r / P * P, me = r % P;
                S(r).recv[n].assign(S(r).send[n].size(), 0.0f);
                for (size_t j = 0; j < P; ++j)
                    std::copy_n(S(base + j).send[n].begin() + static_cast<int64_t>(me) * m.block(), m.block(),
                                S(r).recv[n].begin() + static_cast<int64_t>(j) * m.block());
            }
        };
        for (size_t r = 0; r < W; ++r) {
            S(r) = UlyssesMicro{};
            S(r).x = ulysses_input(m, seed_, static_cast<int>(r), step, mi);
            ulysses_pre_forward(m, w, 0, S(r)), ulysses_pre_forward(m, w, 1, S(r));
        }
        for (int n = 0; n < 3; ++n) exchange(n);
        for (size_t r = 0; r < W; ++r) ulysses_attention_forward(m, S(r));
        exchange(3);
        for (size_t r = 0; r < W; ++r) {
            ulysses_post_forward(m, w, 2, S(r)), ulysses_post_forward(m, w, 3, S(r));
            const auto target = ulysses_target(m, seed_, static_cast<int>(r), step, mi);
            ulysses_post_backward(m, w, g[r], 3, target, S(r)), ulysses_post_backward(m, w, g[r], 2, target, S(r));
            loss_ += S(r).loss;
        }
        exchange(4);
        for (size_t r = 0; r < W; ++r) ulysses_attention_backward(m, S(r));
        for (int n = 5; n < 8; ++n) exchange(n);
        for (size_t r = 0; r < W; ++r) ulysses_pre_backward(m, w, g[r], 1, S(r)), ulysses_pre_backward(m, w, g[r], 0, S(r));
    }
    for (size_t r = 0; r < W; ++r)
        for (size_t p = 0; p < grad_[r].size(); ++p) {
            std::vector<std::vector<float>> per_m;
            for (const auto& gm : micro_grad_[r]) per_m.push_back(gm[p]);
            add_micro_gradients(per_m, grad_[r][p]);
        }
    computed_ = step;
}

const std::vector<float>& UlyssesMlpReference::local_gradient(int r, int p, const std::vector<int>& micros) const {
    if (micros.size() == 1) return micro_grad_.at(static_cast<size_t>(r)).at(static_cast<size_t>(micros[0])).at(static_cast<size_t>(p));
    if (static_cast<int64_t>(micros.size()) != grad_accum_) throw std::logic_error("a reduction of " + std::to_string(micros.size()) + " micro batches' gradients");
    return local_gradient(r, p);
}

void UlyssesMlpReference::update(int step) {
    if (computed_ != step) compute(step);
    ++t_;
    const float scale = 1.0f / static_cast<float>(world_ * grad_accum_);
    for (size_t p = 0; p < w_.size(); ++p) {
        std::vector<float> sum(w_[p].size(), 0.0f);
        for (size_t r = 0; r < grad_.size(); ++r)
            for (size_t i = 0; i < sum.size(); ++i) sum[i] = r == 0 ? grad_[r][p][i] : sum[i] + grad_[r][p][i];
        for (auto& e : sum) e *= scale;
        adam_update(w_[p].data(), m_[p].data(), v_[p].data(), sum.data(), static_cast<int64_t>(sum.size()), t_, adam_);
    }
}

}  // namespace zerorun
