// The real model of a tensor-parallel run (issue 29 part 4; docs/runtime.md "3D layouts"): the
// modules of one tensor rank's program in forward order, as configs/models/reference-3d/tensor.json
// lays them out (LayerNorm -> column-parallel Linear -> row-parallel Linear -> Linear), each rank
// holding its shard of the split ones, trained for real on hashed inputs and targets.
//
// Megatron's rule, which DeepSpeed's mpu-based runs follow (../shared/docs/zero-in-3d.md "Tensor
// parallelism"): a row-parallel Linear all_reduces its output over the tensor group in forward (the
// partial sums x_r W_r^T of its input shard), its bias added once after the sum; a column-parallel
// Linear all_reduces its input's gradient in backward (the partial sums gy_r W_r). The program says
// which is which: the module whose forward a tensor-group all_reduce follows is row-parallel, the one
// whose backward one follows column-parallel. Modules: two 1-D parameters of one width = LayerNorm
// (eps 1e-5, over the last dimension); a weight [out, in] and a bias [out] = Linear. A ReLU after
// every Linear but a row-parallel one and the model's last (tensor.json's model has a gelu there).
// Loss per micro batch of R rows (micro batch x sequence): (1/R) sum_r 0.5 |y_r - t_r|^2.
//
// TensorMlpReference trains the model in one process: every data rank's micro batches, every tensor
// rank's shards, the partial sums added in tensor-rank order, the gradients summed over micro
// batches then data ranks and averaged, Adam (adam_update).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "executor/loss.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

struct TpModule {
    enum class Kind { LayerNorm, Linear } kind = Kind::Linear;
    int weight = -1, bias = -1;   // indices in the rank's parameter list
    int64_t in = 0, out = 0;      // this rank's shapes (LayerNorm: in == out)
    bool row_parallel = false;    // forward: all_reduce of the output's partial sums, then the bias
    bool column_parallel = false; // backward: all_reduce of the input gradient's partial sums
    bool relu = false;
    std::string weight_name, bias_name;
};

struct TensorMlp {
    std::vector<TpModule> modules;
    int64_t rows = 1;   // rows of a micro batch's activation: micro batch x sequence
    int tp = 1;
    // Whether parameter (module, bias?) is cut over the tensor group (else every tensor rank holds
    // the same): a column-parallel Linear's weight and bias, a row-parallel one's weight.
    bool split(const TpModule& m, bool bias) const { return m.column_parallel || (m.row_parallel && !bias); }
};

// The model from one tensor rank's program (every rank of the group has the same shapes); checks
// that each tensor-group all_reduce carries rows x the width it sums. Error field "tensor".
zerosim::Result<TensorMlp> tensor_mlp(const zerosim::Schedule& s);

// Initial weight element i of parameter (module m, bias?) on tensor rank r: split parameters by
// name and r, the others by name, times 1/sqrt(the whole layer's fan-in).
float tensor_initial_weight(const TensorMlp& t, const TpModule& m, bool bias, int tp_rank, uint64_t seed, int64_t i);

// LayerNorm over rows of width n (eps 1e-5): forward keeps x-hat and 1/sigma per row for backward.
void layer_norm_forward(const float* x, const float* g, const float* b, float* y, float* xhat, float* rstd, int64_t R, int64_t n);
void layer_norm_backward(const float* xhat, const float* rstd, const float* g, const float* gy, float* gg, float* gb, float* gx,
                         int64_t R, int64_t n);

class TensorMlpReference {
  public:
    TensorMlpReference(const TensorMlp& t, uint64_t seed, int data_ranks, int64_t grad_accum, float lr);
    void compute(int step);   // needs updates() == step
    void update(int step);    // compute(step) if not done, then Adam
    int updates() const { return t_; }
    int computed() const { return computed_; }
    // At the last compute(): the summed output of row-parallel module k (bias added) and the summed
    // input gradient of column-parallel module k, data rank d, micro m; data rank d's gradient of
    // tensor rank r's parameter p (summed over micro batches).
    const std::vector<float>& forward_sum(size_t k, int d, int m) const;
    const std::vector<float>& backward_sum(size_t k, int d, int m) const;
    const std::vector<float>& local_gradient(int r, int d, int p) const;
    const std::vector<float>& local_gradient(int r, int d, int p, const std::vector<int>& micros) const;   // as MlpReference's
    const std::vector<float>& weights(int r, int p) const { return w_.at(static_cast<size_t>(r)).at(static_cast<size_t>(p)); }
    double loss() const { return loss_; }

  private:
    void run_micro(int step, int d, int m);
    const TensorMlp t_model_;
    uint64_t seed_;
    int data_ranks_;
    int64_t grad_accum_;
    AdamParams adam_;
    int t_ = 0, computed_ = -1;
    double loss_ = 0.0;
    std::vector<std::vector<std::vector<float>>> w_, m_, v_;   // [tensor rank][param]
    std::vector<std::vector<std::vector<std::vector<float>>>> fwd_, bwd_;   // [module][d][m]
    std::vector<std::vector<std::vector<std::vector<float>>>> grad_;        // [tensor rank][d][param]
    std::vector<std::vector<std::vector<std::vector<std::vector<float>>>>> micro_grad_;   // [tensor rank][d][micro][param]
};

}  // namespace zerorun
