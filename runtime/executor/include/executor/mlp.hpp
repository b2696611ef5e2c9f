// The real model of a pipeline run (issue 29 part 4; docs/runtime.md "3D layouts"): the stages'
// Linear layers, as each stage's schedule lists its modules (the forward compute ops' `params`: a
// weight [out, in] and a bias [out], the layout of torch.nn.Linear that configs/models/reference-3d/
// pipe.json's PipelineModule builds), trained for real on hashed inputs and targets.
//
// The model: y = x W^T + b per Linear; a ReLU after every Linear except the model's last (pipe.json
// has none between its layers 6 and 7: the runtime's one difference from it, stated in
// docs/runtime.md); loss per micro batch (B samples) L = (1/B) sum_b 0.5 |y_b - t_b|^2, so
// dL/dy = (y - t) / B. Inputs x and targets t of data rank d at (step, micro) come from the
// counter-based hash of loss.hpp, so any process can produce any data rank's batch.
//
// MlpReference trains the whole model in one process exactly as the pipeline run must: every data
// rank's micro batches, the gradients summed over micro batches then over data ranks (rank order,
// fp32), averaged by 1/(data ranks x micro batches), Adam (adam_update). The executor keeps one as
// its shadow (every received activation, activation gradient, reduced gradient and gathered weight is
// checked against it) and the tests compare the final weights of every rank against one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "executor/loss.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

// One Linear of a stage: its weight's and bias's indices in that stage's parameter list.
struct MlpLinear {
    int weight = -1, bias = -1;
    int64_t in = 0, out = 0;
    std::string weight_name, bias_name;
};

// The whole model, stage by stage (stage k's layers in forward order), and the micro batch.
struct PipelineMlp {
    std::vector<std::vector<MlpLinear>> stages;
    int64_t micro_batch = 1;
    int64_t input_width() const { return stages.front().front().in; }
    int64_t output_width() const { return stages.back().back().out; }
    // Whether the layer (stage, k) is followed by a ReLU: every Linear but the model's last.
    bool relu_after(size_t stage, size_t k) const { return stage + 1 < stages.size() || k + 1 < stages[stage].size(); }
};

// The Linear layers of one stage's program: its first micro batch's forward compute ops in order,
// each with parameters {weight [out, in], bias [out]}, each layer's input the previous one's output.
// An error (field "pipeline") says why the stage is not such an MLP.
zerosim::Result<std::vector<MlpLinear>> mlp_stage_layers(const zerosim::Schedule& s);
// The model from every stage's program (stage order); checks the stages chain (stage k's output
// width is stage k+1's input width) and that every activation send and receive of each program has
// micro_batch x the width it carries.
zerosim::Result<PipelineMlp> pipeline_mlp(const std::vector<const zerosim::Schedule*>& stages);

// Initial weight element i of a parameter (by name, so every stage and the reference agree):
// loss.hpp's initial_weight scaled by 1/sqrt(fan_in), so activations stay of order one.
float mlp_initial_weight(uint64_t seed, const std::string& name, int64_t i, int64_t fan_in);
// Element i (sample-major) of data rank d's input / target batch at (step, micro).
float mlp_input(uint64_t seed, int data_rank, int step, int micro, int64_t i);
float mlp_target(uint64_t seed, int data_rank, int step, int micro, int64_t i);

// One Linear on a batch of B rows (row-major): forward z = x W^T + b, then ReLU in place when
// `relu` (z keeps the activation, whose sign is the ReLU's mask in backward).
void linear_forward(const float* x, const float* w, const float* b, float* z, int64_t B, int64_t in, int64_t out, bool relu);
// Backward from gy = dL/d(output): masked by the output's sign when `relu`; gw += gz^T x,
// gb += sum_b gz, gx = gz W (gx may be null at the model's input).
void linear_backward(const float* x, const float* w, const float* y, const float* gy, float* gw, float* gb, float* gx,
                     int64_t B, int64_t in, int64_t out, bool relu);

// The single-process training of the whole model (see the top of this file).
class MlpReference {
  public:
    MlpReference(const PipelineMlp& mlp, uint64_t seed, int data_ranks, int64_t grad_accum, float lr);
    // Step `step`'s micro batches on the current weights: every data rank's forward and backward.
    // Needs updates() == step (the weights after `step` updates).
    void compute(int step);
    // compute(step) if not done, then Adam on the averaged gradients.
    void update(int step);
    int updates() const { return t_; }
    int computed() const { return computed_; }

    // What compute(step) found, for the executor's checks (stage k, data rank d, micro m):
    // the activation stage k sends to k+1 (B x width), the gradient stage k+1 sends back to k,
    // and data rank d's gradient of stage k's parameter p summed over micro batches.
    const std::vector<float>& activation(size_t stage, int d, int m) const;
    const std::vector<float>& activation_grad(size_t stage, int d, int m) const;
    const std::vector<float>& local_gradient(size_t stage, int d, int p) const;
    // The same for the micro batches a reduction carries: one (stages 2 and 3 reduce each micro
    // batch's gradient) or all of the step's, in order (stages 0 and 1, at the boundary).
    const std::vector<float>& local_gradient(size_t stage, int d, int p, const std::vector<int>& micros) const;
    // Master weights (fp32) of stage k's parameter p (its place in that stage's list).
    const std::vector<float>& weights(size_t stage, int p) const { return w_.at(stage).at(static_cast<size_t>(p)); }
    // The model's loss summed over data ranks and micro batches at the last compute().
    double loss() const { return loss_; }

  private:
    void run_micro(int step, int d, int m);
    const PipelineMlp mlp_;
    uint64_t seed_;
    int data_ranks_;
    int64_t grad_accum_;
    AdamParams adam_;
    int t_ = 0, computed_ = -1;
    double loss_ = 0.0;
    // Per stage, per parameter of the stage: master weights, Adam moments.
    std::vector<std::vector<std::vector<float>>> w_, m_, v_;
    // [stage][d][m]: boundary activation and its gradient; [stage][d][p]: local gradients.
    std::vector<std::vector<std::vector<std::vector<float>>>> act_, act_grad_;
    std::vector<std::vector<std::vector<std::vector<float>>>> grad_;
    std::vector<std::vector<std::vector<std::vector<std::vector<float>>>>> micro_grad_;   // [stage][d][micro][p]
};

// The executor and the references compute each micro batch's gradient on its own and then add it
// to the step's sum, in micro-batch order (as torch adds a backward's gradient into .grad), so a
// one-micro-batch sum and the step's sum are both reproduced to the bit. `total` = the sum of
// `micro` in order.
inline void add_micro_gradients(const std::vector<std::vector<float>>& micro, std::vector<float>& total) {
    for (size_t m = 0; m < micro.size(); ++m)
        for (size_t i = 0; i < total.size(); ++i) total[i] = m == 0 ? 0.0f + micro[m][i] : total[i] + micro[m][i];
}

}  // namespace zerorun
