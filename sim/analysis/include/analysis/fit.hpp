// Does a rank fit its GPU? Model states (analysis/memory.hpp) + activations of one micro batch +
// a framework reserve, against the GPU's memory.
//
// Activations follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models" (arXiv:2205.05198), section 4.1: one transformer layer stores
// s b h (34 + 5 a s / h) bytes with 16-bit activations (s sequence length, b micro batch, h hidden
// size, a heads; no tensor or sequence parallelism). The 5 a s^2 b part is the s x s attention
// scores, softmax and dropout; FlashAttention (PyTorch SDPA, Hugging Face's default
// attn_implementation) never stores them, so zerosim counts 34 s b h per layer and says so.
// Section 4.3 adds, outside the layers, the final layer norm's and the output projection's inputs
// (2 s b h each) and the fp32 logits of the cross entropy (4 s b v): 4 s b h (1 + v / h).
// With full activation checkpointing (the paper's section 5, "full recomputation"; DeepSpeed's
// deepspeed.checkpointing.checkpoint or Hugging Face's gradient_checkpointing per layer) each layer
// keeps only its input, 2 s b h, and backward recomputes one layer at a time: 34 s b h once more.
// The count is the GPT block the paper derives it for (4h MLP with dropout). Where the model knows
// its own block (Model::activations, from the Hugging Face decoders: Llama and its relatives, the
// mixtures of experts, DeepSeek's latent attention) the same item-by-item accounting is applied to
// that block instead: each norm's input 2h, the projections' input 2h, Q, K and V at their own
// widths (grouped-query K/V narrower, MLA's latent and per-head K/V), o_proj's input, and a gated
// MLP's input 2h plus gate, up, activation and product 2I each (8I; SwiGLU's three matrices); a
// MoE layer stores top_k experts' worth per token. No dropout masks (these families train without
// dropout). GPT-2, GPT-NeoX, Falcon, OPT, BLOOM and GPT-BigCode keep the paper's 34 h.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.hpp"
#include "inputs/model.hpp"

namespace zerosim {

struct ActivationEstimate {
    int64_t layers = 0;          // transformer layers: distinct "<prefix>.<index>" parameter names
    int64_t hidden = 0;          // h: the widest token embedding's width
    int64_t vocab = 0;           // v: the widest token embedding's rows
    int64_t seq_len = 0, micro_batch = 0;
    int64_t element_bytes = 2;   // the paper's 16-bit activations; fp32 training stores 4
    bool checkpointing = false;
    int64_t per_layer_bytes = 0; // 34 s b h, scaled to element_bytes
    int64_t layers_bytes = 0;    // what the layers keep at the peak of backward
    int64_t outside_bytes = 0;   // 4 s b h (1 + v / h)
    int64_t total() const { return layers_bytes + outside_bytes; }
    std::string formula;         // the formula with its numbers, one line
};

ActivationEstimate estimate_activations(const Model& m, int64_t seq_len, int64_t micro_batch, DType dtype, bool checkpointing);

// What the framework holds beside tensors: the CUDA context and kernels (some 0.5-1 GiB on
// Hopper), cuBLAS workspaces, NCCL's channel buffers (NCCL_BUFFSIZE 4 MiB per channel and peer per
// protocol) and the caching allocator's fragmentation. A fixed, assumed figure, not a measurement.
inline constexpr int64_t kFrameworkReserveBytes = int64_t{3} << 30;

struct FitEstimate {
    int64_t model_states = 0;
    int64_t activations = 0;
    int64_t reserve = kFrameworkReserveBytes;
    int64_t gpu_bytes = 0;       // 0: the topology does not say
    int64_t total() const { return model_states + activations + reserve; }
    bool known() const { return gpu_bytes > 0; }
    bool fits() const { return known() && total() <= gpu_bytes; }
    std::string verdict() const { return !known() ? "unknown" : fits() ? "yes" : "no"; }
};

// gpu_memory_gb: the topology's gpu.memory_gb (1e9 bytes); 0 when it does not say.
FitEstimate estimate_fit(int64_t model_states, const ActivationEstimate& a, double gpu_memory_gb);

// "memory per rank 53.47 GiB (model states 23.25 + activations 27.22 + framework reserve 3.00) of
// the GPU's 74.51 GiB (80 GB): fits" (or "does not fit"; "fit unknown" when the GPU's is not given).
std::string fit_sentence(const FitEstimate& f);

}  // namespace zerosim
