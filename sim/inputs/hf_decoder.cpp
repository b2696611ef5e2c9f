// The decoder that Llama and the rotary families after it share (transformers' LlamaModel and the
// classes written from it): model.embed_tokens, model.layers.N with self_attn, an MLP and RMS norms,
// model.norm, lm_head. Each layer registers self_attn, the MLP, then its norms (in the order of the
// layer's __init__), and runs them in its forward's order (NormPlacement). Families: llama,
// mistral, qwen2 (LlamaForCausalLM and relatives), qwen3 (q/k norms per head), gemma, gemma2 and
// gemma3_text (tied head; Gemma-2/3 norm before and after each block), phi3 (fused qkv_proj and
// gate_up_proj), olmo (LayerNorms without parameters), olmo2 (norms after each block, q/k norms
// over all heads).
#include <algorithm>

#include "hf_builder.hpp"

namespace zerosim::hf {

int64_t default_seq_len(const HfConfig& c, int64_t fallback) {
    return c.count_or("max_position_embeddings", fallback);   // the model's own context, uncapped (--seq-len sets another)
}

void attention_params(HfBuilder& b, const std::string& a, const AttentionSpec& s) {
    const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
    if (s.fused_qkv) {   // Phi3Attention registers o_proj, then qkv_proj
        b.linear(a + ".o_proj", q, s.hidden, s.o_bias);
        b.linear(a + ".qkv_proj", s.hidden, q + 2 * kv, s.qkv_bias);
        return;
    }
    b.linear(a + ".q_proj", s.hidden, q, s.qkv_bias);
    b.linear(a + ".k_proj", s.hidden, kv, s.qkv_bias);
    b.linear(a + ".v_proj", s.hidden, kv, s.qkv_bias);
    b.linear(a + ".o_proj", q, s.hidden, s.o_bias);
    if (s.qk_norm == QkNorm::PerHead) {   // Qwen3Attention, Gemma3Attention: RMSNorm(head_dim)
        b.norm(a + ".q_norm", s.head_dim, false);
        b.norm(a + ".k_norm", s.head_dim, false);
    } else if (s.qk_norm == QkNorm::Whole) {   // Olmo2Attention: RMSNorm over all heads
        b.norm(a + ".q_norm", q, false);
        b.norm(a + ".k_norm", kv, false);
    }
}

long double attention_activations(const AttentionSpec& a) {
    const long double q = static_cast<long double>(a.heads) * a.head_dim, kv = static_cast<long double>(a.kv_heads) * a.head_dim;
    return 2.0L * a.hidden + 2 * (q + 2 * kv) + 2 * q + (a.qk_norm != QkNorm::None ? 2 * (q + kv) : 0);
}

void attention_calls(HfBuilder& b, const std::string& a, const AttentionSpec& s) {
    b.enter(a);
    std::string last;   // the projection the attention core follows
    if (s.fused_qkv) {
        b.call(a + ".qkv_proj");
        last = a + ".qkv_proj";
    } else {
        // q_norm(q_proj(x)), k_norm(k_proj(x)), v_proj(x) where the family has the norms.
        b.call(a + ".q_proj");
        if (s.qk_norm != QkNorm::None) b.call(a + ".q_norm");
        b.call(a + ".k_proj");
        if (s.qk_norm != QkNorm::None) b.call(a + ".k_norm");
        b.call(a + ".v_proj");
        last = a + ".v_proj";
    }
    b.call(a + ".rotary_emb", false);
    b.m.parallel.attention.push_back({last, a + ".attention", s.heads, s.head_dim, s.kv_heads});
    b.call(a + ".o_proj");
    b.attention_outputs.emplace_back(a + ".o_proj", s.heads * s.head_dim);
    b.exit();
}

void gated_mlp_params(HfBuilder& b, const std::string& p, const GatedMlpSpec& s) {
    switch (s.names) {
        case GatedNames::Llama:
            b.linear(p + ".gate_proj", s.hidden, s.inter, s.bias);
            b.linear(p + ".up_proj", s.hidden, s.inter, s.bias);
            b.linear(p + ".down_proj", s.inter, s.hidden, s.bias);
            break;
        case GatedNames::Mixtral:   // MixtralBlockSparseTop2MLP: w1 (gate), w2 (down), w3 (up)
            b.linear(p + ".w1", s.hidden, s.inter, s.bias);
            b.linear(p + ".w2", s.inter, s.hidden, s.bias);
            b.linear(p + ".w3", s.hidden, s.inter, s.bias);
            break;
        case GatedNames::FusedGateUp:   // Phi3MLP: gate_up_proj [2I, H], down_proj
            b.linear(p + ".gate_up_proj", s.hidden, 2 * s.inter, s.bias);
            b.linear(p + ".down_proj", s.inter, s.hidden, s.bias);
            break;
    }
}

void gated_mlp_calls(HfBuilder& b, const std::string& p, const GatedMlpSpec& s) {
    b.enter(p);
    switch (s.names) {
        case GatedNames::Llama:   // down(act(gate(x)) * up(x))
            b.call(p + ".gate_proj");
            b.call(p + ".act_fn");
            b.call(p + ".up_proj");
            b.call(p + ".down_proj");
            break;
        case GatedNames::Mixtral:   // w2(act(w1(x)) * w3(x))
            b.call(p + ".w1");
            b.call(p + ".act_fn");
            b.call(p + ".w3");
            b.call(p + ".w2");
            break;
        case GatedNames::FusedGateUp:
            b.call(p + ".gate_up_proj");
            b.call(p + ".activation_fn");
            b.call(p + ".down_proj");
            break;
    }
    b.exit();
}

namespace {

// The layer's norms, in the order its __init__ registers them.
std::vector<const char*> layer_norms(NormPlacement p) {
    switch (p) {
        case NormPlacement::Sandwich:
            return {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"};
        case NormPlacement::Post: return {"post_attention_layernorm", "post_feedforward_layernorm"};
        default: return {"input_layernorm", "post_attention_layernorm"};
    }
}

void decoder_layer_calls(HfBuilder& b, const DecoderSpec& d, const LayerParts& parts, const std::string& h, int64_t l) {
    const std::string attn = h + ".self_attn", mlp = h + "." + d.mlp_name;
    auto attention = [&] {
        if (parts.own_attention())
            parts.attention_calls(b, attn);
        else
            attention_calls(b, attn, d.attention);
    };
    b.enter(h);
    if (d.placement != NormPlacement::Post) b.call(h + ".input_layernorm");
    attention();
    if (d.placement == NormPlacement::PreWithDropouts) b.call(h + ".resid_attn_dropout");
    b.call(h + ".post_attention_layernorm");
    if (d.placement == NormPlacement::Sandwich) b.call(h + ".pre_feedforward_layernorm");
    parts.mlp_calls(b, mlp, l);
    if (d.placement == NormPlacement::Sandwich || d.placement == NormPlacement::Post)
        b.call(h + ".post_feedforward_layernorm");
    if (d.placement == NormPlacement::PreWithDropouts) b.call(h + ".resid_mlp_dropout");
    b.exit();
}

}  // namespace

void build_decoder(HfBuilder& b, const DecoderSpec& d, const LayerParts& parts) {
    b.enter("model");
    b.param("model.embed_tokens.weight", {d.vocab, d.hidden});
    b.call("model.embed_tokens");
    const int64_t layers_start = b.start_layers();
    for (int64_t l = 0; l < d.layers; ++l) {
        if (l == 1) b.check_layers(layers_start, d.layers, d.layers_key);
        const std::string h = "model.layers." + std::to_string(l);
        if (parts.own_attention())
            parts.attention_params(b, h + ".self_attn");
        else
            attention_params(b, h + ".self_attn", d.attention);
        parts.mlp_params(b, h + "." + d.mlp_name, l);
        if (d.norm_params)
            for (const char* n : layer_norms(d.placement)) b.norm(h + "." + n, d.hidden, false);
        decoder_layer_calls(b, d, parts, h, l);
        // Each norm's input (2h; OLMo's parameterless LayerNorm stores it too), the attention, the MLP.
        const long double attention = parts.own_attention() ? parts.attention_activations() : attention_activations(d.attention);
        // Whole on every tensor rank: the norms' inputs, the attention's input (2h; MLA's down
        // projections and their norms too) and the MLP's (parts.mlp_outside_tp).
        const long double norms = 2.0L * d.hidden * static_cast<long double>(layer_norms(d.placement).size());
        const long double attention_whole = parts.own_attention() ? parts.attention_outside_tp() : 2.0L * d.attention.hidden;
        b.layer_activations(norms + attention + parts.mlp_activations(l), norms + attention_whole + parts.mlp_outside_tp(l));
    }
    b.m.activations.formula = std::to_string(layer_norms(d.placement).size()) + " norms' inputs 2h each, " +
                              (parts.own_attention() ? parts.attention_formula()
                                                     : "attention 2h + 2(q + 2 kv) + 2q" +
                                                           std::string(d.attention.qk_norm != QkNorm::None ? " + 2(q + kv) (q/k norms)" : "") +
                                                           " (q = heads x head_dim, kv = kv_heads x head_dim)") +
                              ", " + parts.mlp_formula();
    if (d.norm_params) b.norm("model.norm", d.hidden, false);
    b.call("model.norm");
    b.exit();
    b.head("lm_head", "model.embed_tokens.weight", d.vocab, d.hidden, d.tied);
}

namespace {

// A dense gated MLP in every layer.
struct DenseLayers : LayerParts {
    GatedMlpSpec mlp;
    explicit DenseLayers(GatedMlpSpec s) : mlp(s) {}
    void mlp_params(HfBuilder& b, const std::string& p, int64_t) const override { gated_mlp_params(b, p, mlp); }
    void mlp_calls(HfBuilder& b, const std::string& p, int64_t) const override { gated_mlp_calls(b, p, mlp); }
    long double mlp_activations(int64_t) const override { return gated_mlp_activations(mlp); }
    long double mlp_outside_tp(int64_t) const override { return 2.0L * mlp.hidden; }
    std::string mlp_formula() const override { return "gated MLP 2h + 8I"; }
};

// Each family's config class defaults (transformers' configuration_<family>.py), for the keys a
// config.json leaves out.
struct RotaryDefaults {
    int64_t vocab, hidden, inter, layers, heads, kv_heads;   // kv_heads 0: num_attention_heads
    int64_t head_dim;                                        // 0: hidden / heads
    bool tied;
    int64_t positions;
};

bool rotary_defaults(const std::string& t, RotaryDefaults& d) {
    if (t == "llama") d = {32000, 4096, 11008, 32, 32, 0, 0, false, 4096};
    else if (t == "mistral") d = {32000, 4096, 14336, 32, 32, 8, 0, false, 4096 * 32};
    else if (t == "qwen2") d = {151936, 4096, 22016, 32, 32, 32, 0, false, 32768};
    else if (t == "qwen3") d = {151936, 4096, 22016, 32, 32, 32, 128, false, 32768};
    else if (t == "gemma") d = {256000, 3072, 24576, 28, 16, 16, 256, true, 8192};
    else if (t == "gemma2") d = {256000, 2304, 9216, 26, 8, 4, 256, true, 8192};
    else if (t == "gemma3_text") d = {262208, 2304, 9216, 26, 8, 4, 256, true, 131072};
    else if (t == "phi3") d = {32064, 3072, 8192, 32, 32, 0, 0, false, 4096};
    else if (t == "olmo" || t == "olmo2") d = {50304, 4096, 11008, 32, 32, 0, 0, false, 2048};
    else return false;
    return true;
}

}  // namespace

AttentionSpec read_attention(const HfConfig& c, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim) {
    AttentionSpec a;
    a.hidden = hidden;
    a.heads = c.count_or("num_attention_heads", heads);
    a.kv_heads = c.count_or_none("num_key_value_heads", kv_heads > 0 ? kv_heads : a.heads);
    if (!c.root.has("head_dim") || c.root.at("head_dim").is_null()) {
        if (head_dim == 0) c.divisible(hidden, "hidden_size", a.heads, "num_attention_heads");
        a.head_dim = head_dim > 0 ? head_dim : hidden / a.heads;
    } else {
        a.head_dim = c.count("head_dim");
    }
    c.divisible(a.heads, "num_attention_heads", a.kv_heads, "num_key_value_heads");
    return a;
}

bool build_rotary_decoder(const HfConfig& c, HfBuilder& b, const std::string& t) {
    RotaryDefaults def{};
    if (!rotary_defaults(t, def)) return false;
    DecoderSpec d;
    d.vocab = c.count_or("vocab_size", def.vocab);
    d.hidden = c.count_or("hidden_size", def.hidden);
    d.layers = c.count_or("num_hidden_layers", def.layers);
    const int64_t inter = c.count_or("intermediate_size", def.inter);
    d.attention = read_attention(c, d.hidden, def.heads, def.kv_heads, def.head_dim);
    // Biases: Qwen2 hard-codes them on q, k, v; Mistral and Phi-3 have none; the others'
    // attention_bias covers q, k, v and o; Llama's mlp_bias its MLP.
    const bool attention_bias = (t == "qwen2" || t == "mistral" || t == "phi3") ? false : c.flag_or("attention_bias", false);
    d.attention.qkv_bias = t == "qwen2" || attention_bias;
    d.attention.o_bias = attention_bias;
    d.attention.fused_qkv = t == "phi3";
    d.attention.qk_norm = (t == "qwen3" || t == "gemma3_text") ? QkNorm::PerHead : t == "olmo2" ? QkNorm::Whole : QkNorm::None;
    d.placement = t == "phi3" ? NormPlacement::PreWithDropouts
                  : (t == "gemma2" || t == "gemma3_text") ? NormPlacement::Sandwich
                  : t == "olmo2" ? NormPlacement::Post : NormPlacement::Pre;
    d.norm_params = t != "olmo";   // OlmoLayerNorm: no weight, no bias
    d.tied = c.flag_or("tie_word_embeddings", def.tied);
    GatedMlpSpec mlp{d.hidden, inter, t == "llama" && c.flag_or("mlp_bias", false),
                     t == "phi3" ? GatedNames::FusedGateUp : GatedNames::Llama};
    b.m.attention_heads = d.attention.heads;
    b.m.kv_heads = d.attention.kv_heads;
    b.m.default_seq_len = default_seq_len(c, def.positions);
    build_decoder(b, d, DenseLayers(mlp));
    return true;
}

}  // namespace zerosim::hf
