// Compute segments: real GEMMs for the segment's FLOPs, and the loss's gradients in backward.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::ComputeKind;

void ComputeHandler::run(const Op& op, OpRecord& rec) {
    if (op.kind != zerosim::OpKind::Compute) broken(op, "a compute payload on a collective");
    switch (op.compute) {
        case ComputeKind::Forward:
            x.require_current(op);
            rec.flops_run = gemm_.run(op.flops);
            if (x.mlp_) x.mlp_forward(op);
            else if (x.tp_) x.tp_forward(op);
            else if (x.moe_) x.moe_compute(op, true);
            else if (x.uly_) x.uly_compute(op, true);
            rec.check = "none";
            break;
        case ComputeKind::Backward:
            x.require_current(op);
            rec.flops_run = gemm_.run(op.flops);
            if (x.mlp_) x.mlp_backward(op);
            else if (x.tp_) x.tp_backward(op);
            else if (x.moe_) x.moe_compute(op, false);
            else if (x.uly_) x.uly_compute(op, false);
            else x.backward_gradients(op);
            rec.check = "none";
            break;
        case ComputeKind::OptimizerStep:
            // The optimizer's state traffic as GEMM work, after the update.
            x.optimizer_step(op);
            rec.flops_run = gemm_.run(op.flops);
            rec.check = "none";
            break;
        case ComputeKind::None:
            break;
    }
}

// A module may only run on weights that reflect every optimizer update: a missing gather in
// the schedule shows up here, not as silently stale training.
void Executor::require_current(const Op& op) {
    for (int p : op.params)
        if (work_version_[p] != updates_[p])
            broken(op, "parameter " + s_.params[p].name + " is used while its working copy is stale (" +
                           std::to_string(work_version_[p]) + " of " + std::to_string(updates_[p]) +
                           " updates gathered)");
}

// Real GEMM work of the segment's FLOPs times --compute-scale: square matrices of at most
// 512, repeated as needed (2 n^3 FLOPs each).
double GemmWorkspace::run(double flops) {
    double want = flops * compute_scale_;
    if (want < 2.0 * 16 * 16 * 16) return 0.0;
    constexpr int64_t kMax = 512;
    int64_t n = std::min<int64_t>(kMax, static_cast<int64_t>(std::cbrt(want / 2.0)));
    if (n_ < n) {
        size_t b = static_cast<size_t>(n * n) * 4;
        a_ = Buffer(mem_, MemCat::Workspace, b);
        b_ = Buffer(mem_, MemCat::Workspace, b);
        c_ = Buffer(mem_, MemCat::Workspace, b);
        for (int64_t i = 0; i < n * n; ++i) {
            a_.as<float>()[i] = static_cast<float>(i % 13) * 0.01f;
            b_.as<float>()[i] = static_cast<float>(i % 7) * 0.01f;
        }
        n_ = n;
    }
    using Mat = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>>;
    Mat A(a_.as<float>(), n, n), B(b_.as<float>(), n, n), C(c_.as<float>(), n, n);
    double per = 2.0 * static_cast<double>(n * n * n);
    int64_t reps = std::max<int64_t>(1, std::llround(want / per));
    for (int64_t r = 0; r < reps; ++r) C.noalias() = A * B;
    return per * static_cast<double>(reps);
}

// The loss's gradient w - t, from this rank's working copy, added to the local accumulator.
// A tied parameter appears in several modules; its gradient is one per micro-step.
void Executor::backward_gradients(const Op& op) {
    int64_t key = static_cast<int64_t>(op.step) * 1000000 + op.micro;
    for (int p : op.params) {
        if (computed_at_[p] == key) continue;
        computed_at_[p] = key;
        if (acc_[p].empty()) acc_[p] = Buffer(mem_, MemCat::Gradients, static_cast<size_t>(numel(p)) * 4);
        float* g = acc_[p].as<float>();
        const void* w = work_[p].data();
        for (int64_t i = 0; i < numel(p); ++i)
            g[i] += static_cast<float>(load_element(w, mdt(), i)) - target(a_.seed, cut_group(p).index, op.step, op.micro, p, i);
        pending_[p].push_back(op.micro);
    }
}

}  // namespace detail
}  // namespace zerorun
