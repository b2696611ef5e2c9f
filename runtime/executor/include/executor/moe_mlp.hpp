// The real model of an expert-parallel run (issue 29 part 4; docs/runtime.md "3D layouts"): as
// configs/models/reference-3d/moe.json lays it out, dense Linears, a top-1 gate, this rank's local
// experts (each Linear -> ReLU -> Linear), dense Linears; real tokens routed through the IR's
// dispatch and combine all_to_alls over the expert group.
//
// DeepSpeed v0.14.2's MoE with drop_tokens (moe/sharded_moe.py top1gating ~216, MOELayer.forward
// ~545-559): logits = x Wg^T, softmax, each token to its argmax expert; each expert takes at most
// `capacity` tokens, the rest are dropped (their MoE output is zero); the dispatched tensor is
// [experts, capacity, hidden] whatever the routing (so the IR's fixed size is DeepSpeed's: capacity
// x experts x hidden), the all_to_all sends expert block e to the rank holding e; the experts run
// on what they received; the combine all_to_all sends their outputs back, and each token's output is
// its gate probability times its expert's output. The runtime's own choices, stated: a token's slot
// is its order among the tokens routed to its expert (DeepSpeed's default use_rts picks them at
// random), no auxiliary load-balancing loss, no activation around the dense Linears, loss
// (1/T) sum_t 0.5 |y_t - target_t|^2 over the T = micro batch x sequence tokens.
//
// MoeMlpReference runs every rank of the world in one process (the all_to_alls as copies between
// them), each rank's copy of the parameters it holds, dense gradients averaged over the world and
// experts' over their expert-data group (DeepSpeed's reduction of allreduce=False parameters), Adam.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "executor/loss.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

struct MoeLinear {
    int weight = -1, bias = -1;
    int64_t in = 0, out = 0;
    std::string weight_name, bias_name;
};

struct MoeMlp {
    std::vector<MoeLinear> pre, post;                  // dense Linears before the gate and after the combine
    int gate = -1;                                     // the gate's weight [experts, hidden]
    std::string gate_name;
    std::vector<std::pair<MoeLinear, MoeLinear>> experts;   // this rank's local experts
    int64_t num_experts = 0, capacity = 0, hidden = 0, tokens = 0;
    int ep = 1;                                        // the expert group's size
    int64_t local() const { return num_experts / ep; }
    int64_t block() const { return local() * capacity * hidden; }   // all_to_all elements per member
};

// The model from this rank's program: its first micro batch's forward ops and the expert-group
// all_to_alls among them (the first two are dispatch and combine), whose size must be experts x
// capacity x hidden. Error field "moe".
zerosim::Result<MoeMlp> moe_mlp(const zerosim::Schedule& s);

// Initial weight element i of parameter p: by name, a local expert's by its global number (so
// every rank holding expert e starts from the same values), times 1/sqrt(fan_in).
float moe_initial_weight(const MoeMlp& m, uint64_t seed, int p, int64_t i, int ep_rank);

// One rank's micro batch, module by module; weights and gradient accumulators by the rank's
// parameter index. The executor runs each at its op (the all_to_alls fill expert_in, combined,
// g_expert_out and g_dispatch), the reference for every rank.
struct MoeMicro {
    std::vector<std::vector<float>> pre_x;   // the input, then each pre Linear's output (the last: the MoE input)
    std::vector<float> probs;                // [T, E] softmax
    std::vector<int64_t> expert, slot;       // per token; slot -1: dropped
    std::vector<float> dispatch;             // [E, C, H]: sent by the dispatch all_to_all
    std::vector<float> expert_in;            // [ep, L, C, H]: received
    std::vector<std::vector<float>> hidden;  // per local expert: [ep*C, inner] after the ReLU
    std::vector<float> expert_out;           // [ep, L, C, H]: sent back by the combine all_to_all
    std::vector<float> combined;             // [E, C, H]: received
    std::vector<std::vector<float>> post_x;  // the MoE output, then each post Linear's output
    std::vector<float> grad;                 // the gradient flowing back through the dense Linears
    std::vector<float> g_prob;               // per token: dL/d(its gate probability)
    std::vector<float> g_combined;           // [E, C, H]: sent by the backward's first all_to_all
    std::vector<float> g_expert_out;         // [ep, L, C, H]: received
    std::vector<std::vector<float>> g_hidden;  // per local expert
    std::vector<float> g_expert_in;          // [ep, L, C, H]: sent back
    std::vector<float> g_dispatch;           // [E, C, H]: received
    double loss = 0.0;
};

using MoeParams = std::vector<float*>;       // by parameter index
void moe_pre_forward(const MoeMlp& m, const MoeParams& w, size_t k, MoeMicro& s);   // pre Linear k (pre_x[0] set)
void moe_gate_forward(const MoeMlp& m, const MoeParams& w, MoeMicro& s);            // gate, routing, dispatch
void moe_expert_forward(const MoeMlp& m, const MoeParams& w, size_t l, int layer, MoeMicro& s);
void moe_post_forward(const MoeMlp& m, const MoeParams& w, size_t k, MoeMicro& s);  // k == 0: the combine first
// k == last: the loss's gradient first (targets [T, out]); k == 0: the combine's backward after.
void moe_post_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t k, const std::vector<float>& target, MoeMicro& s);
void moe_expert_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t l, int layer, MoeMicro& s);
void moe_gate_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, MoeMicro& s);   // dispatch and gate
void moe_pre_backward(const MoeMlp& m, const MoeParams& w, const MoeParams& g, size_t k, MoeMicro& s);

class MoeMlpReference {
  public:
    // `models[g]`: global rank g's model (its local experts); expert groups of ep consecutive
    // ranks, expert-data groups the ranks g, g + ep, ...
    MoeMlpReference(const std::vector<MoeMlp>& models, uint64_t seed, int64_t grad_accum, float lr);
    void compute(int step);
    void update(int step);
    int updates() const { return t_; }
    int computed() const { return computed_; }
    // At the last compute(): rank g's micro batch m, its gradient of parameter p (micro batches summed).
    const MoeMicro& micro(int g, int m) const { return micro_.at(static_cast<size_t>(g)).at(static_cast<size_t>(m)); }
    const std::vector<float>& local_gradient(int g, int p) const { return grad_.at(static_cast<size_t>(g)).at(static_cast<size_t>(p)); }
    const std::vector<float>& local_gradient(int g, int p, const std::vector<int>& micros) const;   // as MlpReference's
    const std::vector<float>& weights(int g, int p) const { return w_.at(static_cast<size_t>(g)).at(static_cast<size_t>(p)); }
    double loss() const { return loss_; }

  private:
    std::vector<MoeMlp> models_;
    uint64_t seed_;
    int64_t grad_accum_;
    AdamParams adam_;
    int t_ = 0, computed_ = -1;
    double loss_ = 0.0;
    std::vector<std::vector<std::vector<float>>> w_, m_, v_, grad_;   // [rank][param]
    std::vector<std::vector<bool>> is_expert_;                        // [rank][param]
    std::vector<std::vector<MoeMicro>> micro_;                        // [rank][micro]
    std::vector<std::vector<std::vector<std::vector<float>>>> micro_grad_;   // [rank][micro][param]
};

}  // namespace zerorun
