// The mixtures of experts transformers builds from a config.json: mixtral (MixtralForCausalLM:
// block_sparse_moe with a router "gate" and experts w1/w2/w3), qwen2_moe (a router, experts, one
// shared expert and its sigmoid gate), qwen3_moe (a router and experts; q/k norms per head),
// deepseek_v2 and deepseek_v3 (multi-head latent attention; experts, a router and shared experts
// after the first first_k_dense_replace dense layers). Every expert is a module of the model: with
// ZeRO and no expert parallelism the model is dense to ZeRO (every rank holds, gathers and reduces
// every expert), while a token passes through top_k of a layer's routed experts (Model::routed_experts,
// which compute's FLOPs follow). DeepSpeed's own MoE layers (deepspeed.moe.layer.MoE, with their
// all_to_all) come only from a parameter list's "moe" section (ParallelParts::moe).
#include <algorithm>

#include "hf_builder.hpp"

namespace zerosim::hf {

namespace {

// One sparse MLP block: the router, the routed experts and any shared expert(s).
struct SparseSpec {
    GatedMlpSpec expert;
    int64_t experts = 0, top_k = 0;
    bool experts_first = false;          // DeepseekV3MoE registers experts, then the gate
    const char* shared_name = nullptr;   // "shared_expert" (Qwen2-MoE), "shared_experts" (DeepSeek)
    GatedMlpSpec shared;
    bool shared_gate = false;            // Qwen2-MoE's shared_expert_gate, Linear(hidden, 1)
};

// DeepSeek's multi-head latent attention (DeepseekV3Attention): q through a low-rank pair (or one
// q_proj when q_lora_rank is null), k and v from one compressed latent (kv_a_proj_with_mqa: the
// latent plus the shared rotary key) expanded per head by kv_b_proj.
struct MlaSpec {
    int64_t hidden = 0, heads = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v = 0;
    bool bias = false;
};

struct MoeLayers : LayerParts {
    SparseSpec sparse;
    GatedMlpSpec dense;
    std::vector<bool> is_sparse;   // per layer
    bool mla = false;
    MlaSpec att;

    void mlp_params(HfBuilder& b, const std::string& p, int64_t l) const override {
        if (!is_sparse[static_cast<size_t>(l)]) return gated_mlp_params(b, p, dense);
        const int64_t H = sparse.expert.hidden;
        if (!sparse.experts_first) b.linear(p + ".gate", H, sparse.experts, false);
        for (int64_t e = 0; e < sparse.experts; ++e) gated_mlp_params(b, p + ".experts." + std::to_string(e), sparse.expert);
        if (sparse.experts_first) b.linear(p + ".gate", H, sparse.experts, false);
        if (sparse.shared_name) gated_mlp_params(b, p + "." + sparse.shared_name, sparse.shared);
        if (sparse.shared_gate) b.linear(p + ".shared_expert_gate", H, 1, false);
        b.m.routed_experts.push_back({p + ".experts", sparse.experts, sparse.top_k});
    }
    // The router runs first; then every expert (each gets tokens once a batch is large: the
    // experts loop over those hit, in index order), then the shared expert(s) and their gate.
    void mlp_calls(HfBuilder& b, const std::string& p, int64_t l) const override {
        if (!is_sparse[static_cast<size_t>(l)]) return gated_mlp_calls(b, p, dense);
        b.enter(p);
        b.call(p + ".gate");
        for (int64_t e = 0; e < sparse.experts; ++e) gated_mlp_calls(b, p + ".experts." + std::to_string(e), sparse.expert);
        if (sparse.shared_name) gated_mlp_calls(b, p + "." + sparse.shared_name, sparse.shared);
        if (sparse.shared_gate) b.call(p + ".shared_expert_gate");
        b.exit();
    }
    // A MoE layer: the block's input 2h (the router's too), then per token top_k copies of it and
    // each chosen expert's gated MLP (2h + 8 I_e), the shared expert(s) (8 I_s, same input), and the
    // router's fp32 scores (4E).
    long double mlp_activations(int64_t l) const override {
        if (!is_sparse[static_cast<size_t>(l)]) return gated_mlp_activations(dense);
        return 2.0L * dense.hidden + static_cast<long double>(sparse.top_k) * gated_mlp_activations(sparse.expert) +
               (sparse.shared_name ? 8.0L * sparse.shared.inter : 0) + 4.0L * sparse.experts;
    }
    // Whole under tensor parallelism: the block's input, each chosen expert's input copy and the
    // router's scores; the experts' 8 I_e and the shared expert's 8 I_s are split.
    long double mlp_outside_tp(int64_t l) const override {
        if (!is_sparse[static_cast<size_t>(l)]) return 2.0L * dense.hidden;
        return 2.0L * dense.hidden + static_cast<long double>(sparse.top_k) * 2.0L * sparse.expert.hidden + 4.0L * sparse.experts;
    }
    std::string mlp_formula() const override {
        return std::string("gated MLP 2h + 8I, or in a MoE layer 2h + top_k (2h + 8 I_expert)") +
               (sparse.shared_name ? " + 8 I_shared" : "") + " + 4 experts (fp32 router scores)";
    }
    // MLA: the projections' input 2h; q_a's output and its norm's (4 q_lora); the latent with the
    // rotary key (2 (kv_lora + rope)) and its norm's output (2 kv_lora); Q and K per head (2 x 2 heads
    // (nope + rope)), V (2 heads v) and o_proj's input (2 heads v).
    long double attention_activations() const override {
        const long double heads = static_cast<long double>(att.heads);
        return 2.0L * att.hidden + 4.0L * att.q_lora + 2.0L * (att.kv_lora + att.rope) + 2.0L * att.kv_lora +
               4 * heads * (att.nope + att.rope) + 4 * heads * att.v;
    }
    // Whole: the input and the down projections' outputs with their norms (q_a_proj, kv_a_proj_with_mqa
    // are plain linears, hf_models.cpp mark_hf_tensor_splits); Q, K, V and o_proj's input split.
    long double attention_outside_tp() const override {
        return 2.0L * att.hidden + 4.0L * att.q_lora + 2.0L * (att.kv_lora + att.rope) + 2.0L * att.kv_lora;
    }
    std::string attention_formula() const override {
        return "multi-head latent attention 2h + 4 q_lora + 2(kv_lora + rope) + 2 kv_lora + 4 heads (nope + rope) + 4 heads v";
    }
    bool own_attention() const override { return mla; }
    void attention_params(HfBuilder& b, const std::string& a) const override {
        const int64_t qk = att.nope + att.rope;
        if (att.q_lora == 0) {
            b.linear(a + ".q_proj", att.hidden, att.heads * qk, false);
        } else {
            b.linear(a + ".q_a_proj", att.hidden, att.q_lora, att.bias);
            b.norm(a + ".q_a_layernorm", att.q_lora, false);
            b.linear(a + ".q_b_proj", att.q_lora, att.heads * qk, false);
        }
        b.linear(a + ".kv_a_proj_with_mqa", att.hidden, att.kv_lora + att.rope, att.bias);
        b.norm(a + ".kv_a_layernorm", att.kv_lora, false);
        b.linear(a + ".kv_b_proj", att.kv_lora, att.heads * (att.nope + att.v), false);
        b.linear(a + ".o_proj", att.heads * att.v, att.hidden, att.bias);
    }
    void attention_calls(HfBuilder& b, const std::string& a) const override {
        b.enter(a);
        if (att.q_lora == 0) {
            b.call(a + ".q_proj");
        } else {
            b.call(a + ".q_a_proj");
            b.call(a + ".q_a_layernorm");
            b.call(a + ".q_b_proj");
        }
        b.call(a + ".kv_a_proj_with_mqa");
        b.call(a + ".kv_a_layernorm");
        b.call(a + ".kv_b_proj");
        b.call(a + ".rotary_emb", false);
        // After kv_b_proj every head has its own k (nope + rope wide) and v: Ulysses moves heads of
        // q/k width. Scores cost 2 s (nope + rope) and the weighted values 2 s v per head and token,
        // so the core is charged as a width of heads x (nope + rope + v) / 2.
        b.m.parallel.attention.push_back({a + ".kv_b_proj", a + ".attention", att.heads, att.nope + att.rope, att.heads});
        b.call(a + ".o_proj");
        b.attention_outputs.emplace_back(a + ".o_proj", att.heads * (att.nope + att.rope + att.v) / 2);
        b.exit();
    }
};

// top_k of `experts` experts, each of 3 (2 for a fused gate_up) tensors: refused before building
// when the tensors would not fit (kMaxModelTensors), or when top_k exceeds the experts.
void check_experts(const HfConfig& c, const SparseSpec& s, int64_t sparse_layers, const char* experts_key,
                   const char* top_k_key) {
    if (s.experts > 0 && s.top_k > s.experts)
        c.root.at(c.root.has(top_k_key) ? top_k_key : experts_key)
            .fail_here("expected at most " + std::to_string(s.experts) + " experts per token (" + experts_key +
                       "), found " + std::to_string(s.top_k));
    c.tensor_budget(static_cast<long double>(sparse_layers) * (3.0L * s.experts + 16), experts_key);
}

void finish_layers(const HfConfig& c, HfBuilder& b, DecoderSpec& d, MoeLayers& parts, const char* experts_key,
                   const char* top_k_key) {
    int64_t sparse_layers = 0;
    for (bool s : parts.is_sparse) sparse_layers += s;
    check_experts(c, parts.sparse, sparse_layers, experts_key, top_k_key);
    d.tied = c.flag_or("tie_word_embeddings", false);
    b.m.default_seq_len = default_seq_len(c, 4096);
    build_decoder(b, d, parts);
}

// Mixtral, Qwen2-MoE, Qwen3-MoE: Llama's decoder with a sparse block in place of the MLP.
void build_qwen_mixtral(const HfConfig& c, HfBuilder& b, const std::string& t) {
    const bool mixtral = t == "mixtral", qwen2 = t == "qwen2_moe";
    DecoderSpec d;
    d.vocab = c.count_or("vocab_size", mixtral ? 32000 : 151936);
    d.hidden = c.count_or("hidden_size", mixtral ? 4096 : 2048);
    d.layers = c.count_or("num_hidden_layers", mixtral ? 32 : 24);
    const int64_t inter = c.count_or("intermediate_size", mixtral ? 14336 : qwen2 ? 5632 : 6144);
    d.attention = read_attention(c, d.hidden, mixtral ? 32 : qwen2 ? 16 : 32, mixtral ? 8 : qwen2 ? 16 : 4, 0);
    d.attention.qkv_bias = qwen2 || (t == "qwen3_moe" && c.flag_or("attention_bias", false));
    d.attention.o_bias = t == "qwen3_moe" && c.flag_or("attention_bias", false);
    d.attention.qk_norm = t == "qwen3_moe" ? QkNorm::PerHead : QkNorm::None;
    MoeLayers parts;
    parts.dense = {d.hidden, inter, false, GatedNames::Llama};
    if (mixtral) {
        d.mlp_name = "block_sparse_moe";
        parts.sparse.expert = {d.hidden, inter, false, GatedNames::Mixtral};
        parts.sparse.experts = c.count_or("num_local_experts", 8);
        parts.sparse.top_k = c.count_or("num_experts_per_tok", 2);
        parts.is_sparse.assign(static_cast<size_t>(d.layers), true);
        b.m.attention_heads = d.attention.heads;
        b.m.kv_heads = d.attention.kv_heads;
        return finish_layers(c, b, d, parts, "num_local_experts", "num_experts_per_tok");
    }
    parts.sparse.expert = {d.hidden, c.count_or("moe_intermediate_size", qwen2 ? 1408 : 768), false, GatedNames::Llama};
    parts.sparse.experts = c.count0_or("num_experts", qwen2 ? 60 : 128);
    parts.sparse.top_k = c.count_or("num_experts_per_tok", qwen2 ? 4 : 8);
    if (qwen2) {
        parts.sparse.shared_name = "shared_expert";
        parts.sparse.shared = {d.hidden, c.count_or("shared_expert_intermediate_size", 5632), false, GatedNames::Llama};
        parts.sparse.shared_gate = true;
    }
    // Qwen2MoeDecoderLayer: sparse unless listed in mlp_only_layers, when there are experts and
    // (layer + 1) is a multiple of decoder_sparse_step.
    const int64_t step = c.count_or("decoder_sparse_step", 1);
    const auto dense_only = c.index_list("mlp_only_layers");
    for (int64_t l = 0; l < d.layers; ++l)
        parts.is_sparse.push_back(std::find(dense_only.begin(), dense_only.end(), l) == dense_only.end() &&
                                  parts.sparse.experts > 0 && (l + 1) % step == 0);
    b.m.attention_heads = d.attention.heads;
    b.m.kv_heads = d.attention.kv_heads;
    finish_layers(c, b, d, parts, "num_experts", "num_experts_per_tok");
}

// A count that may be absent, null (the config class's None) or 0: all give `fallback`'s meaning.
int64_t count_none0(const HfConfig& c, const char* key, int64_t fallback) {
    if (!c.root.has(key) || c.root.at(key).is_null()) return fallback;
    return c.count0_or(key, fallback);
}

// DeepseekV2ForCausalLM / DeepseekV3ForCausalLM. Defaults are DeepseekV3Config's (and
// DeepseekV2Config's, whose experts default to none: every layer dense).
void build_deepseek(const HfConfig& c, HfBuilder& b, const std::string& t) {
    const bool v3 = t == "deepseek_v3";
    DecoderSpec d;
    d.vocab = c.count_or("vocab_size", v3 ? 129280 : 102400);
    d.hidden = c.count_or("hidden_size", v3 ? 7168 : 4096);
    d.layers = c.count_or("num_hidden_layers", v3 ? 61 : 30);
    MoeLayers parts;
    parts.mla = true;
    parts.att.hidden = d.hidden;
    parts.att.heads = c.count_or("num_attention_heads", v3 ? 128 : 32);
    // q_lora_rank null (DeepSeek-V2-Lite): one q_proj, no low-rank pair.
    parts.att.q_lora = c.root.has("q_lora_rank") && c.root.at("q_lora_rank").is_null() ? 0 : c.count0_or("q_lora_rank", 1536);
    parts.att.kv_lora = c.count_or("kv_lora_rank", 512);
    parts.att.nope = c.count_or("qk_nope_head_dim", 128);
    parts.att.rope = c.count_or("qk_rope_head_dim", 64);
    parts.att.v = c.count_or("v_head_dim", 128);
    parts.att.bias = c.flag_or("attention_bias", false);
    const int64_t moe_inter = c.count_or("moe_intermediate_size", v3 ? 2048 : 1407);
    parts.dense = {d.hidden, c.count_or("intermediate_size", v3 ? 18432 : 11008), false, GatedNames::Llama};
    parts.sparse.expert = {d.hidden, moe_inter, false, GatedNames::Llama};
    parts.sparse.experts = count_none0(c, "n_routed_experts", v3 ? 256 : 0);
    parts.sparse.top_k = count_none0(c, "num_experts_per_tok", v3 ? 8 : 0);
    parts.sparse.experts_first = true;
    const int64_t shared = count_none0(c, "n_shared_experts", v3 ? 1 : 0);
    if (shared > 0) {
        parts.sparse.shared_name = "shared_experts";
        parts.sparse.shared = {d.hidden, moe_inter * shared, false, GatedNames::Llama};
    }
    if (parts.sparse.experts > 0 && parts.sparse.top_k == 0)
        c.root.at("num_experts_per_tok").fail_here("expected a positive number of experts per token");
    // DeepseekV2DecoderLayer: a MoE block from layer first_k_dense_replace on, every moe_layer_freq-th.
    const int64_t first_dense = c.count0_or("first_k_dense_replace", v3 ? 3 : 0), freq = c.count_or("moe_layer_freq", 1);
    for (int64_t l = 0; l < d.layers; ++l)
        parts.is_sparse.push_back(parts.sparse.experts > 0 && l >= first_dense && l % freq == 0);
    // After kv_b_proj each head has its own key and value: tensor parallelism splits heads.
    b.m.attention_heads = b.m.kv_heads = parts.att.heads;
    finish_layers(c, b, d, parts, "n_routed_experts", "num_experts_per_tok");
}

}  // namespace

bool build_moe_decoder(const HfConfig& c, HfBuilder& b, const std::string& t) {
    if (t == "mixtral" || t == "qwen2_moe" || t == "qwen3_moe") {
        build_qwen_mixtral(c, b, t);
        return true;
    }
    if (t == "deepseek_v2" || t == "deepseek_v3") {
        build_deepseek(c, b, t);
        return true;
    }
    return false;
}

}  // namespace zerosim::hf
