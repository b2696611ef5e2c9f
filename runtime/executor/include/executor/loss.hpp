// The training problem zerorun solves, chosen so its exact result can be computed independently.
//
// Rank r's loss at (step s, micro-step m) is L = 0.5 * sum_i (w_i - t_{r,s,m,i})^2 over every
// parameter element, with deterministic targets t. Its gradient is w - t, computed from the
// rank's working copy of the parameters (so a wrong gather shows in the gradients), and the
// averaged gradient over ranks and micro-steps is w - mean(t). Initial weights and targets come
// from a counter-based hash of (seed, rank, step, micro, parameter, element), so any process can
// produce any rank's values without communication.
//
// Reference is the single-process computation of the same training run (full vectors, no ZeRO):
// the tests compare every stage's final weights against it, and the executor keeps one as a
// shadow to check every gathered or broadcast parameter.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/ir.hpp"

namespace zerorun {

using zerosim::DType;

struct LossSpec {
    uint64_t seed = 1;
    int world = 1;
    int64_t grad_accum = 1;
    DType model_dtype = DType::FP32;   // the working copy (forward/backward)
    DType comm_dtype = DType::FP32;    // gradients on the wire
    float lr = 1e-3f;
};

// The counter-based hash every synthetic value of the runtime comes from (SplitMix64's finaliser),
// so that any process can produce any rank's weights, targets and messages.
uint64_t splitmix64(uint64_t x);

float initial_weight(uint64_t seed, int param, int64_t i);
float target(uint64_t seed, int rank, int step, int micro, int param, int64_t i);
// What a non-root rank holds before the engine-start broadcast: never the real weights.
float garbage_weight(int rank, int param, int64_t i);

struct AdamParams {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
};
// torch.optim.Adam (no weight decay) on n elements; g is the averaged gradient; t counts updates
// from 1. One function for the executor and the reference, so they agree to the bit.
void adam_update(float* w, float* m, float* v, const float* g, int64_t n, int t, const AdamParams& a);

// The gradient a rank contributes for one element: sum over micro-steps of (w - t), in fp32, in
// micro order, exactly as the executor accumulates it.
inline float local_gradient(const LossSpec& s, float w, int rank, int step, const std::vector<int>& micros, int param,
                            int64_t i) {
    float acc = 0.0f;
    for (int m : micros) acc += w - target(s.seed, rank, step, m, param, i);
    return acc;
}

// Adds b to a as a reduction in type t does: in fp32, rounded back to t (16-bit types).
double reduce_add(DType t, double a, double b);

class Reference {
  public:
    Reference(const std::vector<zerosim::ScheduleParam>& params, const LossSpec& spec);
    // One optimizer step: every rank's gradients summed rank by rank in the communication dtype
    // (as the boundary reduction of stages 0/1 does), averaged, then Adam on the full vector.
    void step(int step_index);
    // fp32 master weights and the working copy value (master rounded to the model dtype).
    const std::vector<std::vector<float>>& master() const { return w_; }
    float working(int p, int64_t i) const;
    int updates() const { return t_; }
    // Parameter p's gradient is averaged over `world` ranks (0..world-1's targets) instead of
    // spec.world: MoE experts, averaged over their expert-data group.
    void set_world(int p, int world) { world_.at(static_cast<size_t>(p)) = world; }

  private:
    std::vector<int64_t> numel_;
    std::vector<int> world_;   // per parameter
    LossSpec spec_;
    AdamParams adam_;
    std::vector<std::vector<float>> w_, m_, v_;
    int t_ = 0;
};

}  // namespace zerorun
