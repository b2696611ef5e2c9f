// Hugging Face config.json -> the parameters, modules and forward order that transformers'
// implementation builds (GPT2LMHeadModel, GPTNeoXForCausalLM, LlamaForCausalLM and relatives),
// with decay/no-decay parameter groups as the HF Trainer makes them.
#include <functional>
#include <map>

#include "core/json_input.hpp"
#include "inputs/model.hpp"

namespace zerosim {

namespace {

// The largest size a config may give (hidden_size, vocab_size, num_hidden_layers...): 2^31 - 1,
// beyond every real model's, so that any product of two sizes fits 64 bits before it is checked.
constexpr int64_t kMaxConfigSize = INT32_MAX;

// The most parameter tensors a model may have: real checkpoints have hundreds (Llama-2-70B 723)
// to tens of thousands (DeepSeek-V3, a mixture of 256 experts, about 91,000); past 2^18 a config
// is a typo, and building its schedule would take minutes and gigabytes before failing.
constexpr int64_t kMaxModelTensors = 1 << 18;

struct HfConfig {
    JsonField root;
    // Every size read, so that a parameter too large to count can be blamed on the largest of them.
    mutable std::vector<std::pair<std::string, int64_t>> sizes;

    int64_t count(const char* key) const {
        auto f = root.at(key);
        int64_t v = f.as_integer();
        if (v <= 0) f.fail_here("expected a positive whole number, found " + f.raw().dump());
        if (v > kMaxConfigSize)
            f.fail_here("expected at most 2147483647 (2^31 - 1), found " + f.raw().dump() +
                        ": beyond any model's, and its parameters' element counts would not fit 64 bits");
        sizes.emplace_back(key, v);
        return v;
    }
    int64_t count_or(const char* key, int64_t fallback) const {
        if (!root.has(key) || root.at(key).is_null()) return fallback;
        return count(key);
    }
    bool flag_or(const char* key, bool fallback) const {
        if (!root.has(key) || root.at(key).is_null()) return fallback;
        return root.at(key).as_bool();
    }
    void divisible(int64_t a, const char* a_key, int64_t b, const char* b_key) const {
        if (b > 0 && a % b == 0) return;
        // A default the file leaves out cannot be blamed as a field: name the divisor the file gave.
        if (root.has(a_key))
            root.at(a_key).fail_here("must be divisible by " + std::string(b_key) + " (" + std::to_string(b) + ")");
        root.at(b_key).fail_here("must divide " + std::string(a_key) + " (" + std::to_string(a) + ", the default)");
    }
    // A parameter or a running total past kMaxModelElements, blamed on the largest size the config
    // gave (the defaults a config leaves out are never that large); the field names that key.
    [[noreturn]] void too_many(const std::string& what, long double elements, std::string key = "") const {
        int64_t largest = 0;
        if (key.empty() || !root.has(key))
            for (const auto& [k, v] : sizes)
                if (v > largest) largest = v, key = k;
        std::string message = "makes " + what + " " + element_count_text(elements) + " elements, more than " +
                              element_count_text(kMaxModelElements) + ", the most zerosim takes for a model";
        if (key.empty()) fail(root.file(), "", message);
        root.at(key).fail_here(message);
    }
};

// Collects parameters in registration order and the call tree of one forward pass.
struct HfBuilder {
    Model m;
    std::vector<int> stack;               // open container calls
    std::vector<std::pair<std::string, int64_t>> attention_outputs;  // output projection -> heads' width

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

    void param(const std::string& name, std::vector<int64_t> shape) {
        // Checked arithmetic: a shape whose product wraps (hidden_size 2^32 squared is 2^64) must
        // not turn into a small or zero element count.
        int64_t numel = 1;
        long double elements = 1;
        bool wrapped = false;
        for (int64_t d : shape) {
            elements *= static_cast<long double>(d);
            wrapped = __builtin_mul_overflow(numel, d, &numel) || wrapped;
        }
        if (wrapped || numel > kMaxModelElements) config.too_many("'" + name + "'", elements);
        int64_t before = total;
        if (__builtin_add_overflow(before, numel, &total) || total > kMaxModelElements)
            config.too_many("the parameters up to '" + name + "'", static_cast<long double>(before) + numel);
        Parameter p;
        p.name = name;
        p.shape = std::move(shape);
        p.group = -1;  // decay/no-decay decided by finish_model
        m.params.push_back(std::move(p));
    }
    void linear(const std::string& name, int64_t in, int64_t out, bool bias) {
        param(name + ".weight", {out, in});
        if (bias) param(name + ".bias", {out});
    }
    // After the first of `layers` identical layers (begun when `total` was `before`): all of them
    // must fit, checked before the other layers are built.
    void check_layers(int64_t before, int64_t layers, const char* layers_key) {
        int64_t per_layer = total - before, rest = 0, all = 0;
        long double elements = static_cast<long double>(before) + static_cast<long double>(per_layer) * layers;
        if (__builtin_mul_overflow(per_layer, layers - 1, &rest) || __builtin_add_overflow(total, rest, &all) ||
            all > kMaxModelElements)
            config.too_many("the parameters up to the last of " + std::to_string(layers) + " layers", elements,
                            layers_key);
        // Then the tensors: each is a name, a module and ops to build.
        const int64_t tensors_per_layer = static_cast<int64_t>(m.params.size()) - tensors_at_layers_start;
        if (tensors_per_layer > 0 && layers > (kMaxModelTensors - tensors_at_layers_start) / tensors_per_layer)
            config.root.at(layers_key).fail_here(
                "expected at most " + std::to_string((kMaxModelTensors - tensors_at_layers_start) / tensors_per_layer) +
                " layers of " + std::to_string(tensors_per_layer) + " parameter tensors each (zerosim takes up to " +
                std::to_string(kMaxModelTensors) + " tensors), found " + std::to_string(layers));
    }
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
};


// GPT2LMHeadModel. Conv1D weights are stored [in, out]. lm_head shares transformer.wte.weight
// unless tie_word_embeddings is false, so named_parameters() lists it once.
void build_gpt2(const HfConfig& c, HfBuilder& b) {
    // Defaults are GPT2Config's, for keys a config.json leaves out.
    int64_t V = c.count_or("vocab_size", 50257), E = c.count_or("n_embd", 768), L = c.count_or("n_layer", 12),
            H = c.count_or("n_head", 12);
    int64_t P = c.count_or("n_positions", 1024);
    int64_t I = c.count_or("n_inner", 4 * E);
    c.divisible(E, "n_embd", H, "n_head");
    b.m.attention_heads = b.m.kv_heads = H;
    bool tied = c.flag_or("tie_word_embeddings", true);
    b.m.default_seq_len = P;
    b.enter("transformer");
    b.param("transformer.wte.weight", {V, E});
    b.param("transformer.wpe.weight", {P, E});
    b.call("transformer.wte");
    b.call("transformer.wpe");
    b.call("transformer.drop");
    const int64_t layers_start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(layers_start, L, "n_layer");
        std::string h = "transformer.h." + std::to_string(l);
        b.norm(h + ".ln_1", E, true);
        b.param(h + ".attn.c_attn.weight", {E, 3 * E});
        b.param(h + ".attn.c_attn.bias", {3 * E});
        b.param(h + ".attn.c_proj.weight", {E, E});
        b.param(h + ".attn.c_proj.bias", {E});
        b.norm(h + ".ln_2", E, true);
        b.param(h + ".mlp.c_fc.weight", {E, I});
        b.param(h + ".mlp.c_fc.bias", {I});
        b.param(h + ".mlp.c_proj.weight", {I, E});
        b.param(h + ".mlp.c_proj.bias", {E});
        b.enter(h);
        b.call(h + ".ln_1");
        b.enter(h + ".attn");
        b.call(h + ".attn.c_attn");
        b.m.parallel.attention.push_back({h + ".attn.c_attn", h + ".attn.attention", H, E / H, H});
        b.call(h + ".attn.attn_dropout");
        b.call(h + ".attn.c_proj");
        b.attention_outputs.emplace_back(h + ".attn.c_proj", E);
        b.call(h + ".attn.resid_dropout");
        b.exit();
        b.call(h + ".ln_2");
        b.enter(h + ".mlp");
        b.call(h + ".mlp.c_fc");
        b.call(h + ".mlp.act");
        b.call(h + ".mlp.c_proj");
        b.call(h + ".mlp.dropout");
        b.exit();
        b.exit();
    }
    b.norm("transformer.ln_f", E, true);
    b.call("transformer.ln_f");
    b.exit();
    if (!tied) b.param("lm_head.weight", {V, E});
    b.call("lm_head");
}

// GPTNeoXForCausalLM. The layer registers both norms before attention and MLP; it runs
// input_layernorm, attention, post_attention_layernorm, mlp.
void build_gpt_neox(const HfConfig& c, HfBuilder& b) {
    // Defaults are GPTNeoXConfig's (note: intermediate_size is a literal default, not 4 * hidden).
    int64_t V = c.count_or("vocab_size", 50432), Hd = c.count_or("hidden_size", 6144),
            L = c.count_or("num_hidden_layers", 44);
    int64_t nh = c.count_or("num_attention_heads", 64);
    int64_t I = c.count_or("intermediate_size", 24576);
    c.divisible(Hd, "hidden_size", nh, "num_attention_heads");
    b.m.attention_heads = b.m.kv_heads = nh;
    bool bias = c.flag_or("attention_bias", true);
    bool tied = c.flag_or("tie_word_embeddings", false);
    b.m.default_seq_len = c.count_or("max_position_embeddings", 2048);
    b.enter("gpt_neox");
    b.param("gpt_neox.embed_in.weight", {V, Hd});
    b.call("gpt_neox.embed_in");
    b.call("gpt_neox.emb_dropout");
    const int64_t layers_start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(layers_start, L, "num_hidden_layers");
        std::string h = "gpt_neox.layers." + std::to_string(l);
        b.norm(h + ".input_layernorm", Hd, true);
        b.norm(h + ".post_attention_layernorm", Hd, true);
        b.linear(h + ".attention.query_key_value", Hd, 3 * Hd, bias);
        b.linear(h + ".attention.dense", Hd, Hd, bias);
        b.linear(h + ".mlp.dense_h_to_4h", Hd, I, true);
        b.linear(h + ".mlp.dense_4h_to_h", I, Hd, true);
        b.enter(h);
        b.call(h + ".input_layernorm");
        b.enter(h + ".attention");
        b.call(h + ".attention.query_key_value");
        b.m.parallel.attention.push_back({h + ".attention.query_key_value", h + ".attention.attention", nh, Hd / nh, nh});
        b.call(h + ".attention.rotary_emb", false);
        b.call(h + ".attention.attention_dropout");
        b.call(h + ".attention.dense");
        b.attention_outputs.emplace_back(h + ".attention.dense", Hd);
        b.exit();
        b.call(h + ".post_attention_dropout");
        b.call(h + ".post_attention_layernorm");
        b.enter(h + ".mlp");
        b.call(h + ".mlp.dense_h_to_4h");
        b.call(h + ".mlp.act");
        b.call(h + ".mlp.dense_4h_to_h");
        b.exit();
        b.call(h + ".post_mlp_dropout");
        b.exit();
    }
    b.norm("gpt_neox.final_layer_norm", Hd, true);
    b.call("gpt_neox.final_layer_norm");
    b.exit();
    if (!tied) b.param("embed_out.weight", {V, Hd});
    b.call("embed_out");
}

// LlamaForCausalLM and relatives (mistral, qwen2: q/k/v biases for qwen2). The decoder layer
// registers self_attn, mlp, input_layernorm, post_attention_layernorm and runs input_layernorm,
// self_attn (q, k, v, o), post_attention_layernorm, mlp (gate, up, down).
void build_llama(const HfConfig& c, HfBuilder& b, const std::string& type) {
    // Defaults are LlamaConfig's / MistralConfig's / Qwen2Config's.
    bool mistral = type == "mistral", qwen2 = type == "qwen2";
    int64_t V = c.count_or("vocab_size", qwen2 ? 151936 : 32000), Hd = c.count_or("hidden_size", 4096),
            L = c.count_or("num_hidden_layers", 32);
    int64_t nh = c.count_or("num_attention_heads", 32);
    int64_t nkv = c.count_or("num_key_value_heads", mistral ? 8 : nh);
    int64_t I = c.count_or("intermediate_size", mistral ? 14336 : qwen2 ? 22016 : 11008);
    c.divisible(Hd, "hidden_size", nh, "num_attention_heads");
    c.divisible(nh, "num_attention_heads", nkv, "num_key_value_heads");
    int64_t hd = c.count_or("head_dim", Hd / nh);
    b.m.attention_heads = nh;
    b.m.kv_heads = nkv;
    // Qwen2 hard-codes biases on q, k, v only; Mistral has none; Llama's attention_bias covers q, k, v, o.
    bool qkv_bias = qwen2 ? true : mistral ? false : c.flag_or("attention_bias", false);
    bool o_bias = (qwen2 || mistral) ? false : c.flag_or("attention_bias", false);
    bool mlp_bias = c.flag_or("mlp_bias", false);
    bool tied = c.flag_or("tie_word_embeddings", false);
    b.m.default_seq_len = std::min<int64_t>(c.count_or("max_position_embeddings", 4096), 4096);
    b.enter("model");
    b.param("model.embed_tokens.weight", {V, Hd});
    b.call("model.embed_tokens");
    const int64_t layers_start = b.start_layers();
    for (int64_t l = 0; l < L; ++l) {
        if (l == 1) b.check_layers(layers_start, L, "num_hidden_layers");
        std::string h = "model.layers." + std::to_string(l);
        b.linear(h + ".self_attn.q_proj", Hd, nh * hd, qkv_bias);
        b.linear(h + ".self_attn.k_proj", Hd, nkv * hd, qkv_bias);
        b.linear(h + ".self_attn.v_proj", Hd, nkv * hd, qkv_bias);
        b.linear(h + ".self_attn.o_proj", nh * hd, Hd, o_bias);
        b.linear(h + ".mlp.gate_proj", Hd, I, mlp_bias);
        b.linear(h + ".mlp.up_proj", Hd, I, mlp_bias);
        b.linear(h + ".mlp.down_proj", I, Hd, mlp_bias);
        b.norm(h + ".input_layernorm", Hd, false);
        b.norm(h + ".post_attention_layernorm", Hd, false);
        b.enter(h);
        b.call(h + ".input_layernorm");
        b.enter(h + ".self_attn");
        b.call(h + ".self_attn.q_proj");
        b.call(h + ".self_attn.k_proj");
        b.call(h + ".self_attn.v_proj");
        b.call(h + ".self_attn.rotary_emb", false);
        b.m.parallel.attention.push_back({h + ".self_attn.v_proj", h + ".self_attn.attention", nh, hd, nkv});
        b.call(h + ".self_attn.o_proj");
        b.attention_outputs.emplace_back(h + ".self_attn.o_proj", nh * hd);
        b.exit();
        b.call(h + ".post_attention_layernorm");
        b.enter(h + ".mlp");
        b.call(h + ".mlp.gate_proj");
        b.call(h + ".mlp.act_fn");
        b.call(h + ".mlp.up_proj");
        b.call(h + ".mlp.down_proj");
        b.exit();
        b.exit();
    }
    b.norm("model.norm", Hd, false);
    b.call("model.norm");
    b.exit();
    if (!tied) b.param("lm_head.weight", {V, Hd});
    b.call("lm_head");
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void mark_hf_tensor_splits(Model& m, const std::string& model_type) {
    // Megatron's split of a transformer (megatron/core/tensor_parallel/layers.py): the projections
    // into attention and the MLP column-parallel, the ones out of them row-parallel (their biases
    // whole), the embedding and the head vocabulary-parallel (cut along the vocabulary).
    static const char* const kColumn[] = {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj.",
                                          ".query_key_value.", ".dense_h_to_4h.", ".c_attn.", ".c_fc."};
    static const char* const kRow[] = {".o_proj.weight", ".down_proj.weight", ".attention.dense.weight",
                                       ".dense_4h_to_h.weight", ".c_proj.weight"};
    static const char* const kVocab[] = {"embed_tokens.weight", "transformer.wte.weight", "embed_in.weight",
                                         "lm_head.weight", "embed_out.weight"};
    const bool conv1d = model_type == "gpt2";   // Conv1D weights are [in, out]
    for (auto& p : m.params) {
        for (const char* t : kColumn)
            if (p.name.find(t) != std::string::npos) p.tp = TpSplit::Column;
        for (const char* t : kRow)
            if (ends_with(p.name, t)) p.tp = TpSplit::Row;
        for (const char* t : kVocab)
            if (ends_with(p.name, t)) p.tp = TpSplit::Column;
        const bool transposed = conv1d && p.shape.size() == 2 && p.name.rfind("transformer.h.", 0) == 0;
        p.tp_dim = p.tp == TpSplit::Row ? (transposed ? 0 : 1) : (transposed ? 1 : 0);
    }
}

Result<Model> model_from_hf_config_json(const std::string& file, const std::string& text) {
    auto doc = parse_json_text(text, file);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), file, "");
        root.expect_object();
        HfConfig c{root, {}};
        std::string type = root.at("model_type").as_string();
        HfBuilder b(c);
        b.m.source = file;
        b.m.name = root.has("_name_or_path") && root.at("_name_or_path").is_string() ? root.at("_name_or_path").as_string() : type;
        if (b.m.name.empty()) b.m.name = type;
        b.m.gradient_checkpointing = c.flag_or("gradient_checkpointing", false);   // analysis/fit.hpp's activations
        bool tied_head = false;
        std::string head, embed;
        if (type == "gpt2") {
            build_gpt2(c, b);
            tied_head = c.flag_or("tie_word_embeddings", true);
            head = "lm_head";
            embed = "transformer.wte.weight";
        } else if (type == "gpt_neox") {
            build_gpt_neox(c, b);
            tied_head = c.flag_or("tie_word_embeddings", false);
            head = "embed_out";
            embed = "gpt_neox.embed_in.weight";
        } else if (type == "llama" || type == "mistral" || type == "qwen2") {
            build_llama(c, b, type);
            tied_head = c.flag_or("tie_word_embeddings", false);
            head = "lm_head";
            embed = "model.embed_tokens.weight";
        } else {
            root.at("model_type").fail_here("unsupported model_type \"" + type +
                                            "\"; zerosim builds gpt2, gpt_neox, llama, mistral and qwen2 "
                                            "(or give a parameter-list JSON)");
        }
        // Resolve each call to the module that uses parameters directly, then derive the forward
        // order from the tree. A tied head owns no parameter of its own: it uses the embedding's.
        auto calls = std::move(b.m.calls);
        b.m.calls.clear();
        b.m.calls.push_back(CallNode{});  // placeholder so finish_model keeps our tree
        if (auto err = finish_model(b.m, GroupPolicy::DecayNoDecay, {})) return *err;
        b.m.calls = std::move(calls);
        if (tied_head) {
            int embed_idx = -1;
            for (size_t i = 0; i < b.m.params.size(); ++i)
                if (b.m.params[i].name == embed) embed_idx = static_cast<int>(i);
            b.m.modules.push_back(Module{head, {embed_idx}, ModuleKind::Linear, 0});
        }
        std::map<std::string, int> idx;
        for (size_t i = 0; i < b.m.modules.size(); ++i) idx[b.m.modules[i].name] = static_cast<int>(i);
        b.m.forward_order.clear();
        for (auto& node : b.m.calls) {
            auto it = idx.find(node.name);
            if (it != idx.end() && !node.name.empty()) {
                node.module = it->second;
                b.m.forward_order.push_back(it->second);
            }
        }
        mark_gradient_inputs(b.m);
        for (auto& mod : b.m.modules)
            for (const auto& [suffix, width] : b.attention_outputs)
                if (mod.name == suffix) mod.attention_width = width;
        mark_hf_tensor_splits(b.m, type);
        return std::move(b.m);
    } catch (const InputFailure& f) {
        return f.error;
    }
}

}  // namespace zerosim
