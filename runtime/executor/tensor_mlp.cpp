// The tensor-parallel run's real model (executor/tensor_mlp.hpp): its modules read from one tensor
// rank's program, LayerNorm's kernels, and the single-process reference.
#include "executor/tensor_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "executor/mlp.hpp"   // linear kernels, mlp_input / mlp_target, add_micro_gradients

namespace zerorun {

using zerosim::ComputeKind;
using zerosim::Error;
using zerosim::GroupKind;
using zerosim::OpKind;
using zerosim::Payload;

namespace {

zerosim::Error tensor_error(const zerosim::Schedule& s, const std::string& what) { return Error{s.meta.model_file, "tensor", what}; }

// A module of the first micro batch's forward from its parameters.
zerosim::Result<TpModule> tensor_module(const zerosim::Schedule& s, const zerosim::Op& op) {
    if (op.params.size() != 2) return tensor_error(s, "module " + op.module_name + " has " + std::to_string(op.params.size()) + " parameters");
    const auto& w = s.params.at(static_cast<size_t>(op.params[0]));
    const auto& b = s.params.at(static_cast<size_t>(op.params[1]));
    TpModule m;
    m.weight = op.params[0], m.bias = op.params[1], m.weight_name = w.name, m.bias_name = b.name;
    if (w.shape.size() == 1 && b.shape.size() == 1 && w.shape[0] == b.shape[0]) {
        m.kind = TpModule::Kind::LayerNorm;
        m.in = m.out = w.shape[0];
    } else if (w.shape.size() == 2 && b.shape.size() == 1 && b.shape[0] == w.shape[0]) {
        m.in = w.shape[1], m.out = w.shape[0];
    } else {
        return tensor_error(s, "module " + op.module_name + " is neither a LayerNorm nor a Linear");
    }
    return m;
}

}  // namespace

zerosim::Result<TensorMlp> tensor_mlp(const zerosim::Schedule& s) {
    TensorMlp t;
    t.tp = static_cast<int>(s.meta.layout.tensor);
    t.rows = s.meta.micro_batch * std::max<int64_t>(1, s.meta.seq_len);
    int step = -1, micro = -1;
    bool backward = false;
    std::vector<int> backward_order;
    int last = -1;   // the module whose compute ran last
    for (const auto& op : s.ops) {
        if (op.kind == OpKind::Compute && (op.compute == ComputeKind::Forward || op.compute == ComputeKind::Backward)) {
            if (step < 0) step = op.step, micro = op.micro;
            if (op.step != step || op.micro != micro) break;
            if (op.compute == ComputeKind::Forward) {
                if (backward) return tensor_error(s, "a forward after the backward of micro batch " + std::to_string(micro));
                auto m = tensor_module(s, op);
                if (!m) return m.error();
                t.modules.push_back(m.value());
                last = static_cast<int>(t.modules.size()) - 1;
            } else {
                backward = true;
                last = -1;
                for (size_t k = 0; k < t.modules.size(); ++k)
                    if (t.modules[k].weight == op.params.at(0)) last = static_cast<int>(k);
                if (last < 0) return tensor_error(s, "a backward of module " + op.module_name + ", which ran no forward");
            }
        } else if (step >= 0 && op.payload == Payload::Activations && op.group == GroupKind::Tensor) {
            if (op.kind != OpKind::AllReduce || last < 0) return tensor_error(s, "op " + std::to_string(op.id) + " is not an all_reduce after a module");
            TpModule& m = t.modules[static_cast<size_t>(last)];
            if (m.kind != TpModule::Kind::Linear) return tensor_error(s, "op " + std::to_string(op.id) + " sums a LayerNorm's tensor");
            (backward ? m.column_parallel : m.row_parallel) = true;
            const int64_t width = backward ? m.in : m.out;
            if (op.elements != t.rows * width)
                return tensor_error(s, "op " + std::to_string(op.id) + ": an all_reduce of " + std::to_string(op.elements) + " elements; module " +
                                           m.weight_name + "'s " + (backward ? "input gradient" : "output") + " is " + std::to_string(t.rows) +
                                           " rows x " + std::to_string(width));
        }
    }
    if (t.modules.empty()) return tensor_error(s, "the program runs no forward compute op");
    for (size_t k = 0; k + 1 < t.modules.size(); ++k) {
        TpModule& m = t.modules[k];
        m.relu = m.kind == TpModule::Kind::Linear && !m.row_parallel;
        const int64_t next_in = t.modules[k + 1].in;
        if (next_in != m.out) return tensor_error(s, "module " + t.modules[k + 1].weight_name + " takes " + std::to_string(next_in) + " features; the one before gives " + std::to_string(m.out));
    }
    return t;
}

float tensor_initial_weight(const TensorMlp& t, const TpModule& m, bool bias, int tp_rank, uint64_t seed, int64_t i) {
    const std::string& name = bias ? m.bias_name : m.weight_name;
    if (m.kind == TpModule::Kind::LayerNorm) return bias ? 0.0f : 1.0f + mlp_initial_weight(seed, name, i, 100);
    const int64_t fan_in = m.row_parallel ? m.in * t.tp : m.in;
    return mlp_initial_weight(seed, t.split(m, bias) ? name + "@tp" + std::to_string(tp_rank) : name, i, fan_in);
}

void layer_norm_forward(const float* x, const float* g, const float* b, float* y, float* xhat, float* rstd, int64_t R, int64_t n) {
    for (int64_t r = 0; r < R; ++r) {
        float mean = 0.0f, var = 0.0f;
        for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
        mean /= static_cast<float>(n);
        for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
        var /= static_cast<float>(n);
        rstd[r] = 1.0f / std::sqrt(var + 1e-5f);
        for (int64_t j = 0; j < n; ++j) {
            xhat[r * n + j] = (x[r * n + j] - mean) * rstd[r];
            y[r * n + j] = xhat[r * n + j] * g[j] + b[j];
        }
    }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = gy * g.
void layer_norm_backward(const float* xhat, const float* rstd, const float* g, const float* gy, float* gg, float* gb, float* gx,
                         int64_t R, int64_t n) {
    for (int64_t r = 0; r < R; ++r) {
        float a = 0.0f, c = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            const float d = gy[r * n + j] * g[j];
            a += d;
            c += d * xhat[r * n + j];
            gg[j] += gy[r * n + j] * xhat[r * n + j];
            gb[j] += gy[r * n + j];
        }
        a /= static_cast<float>(n), c /= static_cast<float>(n);
        for (int64_t j = 0; j < n; ++j) gx[r * n + j] = rstd[r] * (gy[r * n + j] * g[j] - a - xhat[r * n + j] * c);
    }
}

TensorMlpReference::TensorMlpReference(const TensorMlp& t, uint64_t seed, int data_ranks, int64_t grad_accum, float lr)
    : t_model_(t), seed_(seed), data_ranks_(data_ranks), grad_accum_(grad_accum) {
    adam_.lr = lr;
    int params = 0;
    for (const auto& m : t.modules) params = std::max({params, m.weight + 1, m.bias + 1});
    const size_t T = static_cast<size_t>(t.tp), K = t.modules.size();
    w_.assign(T, std::vector<std::vector<float>>(static_cast<size_t>(params)));
    for (size_t r = 0; r < T; ++r)
        for (const auto& m : t.modules) {
            auto& w = w_[r][static_cast<size_t>(m.weight)];
            auto& b = w_[r][static_cast<size_t>(m.bias)];
            w.resize(static_cast<size_t>(m.kind == TpModule::Kind::LayerNorm ? m.in : m.in * m.out));
            b.resize(static_cast<size_t>(m.out));
            for (size_t i = 0; i < w.size(); ++i) w[i] = tensor_initial_weight(t, m, false, static_cast<int>(r), seed, static_cast<int64_t>(i));
            for (size_t i = 0; i < b.size(); ++i) b[i] = tensor_initial_weight(t, m, true, static_cast<int>(r), seed, static_cast<int64_t>(i));
        }
    m_ = w_, v_ = w_;
    for (auto* s : {&m_, &v_})
        for (auto& per_r : *s)
            for (auto& p : per_r) std::fill(p.begin(), p.end(), 0.0f);
    const auto per_dm = std::vector<std::vector<std::vector<float>>>(static_cast<size_t>(data_ranks),
                                                                     std::vector<std::vector<float>>(static_cast<size_t>(grad_accum)));
    fwd_.assign(K, per_dm), bwd_.assign(K, per_dm);
    grad_.assign(T, std::vector<std::vector<std::vector<float>>>(static_cast<size_t>(data_ranks), std::vector<std::vector<float>>(static_cast<size_t>(params))));
    micro_grad_.assign(T, std::vector<std::vector<std::vector<std::vector<float>>>>(
                              static_cast<size_t>(data_ranks),
                              std::vector<std::vector<std::vector<float>>>(static_cast<size_t>(grad_accum), std::vector<std::vector<float>>(static_cast<size_t>(params)))));
}

// One micro batch of data rank d through every tensor rank's shards and back.
void TensorMlpReference::run_micro(int step, int d, int mi) {
    const int64_t R = t_model_.rows;
    const size_t T = static_cast<size_t>(t_model_.tp), K = t_model_.modules.size();
    struct Cache { std::vector<float> x, y, xhat, rstd; };
    std::vector<std::vector<Cache>> c(T, std::vector<Cache>(K));
    std::vector<std::vector<float>> x(T, std::vector<float>(static_cast<size_t>(R * t_model_.modules.front().in)));
    for (size_t i = 0; i < x[0].size(); ++i) x[0][i] = mlp_input(seed_, d, step, mi, static_cast<int64_t>(i));
    for (size_t r = 1; r < T; ++r) x[r] = x[0];
    for (size_t k = 0; k < K; ++k) {
        const TpModule& m = t_model_.modules[k];
        std::vector<float> sum;
        for (size_t r = 0; r < T; ++r) {
            Cache& cc = c[r][k];
            cc.x = x[r];
            cc.y.assign(static_cast<size_t>(R * m.out), 0.0f);
            const float* w = w_[r][m.weight].data();
            const float* b = w_[r][m.bias].data();
            if (m.kind == TpModule::Kind::LayerNorm) {
                cc.xhat.resize(cc.y.size()), cc.rstd.resize(static_cast<size_t>(R));
                layer_norm_forward(cc.x.data(), w, b, cc.y.data(), cc.xhat.data(), cc.rstd.data(), R, m.in);
            } else {
                const std::vector<float> zero(static_cast<size_t>(m.out), 0.0f);
                linear_forward(cc.x.data(), w, m.row_parallel ? zero.data() : b, cc.y.data(), R, m.in, m.out, m.relu);
            }
            if (m.row_parallel) {
                if (r == 0) sum = cc.y;
                else for (size_t i = 0; i < sum.size(); ++i) sum[i] += cc.y[i];
            }
            x[r] = cc.y;
        }
        if (m.row_parallel) {
            fwd_[k][d][mi] = sum;   // the all_reduce's result, before the bias
            for (size_t r = 0; r < T; ++r) {
                x[r] = sum;
                for (int64_t i = 0; i < R * m.out; ++i) x[r][i] += w_[r][m.bias][i % m.out];
                c[r][k].y = x[r];
            }
        }
    }
    std::vector<std::vector<float>> g(T, std::vector<float>(x[0].size()));
    for (size_t i = 0; i < x[0].size(); ++i) {
        const float diff = x[0][i] - mlp_target(seed_, d, step, mi, static_cast<int64_t>(i));
        loss_ += 0.5 * diff * diff / static_cast<double>(R);
        for (size_t r = 0; r < T; ++r) g[r][i] = (x[r][i] - mlp_target(seed_, d, step, mi, static_cast<int64_t>(i))) / static_cast<float>(R);
    }
    for (size_t k = K; k-- > 0;) {
        const TpModule& m = t_model_.modules[k];
        std::vector<float> sum;
        for (size_t r = 0; r < T; ++r) {
            Cache& cc = c[r][k];
            std::vector<float> gx(static_cast<size_t>(R * m.in));
            float* gw = micro_grad_[r][d][mi][m.weight].data();
            float* gb = micro_grad_[r][d][mi][m.bias].data();
            if (m.kind == TpModule::Kind::LayerNorm)
                layer_norm_backward(cc.xhat.data(), cc.rstd.data(), w_[r][m.weight].data(), g[r].data(), gw, gb, gx.data(), R, m.in);
            else
                linear_backward(cc.x.data(), w_[r][m.weight].data(), cc.y.data(), g[r].data(), gw, gb, gx.data(), R, m.in, m.out, m.relu);
            if (m.column_parallel) {
                if (r == 0) sum = gx;
                else for (size_t i = 0; i < sum.size(); ++i) sum[i] += gx[i];
            }
            g[r] = std::move(gx);
        }
        if (m.column_parallel) {
            bwd_[k][d][mi] = sum;
            for (size_t r = 0; r < T; ++r) g[r] = sum;
        }
    }
}

void TensorMlpReference::compute(int step) {
    if (step != t_) throw std::logic_error("TensorMlpReference: step " + std::to_string(step) + " computed after " + std::to_string(t_) + " updates");
    loss_ = 0.0;
    for (size_t r = 0; r < grad_.size(); ++r)
        for (auto& per_d : micro_grad_[r])
            for (auto& per_m : per_d)
                for (size_t p = 0; p < per_m.size(); ++p) per_m[p].assign(w_[r][p].size(), 0.0f);
    for (int d = 0; d < data_ranks_; ++d)
        for (int m = 0; m < grad_accum_; ++m) run_micro(step, d, m);
    for (size_t r = 0; r < grad_.size(); ++r)
        for (size_t d = 0; d < grad_[r].size(); ++d)
            for (size_t p = 0; p < w_[r].size(); ++p) {
                std::vector<std::vector<float>> per_m;
                for (const auto& g : micro_grad_[r][d]) per_m.push_back(g[p]);
                grad_[r][d][p].assign(w_[r][p].size(), 0.0f);
                add_micro_gradients(per_m, grad_[r][d][p]);
            }
    computed_ = step;
}

void TensorMlpReference::update(int step) {
    if (computed_ != step) compute(step);
    ++t_;
    const float scale = 1.0f / static_cast<float>(data_ranks_ * grad_accum_);
    for (size_t r = 0; r < w_.size(); ++r)
        for (size_t p = 0; p < w_[r].size(); ++p) {
            const size_t n = w_[r][p].size();
            std::vector<float> g(n, 0.0f);
            for (int d = 0; d < data_ranks_; ++d)
                for (size_t i = 0; i < n; ++i) g[i] = d == 0 ? grad_[r][d][p][i] : g[i] + grad_[r][d][p][i];
            for (auto& e : g) e *= scale;
            adam_update(w_[r][p].data(), m_[r][p].data(), v_[r][p].data(), g.data(), static_cast<int64_t>(n), t_, adam_);
        }
}

const std::vector<float>& TensorMlpReference::forward_sum(size_t k, int d, int m) const { return fwd_.at(k).at(static_cast<size_t>(d)).at(static_cast<size_t>(m)); }
const std::vector<float>& TensorMlpReference::backward_sum(size_t k, int d, int m) const { return bwd_.at(k).at(static_cast<size_t>(d)).at(static_cast<size_t>(m)); }
const std::vector<float>& TensorMlpReference::local_gradient(int r, int d, int p) const {
    return grad_.at(static_cast<size_t>(r)).at(static_cast<size_t>(d)).at(static_cast<size_t>(p));
}

const std::vector<float>& TensorMlpReference::local_gradient(int r, int d, int p, const std::vector<int>& micros) const {
    if (micros.size() == 1)
        return micro_grad_.at(static_cast<size_t>(r)).at(static_cast<size_t>(d)).at(static_cast<size_t>(micros[0])).at(static_cast<size_t>(p));
    if (static_cast<int64_t>(micros.size()) != grad_accum_) throw std::logic_error("a reduction of " + std::to_string(micros.size()) + " micro batches' gradients");
    return local_gradient(r, d, p);
}

}  // namespace zerorun
