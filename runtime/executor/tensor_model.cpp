// A tensor rank of the real tensor-parallel model (executor/tensor_mlp.hpp; docs/runtime.md "3D
// layouts"): its modules' forward and backward on its shards, the row-parallel Linear's output
// partial sums and the column-parallel Linear's input-gradient partial sums as the payload of the
// IR's tensor-group all_reduces (Megatron's RowParallelLinear / ColumnParallelLinear, which the
// reference runs tp2_dp2_z1 and tp2_dp2_z3 log as all_reduce [forward] / [backward]), and the weight
// gradients ZeRO reduces over the data group.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::ComputeKind;
using zerosim::OpKind;

void Executor::set_tensor_mlp() {
    tp_ = a_.tensor_mlp;
    if (!tp_) return;
    if (mdt() != DType::FP32) throw std::runtime_error("the tensor-parallel model runs in fp32 only");
    auto it = groups_.find(zerosim::GroupKind::Tensor);
    if (it == groups_.end() || it->second.size() != tp_->tp) throw std::runtime_error("the tensor-parallel model needs the tensor group of meta.groups");
    tp_rank_ = it->second.index;
    tp_module_of_.assign(s_.params.size(), -1);
    for (size_t k = 0; k < tp_->modules.size(); ++k) {
        tp_module_of_.at(static_cast<size_t>(tp_->modules[k].weight)) = static_cast<int>(k);
        tp_module_of_.at(static_cast<size_t>(tp_->modules[k].bias)) = static_cast<int>(k);
    }
    for (size_t p = 0; p < s_.params.size(); ++p)
        if (tp_module_of_[p] < 0) throw std::runtime_error("parameter " + s_.params[p].name + " is in no module of the tensor-parallel model");
    if (verify_) tp_shadow_ = std::make_unique<TensorMlpReference>(*tp_, a_.seed, world_, s_.meta.grad_accum, a_.lr);
}

TensorMlpReference& Executor::tp_reference(int step) const {
    TensorMlpReference& r = *tp_shadow_;
    if (r.updates() != step) throw std::runtime_error("the tensor-parallel reference holds " + std::to_string(r.updates()) + " updates at step " + std::to_string(step));
    if (r.computed() != step) r.compute(step);
    return r;
}

Executor::TpMicro& Executor::tp_micro(const Op& op) {
    std::lock_guard<std::mutex> lock(micro_mu_);
    return tp_micro_[{op.step, op.micro}];
}

int Executor::tp_module(const Op& op) const {
    if (op.params.empty() || tp_module_of_[static_cast<size_t>(op.params[0])] < 0) broken(op, "a compute op of no module of the tensor-parallel model");
    return tp_module_of_[static_cast<size_t>(op.params[0])];
}

void Executor::tp_forward(const Op& op) {
    const size_t k = static_cast<size_t>(tp_module(op));
    const TpModule& m = tp_->modules[k];
    const int64_t R = tp_->rows;
    TpMicro& t = tp_micro(op);
    if (k == 0) {
        t.caches.assign(tp_->modules.size(), {});
        t.act.resize(static_cast<size_t>(R * m.in));
        for (size_t i = 0; i < t.act.size(); ++i) t.act[i] = mlp_input(a_.seed, rank_, op.step, op.micro, static_cast<int64_t>(i));
    }
    if (t.caches.size() != tp_->modules.size() || static_cast<int64_t>(t.act.size()) != R * m.in) broken(op, "runs before its input is there");
    TpMicro::Cache& c = t.caches[k];
    c.x = t.act;
    c.y.assign(static_cast<size_t>(R * m.out), 0.0f);
    const float* w = work_[m.weight].as<float>();
    const float* b = work_[m.bias].as<float>();
    if (m.kind == TpModule::Kind::LayerNorm) {
        c.xhat.resize(c.y.size()), c.rstd.resize(static_cast<size_t>(R));
        layer_norm_forward(c.x.data(), w, b, c.y.data(), c.xhat.data(), c.rstd.data(), R, m.in);
    } else {
        const std::vector<float> zero(static_cast<size_t>(m.out), 0.0f);
        linear_forward(c.x.data(), w, m.row_parallel ? zero.data() : b, c.y.data(), R, m.in, m.out, m.relu);
    }
    if (m.row_parallel) t.partial = c.y, t.partial_module = static_cast<int>(k), t.partial_forward = true, t.act.clear();
    else t.act = c.y;
}

void Executor::tp_backward(const Op& op) {
    const size_t k = static_cast<size_t>(tp_module(op));
    const TpModule& m = tp_->modules[k];
    const int64_t R = tp_->rows;
    TpMicro& t = tp_micro(op);
    TpMicro::Cache& c = t.caches.at(k);
    if (k + 1 == tp_->modules.size()) {
        t.grad.resize(c.y.size());
        for (size_t i = 0; i < c.y.size(); ++i)
            t.grad[i] = (c.y[i] - mlp_target(a_.seed, rank_, op.step, op.micro, static_cast<int64_t>(i))) / static_cast<float>(R);
    }
    if (static_cast<int64_t>(t.grad.size()) != R * m.out) broken(op, "runs before its output's gradient is there");
    std::vector<float> gx(static_cast<size_t>(R * m.in));
    std::vector<float> gw(static_cast<size_t>(numel(m.weight)), 0.0f), gb(static_cast<size_t>(numel(m.bias)), 0.0f);
    if (m.kind == TpModule::Kind::LayerNorm)
        layer_norm_backward(c.xhat.data(), c.rstd.data(), work_[m.weight].as<float>(), t.grad.data(), gw.data(), gb.data(), gx.data(), R, m.in);
    else
        linear_backward(c.x.data(), work_[m.weight].as<float>(), c.y.data(), t.grad.data(), gw.data(), gb.data(), gx.data(), R, m.in, m.out, m.relu);
    add_gradient(m.weight, gw, op.micro);
    add_gradient(m.bias, gb, op.micro);
    if (m.column_parallel) t.partial = std::move(gx), t.partial_module = static_cast<int>(k), t.partial_forward = false, t.grad.clear();
    else t.grad = std::move(gx);
}

// What this rank puts into a tensor-group all_reduce: the partial sums the last module computed.
const std::vector<float>& Executor::tp_outgoing(const Op& op) {
    TpMicro& t = tp_micro(op);
    if (t.partial_module < 0 || static_cast<int64_t>(t.partial.size()) != op.elements)
        broken(op, "all_reduces " + std::to_string(op.elements) + " elements; the module before it left " + std::to_string(t.partial.size()));
    return t.partial;
}

// The sum, checked element by element against the reference model's for this data rank and micro
// batch (within 1e-5 of its largest magnitude), then taken: the row-parallel output plus its bias,
// or the column-parallel input gradient.
void Executor::tp_received(const Op& op, const void* got, Check& c) {
    TpMicro& t = tp_micro(op);
    std::vector<float> v(static_cast<size_t>(op.elements));
    unpack_floats(got, v.data(), op.dtype, op.elements);
    const size_t k = static_cast<size_t>(t.partial_module);
    if (verify_) {
        const TensorMlpReference& r = tp_reference(op.step);
        const auto& want = t.partial_forward ? r.forward_sum(k, rank_, op.micro) : r.backward_sum(k, rank_, op.micro);
        if (want.size() != v.size()) broken(op, "the reference's sum has " + std::to_string(want.size()) + " elements");
        float scale = 0.0f;
        for (float w : want) scale = std::max(scale, std::fabs(w));
        for (size_t i = 0; i < v.size(); ++i)
            c.see(std::fabs(static_cast<double>(v[i]) - want[i]) <= 1e-5 * static_cast<double>(scale) + 1e-30, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "%s sum of micro batch %d, element %zu = %.9g, the reference model's %.9g",
                              t.partial_forward ? "output" : "input gradient", op.micro, i, static_cast<double>(v[i]), static_cast<double>(want[i]));
                return std::string(b);
            });
    }
    const TpModule& m = tp_->modules[k];
    if (t.partial_forward) {
        const float* b = work_[m.bias].as<float>();
        for (size_t i = 0; i < v.size(); ++i) v[i] += b[static_cast<int64_t>(i) % m.out];
        t.caches.at(k).y = v;
        t.act = std::move(v);
    } else {
        t.grad = std::move(v);
    }
    t.partial.clear();
    t.partial_module = -1;
}

// The data's own waits: a tensor-group all_reduce (an expert-group all_to_all of the MoE model)
// waits for the compute op before it (which left its data), and the compute op after it waits for
// it (it takes the result).
void Executor::plan_tp_waits() {
    if (!tp_ && !moe_ && !uly_) return;
    const auto group = tp_ ? zerosim::GroupKind::Tensor : moe_ ? zerosim::GroupKind::Expert : zerosim::GroupKind::Sequence;
    int64_t last_compute = -1, pending_sum = -1;
    for (const auto& op : s_.ops) {
        if (op.kind == OpKind::Compute && (op.compute == ComputeKind::Forward || op.compute == ComputeKind::Backward)) {
            if (pending_sum >= 0) waits_[static_cast<size_t>(op.id)].push_back(pending_sum);
            pending_sum = -1;
            last_compute = op.id;
        } else if (op.payload == zerosim::Payload::Activations && op.group == group) {
            if (last_compute < 0) broken(op, "a model collective before any compute");
            waits_[static_cast<size_t>(op.id)].push_back(last_compute);
            pending_sum = op.id;
        }
    }
}

}  // namespace detail
}  // namespace zerorun
