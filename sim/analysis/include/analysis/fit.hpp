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
#include "schedule/layout.hpp"

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

// One rank of a 3D layout (pipeline, tensor, Ulysses sequence, expert parallel): the activations of
// its pipeline stage at that stage's peak, Korthikanti et al. 2022 sec. 4.2-4.3 and Table 2.
//   - Per layer and micro batch, tensor parallelism without Megatron's sequence parallelism (sec.
//     4.2.1): s b h (10 + 24/t + 5as/(ht)). The 10 stay whole on every tensor rank: the two norms'
//     inputs (4), the inputs of the QKV projection and of the MLP's first linear (2 + 2), the two
//     dropout masks (1 + 1); the 24 inside the tensor-parallel region are split: Q and K (4), V (2),
//     the attention projection's input (2), the GeLU's input and output (8 + 8). As in sec. 4.1
//     zerosim counts no s x s scores (5as/(ht): FlashAttention never stores them).
//     A model that knows its own block (Model::activations) splits it the same way: the part
//     outside the tensor region (LayerActivations::outside_tp: norms' and projections' inputs,
//     routers) whole, the rest / t.
//   - Ulysses (DeepSpeed's sequence/layer.py DistributedAttention): each rank holds s/sp tokens
//     outside attention and all s tokens of heads/sp heads inside it, the same number of elements:
//     every term's s becomes s/sp, the embedding's and the logits' too.
//   - Micro batches in flight: under the pipeline engine, stage k holds the forwards of
//     TrainSchedule (runtime/pipe/schedule.py, v0.14.2 197-256) not yet run backward, at most
//     min(p - k, m) (num_pipe_buffers' "maximum number of in-flight forward passes", 247-256), m the
//     gradient_accumulation_steps; counted here from pipe_train_schedule's steps. Without the
//     pipeline engine each micro batch runs forward and backward before the next: 1.
//   - Outside the layers (sec. 4.3), only on the stage that runs them: stage 0 the embedding's
//     dropout mask, s b h bytes per micro batch in flight (whole without sequence parallelism; not
//     for the families with their own block, which train without dropout); the
//     last stage the final norm's and the output projection's inputs, 4 s b h (whole), and the
//     fp32 logits 4 s b v, / t where the head is vocabulary parallel (tp "column": Megatron's
//     vocab-parallel cross entropy keeps the rank's slice).
//   - Full activation checkpointing (Table 2, "full recompute": 2 s b h per layer): each layer keeps
//     its input, 2 s b h, whole on every tensor rank (without sequence parallelism the input is
//     replicated; DeepSpeed's partition_activations would split it / t and is not modelled), per micro
//     batch in flight, plus one layer's full activations recomputed in backward (one micro batch).
struct StageActivations {
    int64_t stage = 0, stages = 1;       // k and p
    int64_t layers = 0;                  // transformer layers the stage holds
    int64_t micro_batches = 1;           // m, the step's micro batches (gradient_accumulation_steps)
    int64_t in_flight = 1;               // micro batches whose activations the stage holds at its peak
    int64_t tensor = 1, sequence = 1;    // t and sp
    int64_t tokens = 0;                  // s / sp, the tokens of a micro batch on this rank
    int64_t micro_batch = 0, hidden = 0, vocab = 0;
    int64_t element_bytes = 2;
    bool checkpointing = false;
    bool first = false, last = false;    // holds the embedding / the final norm and head
    bool vocab_parallel = false;         // the head's logits split / t
    bool embedding_mask = false;         // the embedding's dropout mask counted (first stage, the paper's GPT block)
    int64_t per_layer_bytes = 0;         // one layer, one micro batch, all its activations
    int64_t kept_per_layer_bytes = 0;    // what one layer keeps per micro batch (its input when checkpointed)
    int64_t layers_bytes = 0;            // the stage's layers at the peak
    int64_t outside_bytes = 0;           // embedding mask (stage 0), final norm, head and logits (last stage)
    int64_t total() const { return layers_bytes + outside_bytes; }
    std::string formula;
};

// Transformer layers of a (rank's) model: the blocks (transformer_block_of) with at least two
// matrices of linear modules and no embedding (a pipeline's embedding, final norm and head layers
// are numbered blocks too, "0.word_embeddings.weight").
int64_t transformer_layers(const Model& m);

// Micro batches stage `stage` of `stages` holds at its peak under TrainSchedule with `micro_batches`
// per step (1 when not pipelined).
int64_t micro_batches_in_flight(int64_t micro_batches, int64_t stages, int64_t stage, bool pipelined);

// The activations of `local` (the rank's model: rank_local_model), one rank of pipeline stage `stage`
// of `layout`; `whole` gives h, v and the head's split. seq_len and micro_batch as the schedule has
// them, micro_batches its gradient_accumulation_steps.
StageActivations estimate_stage_activations(const Model& whole, const Model& local, const ParallelLayout& layout,
                                            int64_t stage, int64_t seq_len, int64_t micro_batch, int64_t micro_batches,
                                            DType dtype, bool checkpointing);

// What the framework holds beside tensors: the CUDA context and kernels (some 0.5-1 GiB on
// Hopper), cuBLAS workspaces, NCCL's channel buffers (NCCL_BUFFSIZE 4 MiB per channel and peer per
// protocol) and the caching allocator's fragmentation. A fixed, assumed figure, not a measurement.
inline constexpr int64_t kFrameworkReserveBytes = int64_t{3} << 30;

struct FitEstimate {
    int64_t model_states = 0;
    int64_t activations = 0;
    int64_t reserve = kFrameworkReserveBytes;
    int64_t gpu_bytes = 0;       // 0: the topology does not say
    // Offloaded states (offload_optimizer, offload_param: memory.hpp's "host" items) of the ranks
    // on one node, against the node's RAM (topology host.memory_gb; 0: not given).
    int64_t host_per_node = 0;
    int64_t host_bytes = 0;
    bool host_fits() const { return host_bytes > 0 && host_per_node <= host_bytes; }
    int64_t total() const { return model_states + activations + reserve; }
    bool known() const { return gpu_bytes > 0; }
    bool fits() const { return known() && total() <= gpu_bytes; }
    std::string verdict() const { return !known() ? "unknown" : fits() ? "yes" : "no"; }
};

// gpu_memory_gb: the topology's gpu.memory_gb (1e9 bytes); 0 when it does not say.
FitEstimate estimate_fit(int64_t model_states, const ActivationEstimate& a, double gpu_memory_gb);
FitEstimate estimate_fit(int64_t model_states, const StageActivations& a, double gpu_memory_gb);

// "memory per rank 53.47 GiB (model states 23.25 + activations 27.22 + framework reserve 3.00) of
// the GPU's 74.51 GiB (80 GB): fits" (or "does not fit"; "fit unknown" when the GPU's is not given);
// with offloaded states, "; host memory per node 591.20 GiB (8 ranks' offloaded states) of the
// node's 1862.65 GiB (2000 GB): fits" (or "does not fit", or "unknown: no host.memory_gb").
std::string fit_sentence(const FitEstimate& f);

}  // namespace zerosim
