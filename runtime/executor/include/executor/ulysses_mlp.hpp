// The real model of a Ulysses run (issue 29 part 4; docs/runtime.md "3D layouts"): as
// configs/models/reference-3d/ulysses.json lays it out, LayerNorm -> qkv Linear -> attention over
// the whole sequence -> o Linear + residual -> Linear, each rank holding S/P consecutive positions of
// its samples; real q, k and v through the IR's sequence-group all_to_alls.
//
// DeepSpeed v0.14.2 sequence/layer.py DistributedAttention.forward (~99-106) calls single_all_to_all
// (~32) on q, k and v (each rank's positions, every head -> every position, its heads), runs the local
// attention, and one more on the output (back to its positions, every head); the backward's four
// carry the output's gradient (to the heads) and q's, k's and v's (back to the positions). The
// runtime's layout of a block (its own): block j of a rank's send buffer is [B, S/P, heads/P, d] for
// member j's heads (forward) or member j's positions (backward); the attention is non-causal scaled
// dot-product softmax per head, computed when the output's all_to_all stages its buffer (the IR has
// no compute op for the parameterless attention), its backward when the first gradient all_to_all
// after the output's does. Loss per rank over its positions: (1/(B S/P)) sum 0.5 |y - t|^2.
//
// UlyssesMlpReference runs every rank of the world in one process (the all_to_alls as copies), one
// copy of the (replicated) parameters, the gradients summed over the sequence x data group (ZeRO's)
// and averaged by its size, Adam.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "executor/loss.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

struct UlyssesMlp {
    int ln_w = -1, ln_b = -1, qkv_w = -1, qkv_b = -1, o_w = -1, o_b = -1, head_w = -1, head_b = -1;
    std::vector<std::string> names;   // by parameter index
    int64_t hidden = 0, out = 0, heads = 0, head_size = 0, batch = 1, seq = 0;
    int sp = 1;
    int64_t local_rows() const { return batch * (seq / sp); }
    int64_t block() const { return batch * (seq / sp) * (heads / sp) * head_size; }   // all_to_all elements per member
};

// The model from a rank's program and the attention's heads (the model file's "attention" entry):
// ln, qkv (3 x hidden), four sequence-group all_to_alls, o, head. Error field "attention".
zerosim::Result<UlyssesMlp> ulysses_mlp(const zerosim::Schedule& s, int64_t heads, int64_t head_size);

float ulysses_initial_weight(const UlyssesMlp& m, uint64_t seed, int p, int64_t i);

// One rank's micro batch; the n-th all_to_all sends send[n] and fills recv[n].
struct UlyssesMicro {
    std::vector<float> x, ln_y, xhat, rstd, qkv, attn, o_y, y, grad, g_attn_local, g_x;
    std::vector<float> q, k, v, probs, out;   // head-sharded, the whole sequence: [B, S, heads/P, d]; probs [B, heads/P, S, S]
    std::vector<float> send[8], recv[8];
    double loss = 0.0;
};

using UlyssesParams = std::vector<float*>;
// ln and qkv on the rank's positions; q, k, v packed for the first three all_to_alls.
void ulysses_pre_forward(const UlyssesMlp& m, const UlyssesParams& w, int module, UlyssesMicro& s);
// The attention on the received q, k, v (their heads, every position); the output packed back.
void ulysses_attention_forward(const UlyssesMlp& m, UlyssesMicro& s);
// o + residual (module 2, unpacking the received output first), head (module 3).
void ulysses_post_forward(const UlyssesMlp& m, const UlyssesParams& w, int module, UlyssesMicro& s);
// head (module 3, the loss's gradient first), o (module 2; the output's gradient packed after).
void ulysses_post_backward(const UlyssesMlp& m, const UlyssesParams& w, const UlyssesParams& g, int module, const std::vector<float>& target,
                           UlyssesMicro& s);
// The attention's backward on the received output gradient; q's, k's, v's gradients packed.
void ulysses_attention_backward(const UlyssesMlp& m, UlyssesMicro& s);
// qkv (module 1, from the received gradients), ln (module 0, the residual's gradient added).
void ulysses_pre_backward(const UlyssesMlp& m, const UlyssesParams& w, const UlyssesParams& g, int module, UlyssesMicro& s);

class UlyssesMlpReference {
  public:
    // Ranks of the world: sequence groups of sp consecutive ranks; rank r's data is its place in
    // ZeRO's group (the world here), its positions chunk r % sp.
    UlyssesMlpReference(const UlyssesMlp& m, int world, uint64_t seed, int64_t grad_accum, float lr);
    void compute(int step);
    void update(int step);
    int updates() const { return t_; }
    int computed() const { return computed_; }
    const UlyssesMicro& micro(int r, int mi) const { return micro_.at(static_cast<size_t>(r)).at(static_cast<size_t>(mi)); }
    const std::vector<float>& local_gradient(int r, int p) const { return grad_.at(static_cast<size_t>(r)).at(static_cast<size_t>(p)); }
    const std::vector<float>& local_gradient(int r, int p, const std::vector<int>& micros) const;   // as MlpReference's
    const std::vector<float>& weights(int p) const { return w_.at(static_cast<size_t>(p)); }
    double loss() const { return loss_; }

  private:
    UlyssesMlp m_model_;
    int world_;
    uint64_t seed_;
    int64_t grad_accum_;
    AdamParams adam_;
    int t_ = 0, computed_ = -1;
    double loss_ = 0.0;
    std::vector<std::vector<float>> w_, m_, v_;        // [param]
    std::vector<std::vector<std::vector<float>>> grad_;  // [rank][param]
    std::vector<std::vector<UlyssesMicro>> micro_;       // [rank][micro]
    std::vector<std::vector<std::vector<std::vector<float>>>> micro_grad_;   // [rank][micro][param]
};

// Rank r's input and target at (step, micro): its samples' positions r % sp.
std::vector<float> ulysses_input(const UlyssesMlp& m, uint64_t seed, int r, int step, int micro);
std::vector<float> ulysses_target(const UlyssesMlp& m, uint64_t seed, int r, int step, int micro);

}  // namespace zerorun
