// The pipeline run's real MLP (executor/mlp.hpp): its layers read from each stage's program, the
// Linear kernels, and the single-process reference.
#include "executor/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace zerorun {

using zerosim::ComputeKind;
using zerosim::Error;
using zerosim::OpKind;
using zerosim::Payload;

namespace {

zerosim::Error mlp_error(const zerosim::Schedule& s, const std::string& what) {
    return Error{s.meta.model_file, "pipeline", "stage " + std::to_string(s.meta.pipe_stage) + " " + what};
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// Sample-major batch element from loss.hpp's target hash on a channel no parameter uses.
float batch_value(uint64_t seed, int d, int step, int micro, int channel, int64_t i) {
    return target(seed ^ 0x6d6c70ull, d, step, micro, channel, i);
}

}  // namespace

zerosim::Result<std::vector<MlpLinear>> mlp_stage_layers(const zerosim::Schedule& s) {
    std::vector<MlpLinear> layers;
    int step = -1, micro = -1;
    for (const auto& op : s.ops) {
        if (op.kind != OpKind::Compute || op.compute != ComputeKind::Forward) continue;
        if (step < 0) step = op.step, micro = op.micro;
        if (op.step != step || op.micro != micro) break;
        if (op.params.size() != 2) return mlp_error(s, "module " + op.module_name + " has " + std::to_string(op.params.size()) + " parameters, not a Linear's weight and bias");
        const auto& w = s.params.at(static_cast<size_t>(op.params[0]));
        const auto& b = s.params.at(static_cast<size_t>(op.params[1]));
        if (w.shape.size() != 2 || b.shape.size() != 1 || b.shape[0] != w.shape[0])
            return mlp_error(s, "module " + op.module_name + ": " + w.name + " and " + b.name + " are not a Linear's weight [out, in] and bias [out]");
        MlpLinear l{op.params[0], op.params[1], w.shape[1], w.shape[0], w.name, b.name};
        if (!layers.empty() && layers.back().out != l.in)
            return mlp_error(s, "module " + op.module_name + " takes " + std::to_string(l.in) + " features; the layer before gives " + std::to_string(layers.back().out));
        layers.push_back(l);
    }
    if (layers.empty()) return mlp_error(s, "runs no forward compute op");
    std::vector<bool> used(s.params.size(), false);
    for (const auto& l : layers) used[static_cast<size_t>(l.weight)] = used[static_cast<size_t>(l.bias)] = true;
    for (size_t p = 0; p < s.params.size(); ++p)
        if (!used[p]) return mlp_error(s, "holds " + s.params[p].name + ", which no Linear layer of its forward uses");
    return layers;
}

zerosim::Result<PipelineMlp> pipeline_mlp(const std::vector<const zerosim::Schedule*>& stages) {
    PipelineMlp mlp;
    if (stages.empty()) return Error{"", "pipeline", "no stage"};
    mlp.micro_batch = stages.front()->meta.micro_batch;
    for (const auto* s : stages) {
        auto layers = mlp_stage_layers(*s);
        if (!layers) return layers.error();
        if (!mlp.stages.empty() && mlp.stages.back().back().out != layers->front().in)
            return mlp_error(*s, "takes " + std::to_string(layers->front().in) + " features; the stage before gives " +
                                     std::to_string(mlp.stages.back().back().out));
        mlp.stages.push_back(std::move(layers.value()));
    }
    // The IR's activation messages against the real activations: a send carries this stage's
    // output, a receive the previous stage's, micro_batch x width elements (runtime/pipe/engine.py
    // _exec_send_activations / _exec_send_grads send the tensor whole without tensor parallelism).
    for (size_t k = 0; k < stages.size(); ++k) {
        const auto& s = *stages[k];
        const int64_t out = k + 1 < stages.size() ? mlp.stages[k].back().out : 0;
        const int64_t in = k > 0 ? mlp.stages[k].front().in : 0;
        for (const auto& op : s.ops) {
            if (op.payload != Payload::Activations || (op.kind != OpKind::Send && op.kind != OpKind::Recv)) continue;
            // Toward the next stage: activations out, their gradients in; toward the previous: the reverse.
            const bool next = op.peer > s.meta.rank;
            const int64_t width = next ? out : in;
            if (op.elements != mlp.micro_batch * width)
                return mlp_error(s, "op " + std::to_string(op.id) + ": a " + zerosim::op_record_name(op.kind) + " of " +
                                        std::to_string(op.elements) + " elements; the activation there is micro batch " +
                                        std::to_string(mlp.micro_batch) + " x " + std::to_string(width) + " features");
        }
    }
    return mlp;
}

float mlp_initial_weight(uint64_t seed, const std::string& name, int64_t i, int64_t fan_in) {
    const int key = static_cast<int>(fnv1a(name) & 0x7fffff);
    return initial_weight(seed, key, i) / std::sqrt(static_cast<float>(fan_in));
}

float mlp_input(uint64_t seed, int d, int step, int micro, int64_t i) { return batch_value(seed, d, step, micro, -1, i); }
float mlp_target(uint64_t seed, int d, int step, int micro, int64_t i) { return batch_value(seed, d, step, micro, -2, i); }

void linear_forward(const float* x, const float* w, const float* b, float* z, int64_t B, int64_t in, int64_t out, bool relu) {
    for (int64_t r = 0; r < B; ++r)
        for (int64_t o = 0; o < out; ++o) {
            float acc = b[o];
            for (int64_t j = 0; j < in; ++j) acc += x[r * in + j] * w[o * in + j];
            z[r * out + o] = relu && acc < 0.0f ? 0.0f : acc;
        }
}

void linear_backward(const float* x, const float* w, const float* y, const float* gy, float* gw, float* gb, float* gx,
                     int64_t B, int64_t in, int64_t out, bool relu) {
    if (gx)
        for (int64_t i = 0; i < B * in; ++i) gx[i] = 0.0f;
    for (int64_t r = 0; r < B; ++r)
        for (int64_t o = 0; o < out; ++o) {
            const float g = relu && !(y[r * out + o] > 0.0f) ? 0.0f : gy[r * out + o];
            gb[o] += g;
            for (int64_t j = 0; j < in; ++j) {
                gw[o * in + j] += g * x[r * in + j];
                if (gx) gx[r * in + j] += g * w[o * in + j];
            }
        }
}

MlpReference::MlpReference(const PipelineMlp& mlp, uint64_t seed, int data_ranks, int64_t grad_accum, float lr)
    : mlp_(mlp), seed_(seed), data_ranks_(data_ranks), grad_accum_(grad_accum) {
    adam_.lr = lr;
    const size_t S = mlp_.stages.size();
    w_.resize(S), m_.resize(S), v_.resize(S), act_.resize(S), act_grad_.resize(S), grad_.resize(S);
    for (size_t k = 0; k < S; ++k) {
        int params = 0;
        for (const auto& l : mlp_.stages[k]) params = std::max({params, l.weight + 1, l.bias + 1});
        w_[k].resize(static_cast<size_t>(params));
        for (const auto& l : mlp_.stages[k]) {
            auto& w = w_[k][static_cast<size_t>(l.weight)];
            auto& b = w_[k][static_cast<size_t>(l.bias)];
            w.resize(static_cast<size_t>(l.in * l.out));
            b.resize(static_cast<size_t>(l.out));
            for (size_t i = 0; i < w.size(); ++i) w[i] = mlp_initial_weight(seed, l.weight_name, static_cast<int64_t>(i), l.in);
            for (size_t i = 0; i < b.size(); ++i) b[i] = mlp_initial_weight(seed, l.bias_name, static_cast<int64_t>(i), l.in);
        }
        m_[k].resize(w_[k].size());
        v_[k].resize(w_[k].size());
        for (size_t p = 0; p < w_[k].size(); ++p) m_[k][p].assign(w_[k][p].size(), 0.0f), v_[k][p].assign(w_[k][p].size(), 0.0f);
        act_[k].assign(static_cast<size_t>(data_ranks), std::vector<std::vector<float>>(static_cast<size_t>(grad_accum)));
        act_grad_[k] = act_[k];
        grad_[k].assign(static_cast<size_t>(data_ranks), std::vector<std::vector<float>>(w_[k].size()));
        micro_grad_.resize(S);
        micro_grad_[k].assign(static_cast<size_t>(data_ranks),
                              std::vector<std::vector<std::vector<float>>>(static_cast<size_t>(grad_accum), std::vector<std::vector<float>>(w_[k].size())));
    }
}

// One micro batch of data rank d through the whole model and back; its parameter gradients added
// to d's local gradients (micro order, as the executor accumulates them).
void MlpReference::run_micro(int step, int d, int m) {
    const int64_t B = mlp_.micro_batch;
    const size_t S = mlp_.stages.size();
    std::vector<std::vector<std::vector<float>>> xs(S);   // each layer's input; xs[k][n+1] its output
    std::vector<float> x(static_cast<size_t>(B * mlp_.input_width()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_input(seed_, d, step, m, static_cast<int64_t>(i));
    for (size_t k = 0; k < S; ++k) {
        xs[k].push_back(x);
        for (size_t n = 0; n < mlp_.stages[k].size(); ++n) {
            const auto& l = mlp_.stages[k][n];
            std::vector<float> z(static_cast<size_t>(B * l.out));
            linear_forward(x.data(), w_[k][l.weight].data(), w_[k][l.bias].data(), z.data(), B, l.in, l.out, mlp_.relu_after(k, n));
            x = std::move(z);
            xs[k].push_back(x);
        }
        act_[k][d][m] = x;
    }
    std::vector<float> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const float diff = x[i] - mlp_target(seed_, d, step, m, static_cast<int64_t>(i));
        loss_ += 0.5 * diff * diff / static_cast<double>(B);
        g[i] = diff / static_cast<float>(B);
    }
    for (size_t k = S; k-- > 0;) {
        if (k + 1 < S) act_grad_[k][d][m] = g;
        for (size_t n = mlp_.stages[k].size(); n-- > 0;) {
            const auto& l = mlp_.stages[k][n];
            auto& gw = micro_grad_[k][d][m][l.weight];
            auto& gb = micro_grad_[k][d][m][l.bias];
            std::vector<float> gx(static_cast<size_t>(B * l.in));
            linear_backward(xs[k][n].data(), w_[k][l.weight].data(), xs[k][n + 1].data(), g.data(), gw.data(), gb.data(),
                            gx.data(), B, l.in, l.out, mlp_.relu_after(k, n));
            g = std::move(gx);
        }
    }
}

void MlpReference::compute(int step) {
    if (step != t_) throw std::logic_error("MlpReference: step " + std::to_string(step) + " computed after " + std::to_string(t_) + " updates");
    loss_ = 0.0;
    for (size_t k = 0; k < w_.size(); ++k)
        for (auto& per_d : micro_grad_[k])
            for (auto& per_m : per_d)
                for (size_t p = 0; p < per_m.size(); ++p) per_m[p].assign(w_[k][p].size(), 0.0f);
    for (int d = 0; d < data_ranks_; ++d)
        for (int m = 0; m < grad_accum_; ++m) run_micro(step, d, m);
    for (size_t k = 0; k < w_.size(); ++k)
        for (size_t d = 0; d < grad_[k].size(); ++d)
            for (size_t p = 0; p < w_[k].size(); ++p) {
                std::vector<std::vector<float>> per_m;
                for (const auto& g : micro_grad_[k][d]) per_m.push_back(g[p]);
                grad_[k][d][p].assign(w_[k][p].size(), 0.0f);
                add_micro_gradients(per_m, grad_[k][d][p]);
            }
    computed_ = step;
}

void MlpReference::update(int step) {
    if (computed_ != step) compute(step);
    ++t_;
    const float scale = 1.0f / static_cast<float>(data_ranks_ * grad_accum_);
    for (size_t k = 0; k < w_.size(); ++k)
        for (size_t p = 0; p < w_[k].size(); ++p) {
            const size_t n = w_[k][p].size();
            std::vector<float> g(n, 0.0f);
            for (int d = 0; d < data_ranks_; ++d)
                for (size_t i = 0; i < n; ++i) g[i] = d == 0 ? grad_[k][d][p][i] : g[i] + grad_[k][d][p][i];
            for (auto& e : g) e *= scale;
            adam_update(w_[k][p].data(), m_[k][p].data(), v_[k][p].data(), g.data(), static_cast<int64_t>(n), t_, adam_);
        }
}

const std::vector<float>& MlpReference::activation(size_t stage, int d, int m) const { return act_.at(stage).at(static_cast<size_t>(d)).at(static_cast<size_t>(m)); }
const std::vector<float>& MlpReference::activation_grad(size_t stage, int d, int m) const {
    return act_grad_.at(stage).at(static_cast<size_t>(d)).at(static_cast<size_t>(m));
}
const std::vector<float>& MlpReference::local_gradient(size_t stage, int d, int p) const {
    return grad_.at(stage).at(static_cast<size_t>(d)).at(static_cast<size_t>(p));
}

const std::vector<float>& MlpReference::local_gradient(size_t stage, int d, int p, const std::vector<int>& micros) const {
    if (micros.size() == 1) return micro_grad_.at(stage).at(static_cast<size_t>(d)).at(static_cast<size_t>(micros[0])).at(static_cast<size_t>(p));
    if (static_cast<int64_t>(micros.size()) != grad_accum_) throw std::logic_error("a reduction of " + std::to_string(micros.size()) + " micro batches' gradients");
    return local_gradient(stage, d, p);
}

}  // namespace zerorun
