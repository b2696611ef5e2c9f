// The model as ZeRO sees it: parameters in registration order (PyTorch's named_parameters()),
// the modules that own them, the order in which modules run forward, and each parameter's
// optimizer parameter group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// How Megatron-style tensor parallelism splits a parameter over the tensor-parallel ranks
// (megatron/core/tensor_parallel/layers.py): a column-parallel linear cuts its output features (the
// weight's first dimension and its bias), a row-parallel one its input features (the weight's
// second dimension; its bias stays whole); None is replicated (norms, a row-parallel bias).
enum class TpSplit { None, Column, Row };

struct Parameter {
    std::string name;             // e.g. blocks.0.attn.qkv.weight
    std::vector<int64_t> shape;
    TpSplit tp = TpSplit::None;   // parameter list "tp": "column" | "row" (the shape is the whole one)
    // A row-parallel weight's module all_reduces its output over the tensor group (Megatron's
    // reduce_from_model_parallel_region); false where a later module reduces a sum once instead
    // (GPT-NeoX's gpt_j_residual: attention's dense, reduced with the MLP's output).
    bool tp_reduces_output = true;
    // The dimension tensor parallelism cuts: column 0 and row 1 for a [out, in] weight (and a
    // column bias's 0); GPT-2's Conv1D stores [in, out], so there column 1 and row 0.
    int tp_dim = 0;
    int64_t numel = 0;
    int group = 0;                // optimizer parameter group, after empty groups are dropped
    int module = -1;              // index into Model::modules of the module that registers it
};

// What a module computes, for FLOP and byte estimates of compute segments.
enum class ModuleKind { Linear, Embedding, Norm, Other };

struct Module {
    std::string name;             // parameter name without its last component ("" = the root)
    std::vector<int> params;      // parameters it uses directly (registration order; tied ones too)
    ModuleKind kind = ModuleKind::Other;
    // Attention core (scores and weighted values) computed just before this module, as the width
    // of all heads together; it costs 4 * seq_len * width FLOPs per token. 0 for other modules.
    int64_t attention_width = 0;
};

struct CallNode {
    std::string name;
    int module = -1;              // Model::modules index when the call uses parameters directly
    std::vector<int> children;    // in call order
    bool grad_out = true;         // its output carries gradient: a pre-backward hook fires
    bool grad_in = true;          // its input carries gradient: a post-backward hook fires (not
                                  // for embeddings and the modules around them, fed token ids)
};

// The layers deepspeed.pipe.PipelineModule cuts into stages, in order (parameterless ones too:
// partition_method "uniform" counts them). `name` is the prefix of the layer's parameters ("3" for
// "3.weight"); `output` the shape per sample of the activation it hands to the next layer.
struct PipeLayer {
    std::string name;
    std::vector<int64_t> output;
    // The layer's class (a LayerSpec's typename) or function name, which partition_method
    // "type:REGEX" matches (module.py _find_layer_type); empty: the name.
    std::string type;
    // A boolean attention mask handed on beside the activation, as GPT-NeoX's layers pass
    // (hidden, attention_mask): its whole shape (no micro batch dimension); empty: none. The engine
    // sends it as fp16 and leaves it out of the gradients (engine.py has_attention_mask, 1042-1047, 1097-1101).
    std::vector<int64_t> mask;
    // A TiedLayerSpec's tied_weight_attr: its parameter whose gradient _exec_reduce_tied_grads all_reduces.
    std::string tied_weight = "weight";
};

// A DeepSpeed MoE layer (deepspeed.moe.layer.MoE): its experts are the parameters named
// "<experts>.<e>.<rest>", e = 0 .. num_experts - 1 (the whole model; expert parallelism gives each
// rank num_experts / ep of them, renamed from 0 as DeepSpeed's local experts are).
struct MoeLayer {
    std::string module;            // the MoE module ("moe")
    std::string experts;           // the experts' ModuleList ("moe.deepspeed_moe.experts.deepspeed_experts")
    int64_t num_experts = 1;       // Hugging Face "num_local_experts", DeepSpeed num_experts
    int64_t top_k = 1;             // "num_experts_per_tok", DeepSpeed k
    bool drop_tokens = true;
    double capacity_factor = 1.0;
    int64_t min_capacity = 4;
    int64_t hidden = 0;            // the model dimension the experts take and return
};

// An attention that Ulysses wraps (deepspeed.sequence.layer.DistributedAttention): it runs right
// after `module` (the projection that makes q, k and v) as a parameterless module call `name`, on
// which ZeRO-3's hooks fire too.
struct AttentionLayer {
    std::string module;
    std::string name = "attention";
    int64_t heads = 0;
    int64_t head_size = 0;
    int64_t kv_heads = 0;          // grouped-query attention's key/value heads; 0 = heads
};

// A Hugging Face mixture-of-experts block's routed experts (Mixtral's block_sparse_moe.experts,
// Qwen-MoE's and DeepSeek's mlp.experts). They are ordinary modules of the model: ZeRO without
// expert parallelism holds, gathers and reduces every one of them on every rank (transformers runs
// the experts locally; there is no all_to_all), but each token passes through top_k of them, which
// is what compute counts. Not a ParallelParts::moe layer: that is DeepSpeed's own MoE.
struct RoutedExperts {
    std::string experts;           // the experts' ModuleList, "model.layers.3.mlp.experts"
    int64_t num_experts = 0;
    int64_t top_k = 0;
};

// What a model says about its parallel parts (parameter list "pipeline", "moe", "attention").
struct ParallelParts {
    std::vector<PipeLayer> pipe_layers;
    std::vector<MoeLayer> moe;
    std::vector<AttentionLayer> attention;
    bool empty() const { return pipe_layers.empty() && moe.empty() && attention.empty(); }
};

// What the layers store for backward, per token, in bytes of 16-bit activations, where the builder
// knows the family's block (Hugging Face decoders with gated MLPs, GQA, MLA and mixtures of
// experts: analysis/fit.hpp); total 0 = not known, and the paper's GPT block (34 h) is used.
struct LayerActivations {
    int64_t total = 0;     // summed over the layers
    int64_t largest = 0;   // the largest one layer stores (full checkpointing recomputes one at a time)
    // Of those, what stays whole on every tensor-parallel rank (Korthikanti et al. 2022 sec. 4.2.1):
    // the norms' inputs, the inputs of the projections into the tensor-parallel region (attention's,
    // the MLP's, MLA's down projections and their norms), routers; the rest is split / t.
    int64_t outside_tp = 0;           // summed over the layers
    int64_t largest_outside_tp = 0;   // of the largest layer
    std::string formula;   // the per-layer sum, as the memory report prints it
};

struct Model {
    std::string name;
    std::string source;                 // the file it came from
    std::vector<Parameter> params;      // registration order
    std::vector<Module> modules;        // modules that own or use parameters, first-registration order
    std::vector<int> forward_order;     // module indices in forward execution order (a module may repeat)
    int num_groups = 1;
    // Every module call of one forward pass as a tree (calls[0] is the root model): containers,
    // parameterless modules (dropout, activations, rotary embeddings) and the modules that use
    // parameters, children in call order. nn.ModuleList is iterated, never called, so it is not a
    // node. ZeRO-3's hooks fire on these calls: fetch before a call, release after it, in forward
    // and in backward, and its trace records each pre-forward and pre-backward.
    std::vector<CallNode> calls;
    int64_t default_seq_len = 0;        // from the model config where it says, else 0
    // Hugging Face config.json's "gradient_checkpointing": true (configs saved by older transformers
    // releases carry the key): every layer checkpointed, for analysis/fit.hpp's activations.
    bool gradient_checkpointing = false;
    // A parameter list's "checkpointed": the module calls (Model::calls names) its forward wraps in
    // torch.utils.checkpoint.checkpoint, whatever the flags say. Empty: the flags decide, and then
    // every transformer block is checkpointed (sim/schedule's Build::checkpointed_calls).
    std::vector<std::string> checkpointed;
    ParallelParts parallel;             // pipeline layers, MoE layers, Ulysses attentions; tp splits on Parameter::tp
    // Hugging Face models: attention heads and key/value heads (tensor parallelism splits both); 0 = unknown.
    int64_t attention_heads = 0;
    int64_t kv_heads = 0;
    // Hugging Face models: model.config.hidden_size as transformers reads it (GPT-2's and BigCode's
    // n_embd, BLOOM's n_embed through their configs' aliases), which sizes a Trainer config's "auto"
    // buckets (inputs/trainer_auto.hpp); 0 = none.
    int64_t hidden_size = 0;
    // Whether DeepSpeed's comms logger sees the tensor-parallel layers' collectives: yes when the
    // model calls deepspeed.comm (the reference runs, DeepSpeed's AutoTP), no for GPT-NeoX, whose
    // mpu calls torch.distributed directly. Either way they are on the wire and in the schedule.
    bool tp_collectives_logged = true;
    // Hugging Face MoE models: each layer's routed experts (dense to ZeRO; top_k of them per token).
    std::vector<RoutedExperts> routed_experts;
    LayerActivations activations;

    int64_t total_numel() const;
    // The share of a micro batch's tokens that module `name` computes on: top_k / num_experts for a
    // module inside a layer's routed experts (router balance assumed), else 1.
    double token_share(const std::string& module_name) const;
    // The parameters one token passes through: every parameter, the routed experts' at top_k /
    // num_experts (Mixtral-8x7B: 12.9B of 46.7B).
    int64_t active_numel() const;
    int64_t group_numel(int g) const;
};

// The most elements a model may hold, per parameter and in total: 2^56 (7.2e16, some 10^4 times
// the largest models trained). Its bytes (up to 16 per element with Adam's fp32 states beside the
// half-precision copy) and the sums the schedule and the memory estimate make of them then stay
// far inside a signed 64-bit count. Element counts are multiplied and added with overflow checks,
// so a shape whose product wraps around 2^64 is refused, never read as a small number.
inline constexpr int64_t kMaxModelElements = int64_t{1} << 56;

// "2^64" for a power of two, else "1.84e+19" (the message form of an element count that may not
// fit 64 bits, computed in long double).
std::string element_count_text(long double elements);

// The transformer block a parameter belongs to: "model.layers.17.mlp.up_proj.weight" ->
// "model.layers.17", the name up to its first numeric component (the module PyTorch's
// transformer_auto_wrap_policy wraps, the layer activations are counted per); "" when it has none
// (embeddings, the final norm, the head).
std::string transformer_block_of(const std::string& parameter_name);

// A Hugging Face model under --pp: the layers a PipelineModule of LayerSpecs would list for it, as
// Megatron-DeepSpeed's GPTModelPipe lists a GPT (its embedding, each transformer block, the final
// norm, the output head), in registration order, each block's output [seq_len, hidden] per sample
// and the head's [seq_len, vocab]. `m.parallel.pipe_layers` is left as it is when the model has
// its own list or is not a Hugging Face decoder (Model::attention_heads 0). A head tied to the
// embedding (no lm_head parameter) ends the list at the final norm: the logits' TiedLayerSpec on the
// last stage is not modelled.
void derive_hf_pipeline_layers(Model& m, int64_t seq_len);

// How the caller chose parameter groups when the file does not say.
enum class GroupPolicy { AllInOne, DecayNoDecay };

// Reads either a parameter-list JSON ({"parameters": [...]}) or a Hugging Face config.json
// (recognised by "model_type"). Errors name the file and the field.
Result<Model> load_model(const std::string& path);
// The same from the file's text; `path` names it in messages and becomes Model::source (a saved
// schedule's embedded model, formats/schedule_json.hpp).
Result<Model> model_from_json_text(const std::string& path, const std::string& text);

// Builders used by load_model, exposed for tests.
Result<Model> model_from_param_list_json(const std::string& text_or_path_name, const std::string& text);
Result<Model> model_from_hf_config_json(const std::string& file_name, const std::string& text);

// Shared finishing step: modules from names, groups compacted, checks (no parameters, zero sizes).
// A builder that made its own call tree (calls non-empty) keeps it; otherwise the tree is
// derived from parameter names and the forward order.
// `tied`: (module, parameter) pairs where a module also uses a parameter registered elsewhere.
struct TiedUse {
    std::string module;
    std::string parameter;
};
Status finish_model(Model& m, GroupPolicy policy, const std::vector<std::string>& forward_order_names,
                    const std::vector<TiedUse>& tied = {});
// The parameter list's "tp" fields and its "pipeline", "moe" and "attention" sections (model_parallel.cpp).
class JsonField;
void read_parallel_parts(const JsonField& root, const JsonField& parameters, Model& m);
// A call node for each Ulysses attention, right after its module's call, unless it is there already
// (read_parallel_parts: a parameter list's attention is a module of its own; sim/schedule's per-rank
// model under --sp: a Hugging Face model's attentions wrapped by DistributedAttention).
void add_attention_calls(Model& m);
// Hugging Face models: Megatron's tensor split of each parameter (hf_models.cpp).
void mark_hf_tensor_splits(Model& m, const std::string& model_type);

// Sets CallNode::grad_in from the tree: embeddings and the calls around them take token ids.
void mark_gradient_inputs(Model& m);

}  // namespace zerosim
