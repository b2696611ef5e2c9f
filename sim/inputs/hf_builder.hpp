// Private to sim/inputs: reading a Hugging Face config.json (HfConfig) and building the parameters,
// modules and forward calls that transformers builds from it (HfBuilder). The families live in
// hf_models.cpp (gpt2, gpt_neox, the dispatcher, the tensor splits), hf_decoder.cpp (the Llama-style
// decoder every rotary family shares: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text,
// phi3, olmo, olmo2), hf_moe.cpp (mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3) and
// hf_classic.cpp (falcon, opt, bloom, gpt_bigcode).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json_input.hpp"
#include "inputs/model.hpp"

namespace zerosim::hf {

// The largest size a config may give (hidden_size, vocab_size, num_hidden_layers...): 2^31 - 1,
// beyond every real model's, so that any product of two sizes fits 64 bits before it is checked.
inline constexpr int64_t kMaxConfigSize = INT32_MAX;

// The most parameter tensors a model may have: real checkpoints have hundreds (Llama-2-70B 723)
// to tens of thousands (DeepSeek-V3, a mixture of 256 experts, 45,000); past 2^18 a config is a
// typo, and building its schedule would take minutes and gigabytes before failing.
inline constexpr int64_t kMaxModelTensors = 1 << 18;

struct HfConfig {
    JsonField root;
    // Every size read, so that a parameter too large to count can be blamed on the largest of them.
    mutable std::vector<std::pair<std::string, int64_t>> sizes;

    // A size the model needs: a positive whole number up to kMaxConfigSize.
    int64_t count(const char* key) const;
    // The same, or `fallback` (the config class's default) when the file leaves the key out. A null
    // is refused: transformers would pass None on and fail, or build something else.
    int64_t count_or(const char* key, int64_t fallback) const;
    // For the keys whose config class reads None as "the default" (num_key_value_heads, head_dim,
    // n_inner, q_lora_rank...): null and absent both give `fallback`.
    int64_t count_or_none(const char* key, int64_t fallback) const;
    // A count that may be 0 (first_k_dense_replace, n_shared_experts); null refused.
    int64_t count0_or(const char* key, int64_t fallback) const;
    // The first of two spellings a config may use (BLOOM's "n_embed" for hidden_size), else `fallback`.
    int64_t count_either(const char* key, const char* alias, int64_t fallback) const;
    // true/false, or `fallback` when absent; null refused.
    bool flag_or(const char* key, bool fallback) const;
    // A probability (a dropout rate): a number in [0, 1], or `fallback` when absent; null refused.
    double probability_or(const char* key, double fallback) const;
    // A string (an activation function's name), or `fallback` when absent or null.
    std::string string_or(const char* key, const std::string& fallback) const;
    // A list of layer indices (Qwen-MoE's mlp_only_layers); absent or null: empty.
    std::vector<int64_t> index_list(const char* key) const;
    void divisible(int64_t a, const char* a_key, int64_t b, const char* b_key) const;
    // A parameter or a running total past kMaxModelElements, blamed on the largest size the config
    // gave (the defaults a config leaves out are never that large); the field names that key.
    [[noreturn]] void too_many(const std::string& what, long double elements, std::string key = "") const;
    // Refuses a config whose parameter tensors would pass kMaxModelTensors (a mixture of experts with
    // too many experts or layers), blaming `key`, before anything is built.
    void tensor_budget(long double tensors, const char* key) const;
};

// Collects parameters in registration order and the call tree of one forward pass.
struct HfBuilder {
    Model m;
    std::vector<int> stack;               // open container calls
    std::vector<std::pair<std::string, int64_t>> attention_outputs;  // output projection -> heads' width
    std::string tied_head, tied_embed;    // a head that uses the token embedding (set by head())

    const HfConfig& config;
    int64_t total = 0;                    // elements so far, checked as each parameter is added
    int64_t tensors_at_layers_start = 0;  // parameter tensors before the first layer (start_layers)
    int64_t start_layers() {
        tensors_at_layers_start = static_cast<int64_t>(m.params.size());
        return total;
    }

    explicit HfBuilder(const HfConfig& c) : config(c) {
        m.calls.push_back(CallNode{"", -1, {}, true, true});
        stack.push_back(0);
    }

    void param(const std::string& name, std::vector<int64_t> shape);
    void linear(const std::string& name, int64_t in, int64_t out, bool bias) {
        param(name + ".weight", {out, in});
        if (bias) param(name + ".bias", {out});
    }
    // After the first of `layers` identical layers (begun when `total` was `before`): all of them
    // must fit, checked before the other layers are built.
    void check_layers(int64_t before, int64_t layers, const char* layers_key);
    void norm(const std::string& name, int64_t dim, bool bias) {
        param(name + ".weight", {dim});
        if (bias) param(name + ".bias", {dim});
    }
    int node(const std::string& name, bool grad_out) {
        int idx = static_cast<int>(m.calls.size());
        m.calls.push_back(CallNode{name, -1, {}, grad_out, true});
        m.calls[stack.back()].children.push_back(idx);
        return idx;
    }
    // A module call; `grad_out` false for modules whose output carries no gradient (rotary
    // embeddings compute cos/sin from buffers), which get no backward hooks.
    void call(const std::string& name, bool grad_out = true) { node(name, grad_out); }
    void enter(const std::string& name) { stack.push_back(node(name, true)); }
    void exit() { stack.pop_back(); }
    // One layer's activations per token in 16-bit bytes (Model::activations); clamped at 2^54, far
    // past any model's, so that analysis/fit.hpp's products with s and b stay inside 64 bits.
    // `outside_tp`: the part of it that stays whole on every tensor-parallel rank (LayerActivations).
    void layer_activations(long double bytes, long double outside_tp) {
        const long double cap = static_cast<long double>(int64_t{1} << 54);
        const auto one = static_cast<int64_t>(bytes < cap ? bytes : cap);
        const auto whole = std::min(one, static_cast<int64_t>(outside_tp < cap ? outside_tp : cap));
        if (one >= m.activations.largest) m.activations.largest_outside_tp = whole;
        m.activations.largest = std::max(m.activations.largest, one);
        m.activations.total = static_cast<int64_t>(std::min<long double>(cap, static_cast<long double>(m.activations.total) + one));
        m.activations.outside_tp = static_cast<int64_t>(std::min<long double>(cap, static_cast<long double>(m.activations.outside_tp) + whole));
    }
    // The output head `name` [V, H]: its own weight unless tied, else the token embedding's
    // `embed` (named_parameters() lists a tied weight once); then its call.
    void head(const std::string& name, const std::string& embed, int64_t vocab, int64_t hidden, bool tied) {
        if (tied) {
            tied_head = name;
            tied_embed = embed;
        } else {
            param(name + ".weight", {vocab, hidden});
        }
        call(name);
    }
};

// The families, by file.
void build_gpt2(const HfConfig& c, HfBuilder& b);
void build_gpt_neox(const HfConfig& c, HfBuilder& b);
// llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo, olmo2 (hf_decoder.cpp).
bool build_rotary_decoder(const HfConfig& c, HfBuilder& b, const std::string& type);
// mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3 (hf_moe.cpp).
bool build_moe_decoder(const HfConfig& c, HfBuilder& b, const std::string& type);
// falcon, opt, bloom, gpt_bigcode (hf_classic.cpp).
bool build_classic(const HfConfig& c, HfBuilder& b, const std::string& type);

// ---- The Llama-style decoder the rotary families share (hf_decoder.cpp) ----

// One attention block's projections: q, k, v, o (Llama), a fused qkv_proj registered after o_proj
// (Phi-3), RMS norms of q and k per head (Qwen3, Gemma-3) or over all heads (OLMo-2).
enum class QkNorm { None, PerHead, Whole };
struct AttentionSpec {
    int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
    bool qkv_bias = false, o_bias = false;
    bool fused_qkv = false;
    QkNorm qk_norm = QkNorm::None;
};

// A gated MLP (SwiGLU/GeGLU): gate, up, down as Llama names them, w1, w3, w2 as Mixtral's experts
// do, or Phi-3's fused gate_up_proj.
enum class GatedNames { Llama, Mixtral, FusedGateUp };
struct GatedMlpSpec {
    int64_t hidden = 0, inter = 0;
    bool bias = false;
    GatedNames names = GatedNames::Llama;
};
void gated_mlp_params(HfBuilder& b, const std::string& mlp, const GatedMlpSpec& s);
void gated_mlp_calls(HfBuilder& b, const std::string& mlp, const GatedMlpSpec& s);
// What a gated MLP stores per token in 16-bit bytes: its input 2h, then gate, up, the activation
// and their product, 2I each (Korthikanti et al. 2022 sec. 4.1's accounting, for SwiGLU's three
// matrices instead of the GPT MLP's two).
inline long double gated_mlp_activations(const GatedMlpSpec& s) { return 2.0L * s.hidden + 8.0L * s.inter; }

// Where a layer's norms sit: before each block (Llama), before and after each (Gemma-2 and -3),
// after each (OLMo-2); Phi-3 is Llama's with its residual dropouts as calls.
enum class NormPlacement { Pre, PreWithDropouts, Sandwich, Post };

// What differs per layer: the MLP (dense or a mixture of experts) and, for DeepSeek, the attention.
struct LayerParts {
    virtual ~LayerParts() = default;
    virtual void mlp_params(HfBuilder& b, const std::string& mlp, int64_t layer) const = 0;
    virtual void mlp_calls(HfBuilder& b, const std::string& mlp, int64_t layer) const = 0;
    // What the MLP stores per token (16-bit bytes) and how, for Model::activations.
    virtual long double mlp_activations(int64_t layer) const = 0;
    // Of it, what stays whole under tensor parallelism: the MLP's input 2h (default), a MoE layer's
    // router input and scores and its experts' inputs (Korthikanti et al. sec. 4.2.1: a column-parallel
    // linear's input is replicated).
    virtual long double mlp_outside_tp(int64_t layer) const = 0;
    virtual std::string mlp_formula() const = 0;
    // The attention's parameters and calls; the default is AttentionSpec's.
    virtual bool own_attention() const { return false; }
    virtual void attention_params(HfBuilder&, const std::string&) const {}
    virtual void attention_calls(HfBuilder&, const std::string&) const {}
    virtual long double attention_activations() const { return 0; }
    virtual long double attention_outside_tp() const { return 0; }   // own_attention: its whole part
    virtual std::string attention_formula() const { return ""; }
};

struct DecoderSpec {
    const char* layers_key = "num_hidden_layers";
    int64_t vocab = 0, hidden = 0, layers = 0;
    AttentionSpec attention;
    NormPlacement placement = NormPlacement::Pre;
    bool norm_params = true;             // OLMo's LayerNorm has no parameters
    bool tied = false;
    std::string mlp_name = "mlp";        // Mixtral: block_sparse_moe
};

// model.embed_tokens, model.layers.N (self_attn, the MLP, the norms), model.norm, lm_head.
void build_decoder(HfBuilder& b, const DecoderSpec& d, const LayerParts& parts);
// What Llama's attention stores per token in 16-bit bytes: the projections' input 2h; Q, K and V
// (2q + 2k + 2v: grouped-query attention's K and V are kv_heads wide); o_proj's input 2q; the q/k
// norms' inputs where there are norms. FlashAttention keeps no s x s scores.
long double attention_activations(const AttentionSpec& a);
// Llama's attention (and its relatives') per AttentionSpec: parameters, then the calls.
void attention_params(HfBuilder& b, const std::string& attn, const AttentionSpec& a);
void attention_calls(HfBuilder& b, const std::string& attn, const AttentionSpec& a);
// The heads of an attention: num_key_value_heads and head_dim read None as their defaults
// (LlamaConfig: kv heads = heads; head_dim = hidden / heads, which must then divide); 0 for
// `kv_heads` or `head_dim` means that rule, else the config class's own default.
AttentionSpec read_attention(const HfConfig& c, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim);
// The sequence length a config trains at by default: its max_position_embeddings, at most 4096.
int64_t default_seq_len(const HfConfig& c, int64_t fallback);

}  // namespace zerosim::hf
