// A pipeline stage of the real MLP (executor/mlp.hpp; docs/runtime.md "3D layouts"): forward and
// backward of the stage's Linear layers on the activations received from the previous stage, the
// activation gradients sent back to it, and the weight gradients ZeRO then reduces over the stage's
// data-parallel group. DeepSpeed v0.14.2's pipeline engine runs these per instruction of its 1F1B
// TrainSchedule (runtime/pipe/engine.py _exec_forward_pass ~709, _exec_backward_pass ~803-838,
// _exec_send_activations ~1054, _exec_recv_activations ~1138, _exec_send_grads ~1105,
// _exec_recv_grads ~1217, as sim/schedule/pipeline.cpp and ../shared/docs/zero-in-3d.md cite them); the IR lists those instructions in that order, and the executor only adds
// the data's own waits (plan_mlp_waits) between its compute and communication threads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::ComputeKind;
using zerosim::OpKind;

void Executor::set_pipeline_mlp() {
    mlp_ = a_.pipeline_mlp;
    if (!mlp_) return;
    mlp_stage_ = static_cast<size_t>(s_.meta.pipe_stage);
    if (mlp_stage_ >= mlp_->stages.size() || mdt() != DType::FP32)
        throw std::runtime_error("the pipeline MLP has no stage " + std::to_string(mlp_stage_) + " or the model is not fp32");
    const auto& layers = mlp_->stages[mlp_stage_];
    mlp_layer_of_.assign(s_.params.size(), -1);
    mlp_fan_in_.assign(s_.params.size(), 0);
    for (size_t n = 0; n < layers.size(); ++n) {
        for (int p : {layers[n].weight, layers[n].bias}) {
            if (p < 0 || static_cast<size_t>(p) >= s_.params.size()) throw std::runtime_error("the pipeline MLP names a parameter the stage lacks");
            mlp_fan_in_[static_cast<size_t>(p)] = layers[n].in;
        }
        mlp_layer_of_[static_cast<size_t>(layers[n].weight)] = static_cast<int>(n);
    }
    if (verify_) mlp_shadow_ = std::make_unique<MlpReference>(*mlp_, a_.seed, world_, s_.meta.grad_accum, a_.lr);
}

const std::vector<float>* Executor::real_gradient(int p, int data_rank, int step, const std::vector<int>& micros) const {
    if (mlp_shadow_) return &mlp_reference(step).local_gradient(mlp_stage_, data_rank, p, micros);
    if (tp_shadow_) return &tp_reference(step).local_gradient(tp_rank_, data_rank, p, micros);
    if (moe_shadow_) return &moe_reference(step).local_gradient(cut_group(p).members.at(static_cast<size_t>(data_rank)), p, micros);
    if (uly_shadow_) return &uly_reference(step).local_gradient(cut_group(p).members.at(static_cast<size_t>(data_rank)), p, micros);
    return nullptr;
}

void Executor::add_gradient(int p, const std::vector<float>& g, int micro) {
    if (acc_[p].empty()) acc_[p] = Buffer(mem_, MemCat::Gradients, static_cast<size_t>(numel(p)) * 4);
    float* a = acc_[p].as<float>();
    for (int64_t i = 0; i < numel(p); ++i) a[i] += g[static_cast<size_t>(i)];
    pending_[p].push_back(micro);
}

const std::vector<float>* Executor::real_weights(int p) const {
    if (mlp_shadow_) return &mlp_shadow_->weights(mlp_stage_, p);
    if (tp_shadow_) return &tp_shadow_->weights(tp_rank_, p);
    if (moe_shadow_) return &moe_shadow_->weights(grank_, p);
    if (uly_shadow_) return &uly_shadow_->weights(p);
    return nullptr;
}

bool Executor::real_update(int step) {
    if (mlp_shadow_) mlp_shadow_->update(step);
    else if (tp_shadow_) tp_shadow_->update(step);
    else if (moe_shadow_) moe_shadow_->update(step);
    else if (uly_shadow_) uly_shadow_->update(step);
    return mlp_shadow_ || tp_shadow_ || moe_shadow_ || uly_shadow_;
}

float Executor::initial_value(int p, int64_t i) const {
    if (moe_) return moe_initial_weight(*moe_, a_.seed, p, i, ep_rank_);
    if (uly_) return ulysses_initial_weight(*uly_, a_.seed, p, i);
    if (tp_) {
        const TpModule& m = tp_->modules[static_cast<size_t>(tp_module_of_[static_cast<size_t>(p)])];
        return tensor_initial_weight(*tp_, m, p == m.bias, tp_rank_, a_.seed, i);
    }
    if (!mlp_) return initial_weight(a_.seed, p, i);
    return mlp_initial_weight(a_.seed, s_.params[static_cast<size_t>(p)].name, i, mlp_fan_in_[static_cast<size_t>(p)]);
}

// The shadow of the whole model at `step` (its micro batches computed on the weights after `step`
// updates: the caller runs before this rank's optimizer step of `step`).
MlpReference& Executor::mlp_reference(int step) const {
    MlpReference& r = *mlp_shadow_;
    if (r.updates() != step) throw std::runtime_error("the pipeline MLP's reference holds " + std::to_string(r.updates()) + " updates at step " + std::to_string(step));
    if (r.computed() != step) r.compute(step);
    return r;
}

Executor::MicroBatch& Executor::micro_batch(const Op& op) {
    std::lock_guard<std::mutex> lock(micro_mu_);
    return micro_[{op.step, op.micro}];
}

void Executor::drop_micro_batch(const Op& op) {
    std::lock_guard<std::mutex> lock(micro_mu_);
    micro_.erase({op.step, op.micro});
}

// One Linear forward: its input is the stage's input (the hashed batch on stage 0, the received
// activation elsewhere) or the layer before's output.
void Executor::mlp_forward(const Op& op) {
    const int n = op.params.empty() ? -1 : mlp_layer_of_[static_cast<size_t>(op.params[0])];
    if (n < 0) broken(op, "a forward of a module that is not one of the stage's Linear layers");
    const MlpLinear& l = mlp_->stages[mlp_stage_][static_cast<size_t>(n)];
    const int64_t B = mlp_->micro_batch;
    MicroBatch& mb = micro_batch(op);
    if (n == 0) {
        mb.xs.clear();
        if (mlp_stage_ == 0) {
            std::vector<float> x(static_cast<size_t>(B * l.in));
            for (size_t i = 0; i < x.size(); ++i) x[i] = mlp_input(a_.seed, rank_, op.step, op.micro, static_cast<int64_t>(i));
            mb.xs.push_back(std::move(x));
        } else {
            if (mb.received_activation.empty()) broken(op, "the stage's first layer runs before micro batch " + std::to_string(op.micro) + "'s activation arrived");
            mb.xs.push_back(mb.received_activation);
        }
    }
    if (mb.xs.size() != static_cast<size_t>(n) + 1) broken(op, "layer " + std::to_string(n) + " runs out of order");
    std::vector<float> z(static_cast<size_t>(B * l.out));
    linear_forward(mb.xs.back().data(), work_[l.weight].as<float>(), work_[l.bias].as<float>(), z.data(), B, l.in, l.out,
                   mlp_->relu_after(mlp_stage_, static_cast<size_t>(n)));
    mb.xs.push_back(std::move(z));
}

// One Linear backward: the gradient of its output is the loss's (the model's last layer), the
// received one (the stage's last layer elsewhere) or the layer after's input gradient. Weight
// gradients go to the local accumulators ZeRO reduces; the stage's input gradient is what
// SendGrad carries back.
void Executor::mlp_backward(const Op& op) {
    const int n = op.params.empty() ? -1 : mlp_layer_of_[static_cast<size_t>(op.params[0])];
    if (n < 0) broken(op, "a backward of a module that is not one of the stage's Linear layers");
    const auto& layers = mlp_->stages[mlp_stage_];
    const MlpLinear& l = layers[static_cast<size_t>(n)];
    const int64_t B = mlp_->micro_batch;
    const bool last_layer = static_cast<size_t>(n) + 1 == layers.size();
    MicroBatch& mb = micro_batch(op);
    if (mb.xs.size() != layers.size() + 1) broken(op, "a backward before the micro batch's forward");
    if (last_layer) {
        if (mlp_stage_ + 1 == mlp_->stages.size()) {
            const auto& y = mb.xs.back();
            mb.grad.resize(y.size());
            for (size_t i = 0; i < y.size(); ++i)
                mb.grad[i] = (y[i] - mlp_target(a_.seed, rank_, op.step, op.micro, static_cast<int64_t>(i))) / static_cast<float>(B);
        } else {
            if (mb.received_grad.empty()) broken(op, "the stage's last layer runs backward before micro batch " + std::to_string(op.micro) + "'s gradient arrived");
            mb.grad = mb.received_grad;
        }
    } else if (mb.next_backward != n + 1) {
        broken(op, "layer " + std::to_string(n) + " runs backward out of order");
    }
    const bool input_grad = n > 0 || mlp_stage_ > 0;
    std::vector<float> gx(input_grad ? static_cast<size_t>(B * l.in) : 0);
    std::vector<float> gw(static_cast<size_t>(numel(l.weight)), 0.0f), gb(static_cast<size_t>(numel(l.bias)), 0.0f);
    linear_backward(mb.xs[n].data(), work_[l.weight].as<float>(), mb.xs[n + 1].data(), mb.grad.data(), gw.data(), gb.data(),
                    input_grad ? gx.data() : nullptr, B, l.in, l.out, mlp_->relu_after(mlp_stage_, static_cast<size_t>(n)));
    add_gradient(l.weight, gw, op.micro);
    add_gradient(l.bias, gb, op.micro);
    mb.grad = std::move(gx);
    mb.next_backward = n;
    if (n == 0 && mlp_stage_ == 0) drop_micro_batch(op);   // nothing goes back from the first stage
}

// What this rank sends in an activation message: the stage's output toward the next stage, its
// input's gradient toward the previous one.
const std::vector<float>& Executor::mlp_outgoing(const Op& op) {
    MicroBatch& mb = micro_batch(op);
    const bool forward = op.peer > grank_;
    if (forward && mb.xs.size() != mlp_->stages[mlp_stage_].size() + 1) broken(op, "sends micro batch " + std::to_string(op.micro) + "'s activation before its forward");
    if (!forward && mb.next_backward != 0) broken(op, "sends micro batch " + std::to_string(op.micro) + "'s gradient before its backward");
    const auto& v = forward ? mb.xs.back() : mb.grad;
    if (static_cast<int64_t>(v.size()) != op.elements) broken(op, std::to_string(op.elements) + " elements; the tensor has " + std::to_string(v.size()));
    return v;
}

void Executor::mlp_sent(const Op& op) {
    if (op.peer < grank_) drop_micro_batch(op);   // the gradient went back: the micro batch is done here
}

// A received activation or gradient: kept for the compute that needs it, and checked element by
// element against what the shadow model says the sender computed (the same data rank, step and
// micro batch), within 1e-5 of the message's largest magnitude.
void Executor::mlp_received(const Op& op, const void* got, Check& c) {
    std::vector<float> v(static_cast<size_t>(op.elements));
    unpack_floats(got, v.data(), op.dtype, op.elements);
    if (verify_) {
        const MlpReference& r = mlp_reference(op.step);
        const bool activation = op.peer < grank_;
        const auto& want = activation ? r.activation(mlp_stage_ - 1, rank_, op.micro) : r.activation_grad(mlp_stage_, rank_, op.micro);
        if (want.size() != v.size()) broken(op, "the reference's tensor has " + std::to_string(want.size()) + " elements");
        float scale = 0.0f;
        for (float w : want) scale = std::max(scale, std::fabs(w));
        const double tol = 1e-5 * static_cast<double>(scale) + 1e-30;
        for (size_t i = 0; i < v.size(); ++i)
            c.see(std::fabs(static_cast<double>(v[i]) - want[i]) <= tol, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "%s of micro batch %d, element %zu = %.9g, the reference model's %.9g", activation ? "activation" : "activation gradient",
                              op.micro, i, static_cast<double>(v[i]), static_cast<double>(want[i]));
                return std::string(b);
            });
    }
    MicroBatch& mb = micro_batch(op);
    (op.peer < grank_ ? mb.received_activation : mb.received_grad) = std::move(v);
}

// The data's own waits, beside the IR's (which has none between a pipeline message and the compute
// of its micro batch: DeepSpeed runs both in one thread, instruction by instruction): a stage's
// first forward waits for its received activation, its last backward for its received gradient,
// an activation send for the last forward, a gradient send for the first backward.
void Executor::plan_mlp_waits() {
    if (!mlp_) return;
    const auto& layers = mlp_->stages[mlp_stage_];
    std::map<std::tuple<int, int, int>, int64_t> last;   // (step, micro, role) -> op
    enum { RecvAct, RecvGrad, LastForward, FirstBackward };
    for (const auto& op : s_.ops) {
        auto wait_for = [&](int role) {
            auto it = last.find({op.step, op.micro, role});
            if (it == last.end()) broken(op, "has no earlier op of its micro batch to wait for");
            waits_[static_cast<size_t>(op.id)].push_back(it->second);
        };
        if (op.kind == OpKind::Compute && !op.params.empty() && (op.compute == ComputeKind::Forward || op.compute == ComputeKind::Backward)) {
            const int n = mlp_layer_of_[static_cast<size_t>(op.params[0])];
            const bool fwd = op.compute == ComputeKind::Forward;
            if (fwd && n == 0 && mlp_stage_ > 0) wait_for(RecvAct);
            if (!fwd && n + 1 == static_cast<int>(layers.size()) && mlp_stage_ + 1 < mlp_->stages.size()) wait_for(RecvGrad);
            if (fwd && n + 1 == static_cast<int>(layers.size())) last[{op.step, op.micro, LastForward}] = op.id;
            if (!fwd && n == 0) last[{op.step, op.micro, FirstBackward}] = op.id;
        } else if (op.payload == zerosim::Payload::Activations && (op.kind == OpKind::Send || op.kind == OpKind::Recv)) {
            const bool toward_next = op.peer > grank_;
            if (op.kind == OpKind::Recv) last[{op.step, op.micro, toward_next ? RecvGrad : RecvAct}] = op.id;
            else wait_for(toward_next ? LastForward : FirstBackward);
        }
    }
}

}  // namespace detail
}  // namespace zerorun
