// The families before Llama's decoder, built as transformers builds them: falcon (FalconForCausalLM,
// both decoder architectures: the original with one fused query_key_value of multi-query or full
// heads, and new_decoder_architecture's grouped key/value heads; parallel_attn's one or two norms,
// or norms before attention and MLP in turn), opt (OPTForCausalLM: learned positions offset by 2,
// an optional projection of the embedding, the final norm before the layers), bloom
// (BloomForCausalLM: ALiBi, a norm after the word embeddings) and gpt_bigcode (GPTBigCodeForCausalLM:
// GPT-2's layout with nn.Linear weights and multi-query attention).
#include "hf_builder.hpp"

namespace zerosim::hf {

namespace {

// A classic block, for what it stores per token for backward (Model::activations).
struct ClassicBlock {
    int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
    int norms = 2;
    bool shared_input = false;   // attention and MLP read one norm's output (Falcon's parallel block, one norm)
    bool relu = false;           // OPT's ReLU saves its output, the second linear's input: stored once
    int dropout_masks = 0;       // residual dropouts with a rate above 0: a 1-byte mask of h each
};

// Korthikanti et al. 2022 §4.1's accounting, item by item, for the family's own block, per token in
// 16-bit bytes; FlashAttention (SDPA), so no s x s scores or their dropout mask: each norm's input
// 2h; the attention's input 2h, Q, K and V 2(q + 2 kv), the output projection's input 2q; the MLP's
// input 2h (none of its own where it is the attention's), the activation's input 2F and the second
// linear's input 2F (ReLU: 2F once); the masks. GPT's block (MHA, F = 4h, two dropouts) gives the
// paper's 34 h. Whole on every tensor rank (§4.2.1): the norms' and the two blocks' inputs and the masks.
void classic_layer_activations(HfBuilder& b, const ClassicBlock& k) {
    const long double h = static_cast<long double>(k.hidden), q = static_cast<long double>(k.heads) * k.head_dim,
                      kv = static_cast<long double>(k.kv_heads) * k.head_dim, F = static_cast<long double>(k.ffn);
    const long double norms = 2 * h * k.norms, mlp_in = k.shared_input ? 0 : 2 * h, masks = h * k.dropout_masks;
    const long double attention = 2 * h + 2 * (q + 2 * kv) + 2 * q, mlp = mlp_in + (k.relu ? 2 * F : 4 * F);
    b.layer_activations(norms + attention + mlp + masks, norms + 2 * h + mlp_in + masks);
    b.m.activations.formula = std::to_string(k.norms) + " norms' inputs 2h each, attention 2h + 2(q + 2 kv) + 2q (q = heads x head_dim, "
                              "kv = kv_heads x head_dim), MLP " + (k.shared_input ? "" : "2h + ") + (k.relu ? "2F (ReLU)" : "4F") +
                              " (F = its width)" + (k.dropout_masks ? ", " + std::to_string(k.dropout_masks) + " dropout mask(s) h" : "");
}

// FalconModel: word_embeddings, h.N (self_attention, mlp, then the norms), ln_f; lm_head tied by
// default. Defaults are FalconConfig's (falcon-7b's shape).
void build_falcon(const HfConfig& c, HfBuilder& b) {
    const int64_t V = c.count_or("vocab_size", 65024), H = c.count_or("hidden_size", 4544);
    const int64_t L = c.count_either("num_hidden_layers", "n_layer", 32);
    const int64_t nh = c.count_either("num_attention_heads", "n_head", 71);
    c.divisible(H, "hidden_size", nh, c.root.has("n_head") ? "n_head" : "num_attention_heads");
    const int64_t hd = H / nh;
    const bool new_arch = c.flag_or("new_decoder_architecture", false), multi_query = c.flag_or("multi_query", true);
    const bool parallel = c.flag_or("parallel_attn", true), bias = c.flag_or("bias", false);
    // FalconAttention: num_kv_heads from the config under the new architecture (None: the heads),
    // 1 for multi-query, else the heads; the fused projection holds q and every k and v head.
    int64_t kv = new_arch ? c.count_or_none("num_kv_heads", nh) : multi_query ? 1 : nh;
    if (new_arch) c.divisible(nh, "num_attention_heads", kv, "num_kv_heads");
    const int64_t qkv = new_arch ? (nh + 2 * kv) * hd : multi_query ? H + 2 * hd : 3 * H;
    const int64_t ffn = c.count_or_none("ffn_hidden_size", 4 * H);
    // FalconDecoderLayer: without parallel_attn, post_attention_layernorm then input_layernorm;
    // with it, ln_attn and ln_mlp when num_ln_in_parallel_attn is 2 (None: 2 under the new
    // architecture), else one input_layernorm.
    const int64_t lns = c.count_or_none("num_ln_in_parallel_attn", new_arch ? 2 : 1);
    std::vector<std::string> norms = !parallel ? std::vector<std::string>{"post_attention_layernorm", "input_layernorm"}
                                     : lns == 2 ? std::vector<std::string>{"ln_attn", "ln_mlp"}
                                                : std::vector<std::string>{"input_layernorm"};
    b.m.attention_heads = nh;
    b.m.kv_heads = kv;
    b.m.default_seq_len = c.count_or("max_position_embeddings", 2048);
    b.enter("transformer");
    b.param("transformer.word_embeddings.weight", {V, H});
    b.call("transformer.word_embeddings");
    const int64_t start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(start, L, c.root.has("n_layer") ? "n_layer" : "num_hidden_layers");
        const std::string h = "transformer.h." + std::to_string(l), a = h + ".self_attention", m = h + ".mlp";
        b.linear(a + ".query_key_value", H, qkv, bias);
        b.linear(a + ".dense", H, H, bias);
        b.linear(m + ".dense_h_to_4h", H, ffn, bias);
        b.linear(m + ".dense_4h_to_h", ffn, H, bias);
        for (const auto& n : norms) b.norm(h + "." + n, H, true);
        // FalconDecoderLayer: dropout_add of hidden_dropout once after the parallel block, else after
        // the attention and after the MLP (FalconConfig's default rate: 0).
        const int masks = c.probability_or("hidden_dropout", 0.0) > 0 ? (parallel ? 1 : 2) : 0;
        classic_layer_activations(b, {H, nh, kv, hd, ffn, static_cast<int>(norms.size()), parallel && norms.size() == 1, false, masks});
        b.enter(h);
        if (!parallel) b.call(h + ".input_layernorm");
        for (const auto& n : norms)
            if (parallel) b.call(h + "." + n);
        b.enter(a);
        b.call(a + ".query_key_value");
        if (!c.flag_or("alibi", false)) b.call(a + ".rotary_emb", false);
        b.m.parallel.attention.push_back({a + ".query_key_value", a + ".attention", nh, hd, kv});
        b.call(a + ".attention_dropout");
        b.call(a + ".dense");
        b.attention_outputs.emplace_back(a + ".dense", H);
        b.exit();
        if (!parallel) b.call(h + ".post_attention_layernorm");
        b.enter(m);
        b.call(m + ".dense_h_to_4h");
        b.call(m + ".act");
        b.call(m + ".dense_4h_to_h");
        b.exit();
        b.exit();
    }
    b.norm("transformer.ln_f", H, true);
    b.call("transformer.ln_f");
    b.exit();
    b.head("lm_head", "transformer.word_embeddings.weight", V, H, c.flag_or("tie_word_embeddings", true));
}

// One OPTDecoderLayer: self_attn registers k_proj, v_proj, q_proj, out_proj, then
// self_attn_layer_norm, fc1, fc2, final_layer_norm; forward runs q, k, v, out and the norms before
// (do_layer_norm_before, OPT-350m aside) or after their blocks.
void opt_layer(const HfConfig& c, HfBuilder& b, const std::string& h, int64_t H, int64_t F, int64_t nh) {
    const bool bias = c.flag_or("enable_bias", true), affine = c.flag_or("layer_norm_elementwise_affine", true);
    const bool before = c.flag_or("do_layer_norm_before", true);
    const std::string a = h + ".self_attn";
    for (const char* p : {".k_proj", ".v_proj", ".q_proj", ".out_proj"}) b.linear(a + p, H, H, bias);
    if (affine) b.norm(h + ".self_attn_layer_norm", H, true);
    b.linear(h + ".fc1", H, F, bias);
    b.linear(h + ".fc2", F, H, bias);
    if (affine) b.norm(h + ".final_layer_norm", H, true);
    // OPTDecoderLayer: dropout after the attention and after fc2 (OPTConfig's 0.1); activation_function relu.
    const int masks = c.probability_or("dropout", 0.1) > 0 ? 2 : 0;
    classic_layer_activations(b, {H, nh, nh, H / nh, F, 2, false, c.string_or("activation_function", "relu") == "relu", masks});
    b.enter(h);
    if (before) b.call(h + ".self_attn_layer_norm");
    b.enter(a);
    b.call(a + ".q_proj");
    b.call(a + ".k_proj");
    b.call(a + ".v_proj");
    b.m.parallel.attention.push_back({a + ".v_proj", a + ".attention", nh, H / nh, nh});
    b.call(a + ".out_proj");
    b.attention_outputs.emplace_back(a + ".out_proj", H);
    b.exit();
    if (!before) b.call(h + ".self_attn_layer_norm");
    if (before) b.call(h + ".final_layer_norm");
    b.call(h + ".fc1");
    b.call(h + ".activation_fn");
    b.call(h + ".fc2");
    if (!before) b.call(h + ".final_layer_norm");
    b.exit();
}

// OPTForCausalLM: model.decoder registers embed_tokens [V, word_embed_proj_dim], embed_positions
// [max_position_embeddings + 2, H] (OPTLearnedPositionalEmbedding's offset of 2), project_out and
// project_in (when word_embed_proj_dim differs from H), final_layer_norm (with
// do_layer_norm_before, unless _remove_final_layer_norm), then the layers; lm_head is tied.
void build_opt(const HfConfig& c, HfBuilder& b) {
    const int64_t V = c.count_or("vocab_size", 50272), H = c.count_or("hidden_size", 768);
    const int64_t L = c.count_or("num_hidden_layers", 12), F = c.count_or("ffn_dim", 3072);
    const int64_t nh = c.count_or("num_attention_heads", 12), P = c.count_or("max_position_embeddings", 2048);
    const int64_t E = c.count_or_none("word_embed_proj_dim", H);
    c.divisible(H, "hidden_size", nh, "num_attention_heads");
    const bool project = E != H;
    const bool final_norm = c.flag_or("do_layer_norm_before", true) && !c.flag_or("_remove_final_layer_norm", false) &&
                            c.flag_or("layer_norm_elementwise_affine", true);
    b.m.attention_heads = b.m.kv_heads = nh;
    b.m.default_seq_len = P;
    b.enter("model");
    b.enter("model.decoder");
    b.param("model.decoder.embed_tokens.weight", {V, E});
    b.param("model.decoder.embed_positions.weight", {P + 2, H});
    if (project) b.linear("model.decoder.project_out", H, E, false);
    if (project) b.linear("model.decoder.project_in", E, H, false);
    if (final_norm) b.norm("model.decoder.final_layer_norm", H, true);
    b.call("model.decoder.embed_tokens");
    b.call("model.decoder.embed_positions");
    if (project) b.call("model.decoder.project_in");
    const int64_t start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(start, L, "num_hidden_layers");
        opt_layer(c, b, "model.decoder.layers." + std::to_string(l), H, F, nh);
    }
    if (c.flag_or("do_layer_norm_before", true) && !c.flag_or("_remove_final_layer_norm", false))
        b.call("model.decoder.final_layer_norm");
    if (project) b.call("model.decoder.project_out");
    b.exit();
    b.exit();
    b.head("lm_head", "model.decoder.embed_tokens.weight", V, E, c.flag_or("tie_word_embeddings", true));
}

// BloomForCausalLM: transformer.word_embeddings, word_embeddings_layernorm, h.N (input_layernorm,
// self_attention: query_key_value and dense, post_attention_layernorm, mlp), ln_f; lm_head tied.
// BloomConfig reads the width as hidden_size or n_embed, layers and heads as n_layer and n_head.
void build_bloom(const HfConfig& c, HfBuilder& b) {
    const int64_t V = c.count_or("vocab_size", 250880), H = c.count_either("hidden_size", "n_embed", 64);
    const int64_t L = c.count_either("n_layer", "num_hidden_layers", 2), nh = c.count_either("n_head", "num_attention_heads", 8);
    c.divisible(H, c.root.has("n_embed") ? "n_embed" : "hidden_size", nh, c.root.has("n_head") ? "n_head" : "num_attention_heads");
    b.m.attention_heads = b.m.kv_heads = nh;
    b.m.default_seq_len = c.count_or("seq_length", 2048);
    b.enter("transformer");
    b.param("transformer.word_embeddings.weight", {V, H});
    b.norm("transformer.word_embeddings_layernorm", H, true);
    b.call("transformer.word_embeddings");
    b.call("transformer.word_embeddings_layernorm");
    const int64_t start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(start, L, c.root.has("n_layer") ? "n_layer" : "num_hidden_layers");
        const std::string h = "transformer.h." + std::to_string(l), a = h + ".self_attention", m = h + ".mlp";
        b.norm(h + ".input_layernorm", H, true);
        b.linear(a + ".query_key_value", H, 3 * H, true);
        b.linear(a + ".dense", H, H, true);
        b.norm(h + ".post_attention_layernorm", H, true);
        b.linear(m + ".dense_h_to_4h", H, 4 * H, true);
        b.linear(m + ".dense_4h_to_h", 4 * H, H, true);
        // BloomBlock: dropout_add of hidden_dropout after the attention and after the MLP (BloomConfig's 0).
        const int masks = c.probability_or("hidden_dropout", 0.0) > 0 ? 2 : 0;
        classic_layer_activations(b, {H, nh, nh, H / nh, 4 * H, 2, false, false, masks});
        b.enter(h);
        b.call(h + ".input_layernorm");
        b.enter(a);
        b.call(a + ".query_key_value");
        b.m.parallel.attention.push_back({a + ".query_key_value", a + ".attention", nh, H / nh, nh});
        b.call(a + ".attention_dropout");
        b.call(a + ".dense");
        b.attention_outputs.emplace_back(a + ".dense", H);
        b.exit();
        b.call(h + ".post_attention_layernorm");
        b.enter(m);
        b.call(m + ".dense_h_to_4h");
        b.call(m + ".gelu_impl");
        b.call(m + ".dense_4h_to_h");
        b.exit();
        b.exit();
    }
    b.norm("transformer.ln_f", H, true);
    b.call("transformer.ln_f");
    b.exit();
    b.head("lm_head", "transformer.word_embeddings.weight", V, H, c.flag_or("tie_word_embeddings", true));
}

// GPTBigCodeForCausalLM: GPT-2's modules, but nn.Linear ([out, in]) and c_attn of q plus one k and
// one v head under multi_query (the default). Defaults are GPTBigCodeConfig's.
void build_gpt_bigcode(const HfConfig& c, HfBuilder& b) {
    const int64_t V = c.count_or("vocab_size", 50257), E = c.count_or("n_embd", 768), L = c.count_or("n_layer", 12);
    const int64_t nh = c.count_or("n_head", 12), P = c.count_or("n_positions", 1024), I = c.count_or_none("n_inner", 4 * E);
    c.divisible(E, "n_embd", nh, "n_head");
    const bool mq = c.flag_or("multi_query", true);
    const int64_t hd = E / nh, kv = mq ? 1 : nh;
    b.m.attention_heads = nh;
    b.m.kv_heads = kv;
    b.m.default_seq_len = P;
    b.enter("transformer");
    b.param("transformer.wte.weight", {V, E});
    b.param("transformer.wpe.weight", {P, E});
    b.call("transformer.wte");
    b.call("transformer.wpe");
    b.call("transformer.drop");
    const int64_t start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(start, L, "n_layer");
        const std::string h = "transformer.h." + std::to_string(l), a = h + ".attn", m = h + ".mlp";
        b.norm(h + ".ln_1", E, true);
        b.linear(a + ".c_attn", E, E + 2 * kv * hd, true);
        b.linear(a + ".c_proj", E, E, true);
        b.norm(h + ".ln_2", E, true);
        b.linear(m + ".c_fc", E, I, true);
        b.linear(m + ".c_proj", I, E, true);
        // GPTBigCodeAttention's resid_dropout and GPTBigCodeMLP's dropout (GPTBigCodeConfig's 0.1).
        const int masks = c.probability_or("resid_pdrop", 0.1) > 0 ? 2 : 0;
        classic_layer_activations(b, {E, nh, kv, hd, I, 2, false, false, masks});
        b.enter(h);
        b.call(h + ".ln_1");
        b.enter(a);
        b.call(a + ".c_attn");
        b.m.parallel.attention.push_back({a + ".c_attn", a + ".attention", nh, hd, kv});
        b.call(a + ".attn_dropout");
        b.call(a + ".c_proj");
        b.attention_outputs.emplace_back(a + ".c_proj", E);
        b.call(a + ".resid_dropout");
        b.exit();
        b.call(h + ".ln_2");
        b.enter(m);
        b.call(m + ".c_fc");
        b.call(m + ".act");
        b.call(m + ".c_proj");
        b.call(m + ".dropout");
        b.exit();
        b.exit();
    }
    b.norm("transformer.ln_f", E, true);
    b.call("transformer.ln_f");
    b.exit();
    b.head("lm_head", "transformer.wte.weight", V, E, c.flag_or("tie_word_embeddings", true));
}

}  // namespace

bool build_classic(const HfConfig& c, HfBuilder& b, const std::string& t) {
    if (t == "falcon") build_falcon(c, b);
    else if (t == "opt") build_opt(c, b);
    else if (t == "bloom") build_bloom(c, b);
    else if (t == "gpt_bigcode") build_gpt_bigcode(c, b);
    else return false;
    return true;
}

}  // namespace zerosim::hf
