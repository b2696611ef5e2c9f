// Hugging Face config.json -> the parameters, modules and forward order that transformers'
// implementation builds, with decay/no-decay parameter groups as the HF Trainer makes them. This
// file: reading the config (HfConfig), collecting parameters (HfBuilder), GPT-2 and GPT-NeoX, the
// dispatch by model_type, Megatron's tensor split; the other families are in hf_decoder.cpp,
// hf_moe.cpp and hf_classic.cpp (hf_builder.hpp).
#include <map>

#include "hf_builder.hpp"

namespace zerosim {

namespace hf {

int64_t HfConfig::count(const char* key) const {
    auto f = root.at(key);
    if (f.is_null())
        f.fail_here("expected a positive whole number, found null (leave the key out for the model's default)");
    int64_t v = f.as_integer();
    if (v <= 0) f.fail_here("expected a positive whole number, found " + f.raw().dump());
    if (v > kMaxConfigSize)
        f.fail_here("expected at most 2147483647 (2^31 - 1), found " + f.raw().dump() +
                    ": beyond any model's, and its parameters' element counts would not fit 64 bits");
    sizes.emplace_back(key, v);
    return v;
}

int64_t HfConfig::count_or(const char* key, int64_t fallback) const { return root.has(key) ? count(key) : fallback; }

int64_t HfConfig::count_or_none(const char* key, int64_t fallback) const {
    if (!root.has(key) || root.at(key).is_null()) return fallback;
    return count(key);
}

int64_t HfConfig::count0_or(const char* key, int64_t fallback) const {
    if (!root.has(key)) return fallback;
    auto f = root.at(key);
    if (f.is_null()) f.fail_here("expected a whole number from 0, found null (leave the key out for the model's default)");
    return f.as_integer_in(0, kMaxConfigSize);
}

int64_t HfConfig::count_either(const char* key, const char* alias, int64_t fallback) const {
    if (root.has(key)) return count(key);
    return count_or(alias, fallback);
}

bool HfConfig::flag_or(const char* key, bool fallback) const {
    if (!root.has(key)) return fallback;
    auto f = root.at(key);
    if (f.is_null()) f.fail_here("expected true or false, found null (leave the key out for the model's default)");
    return f.as_bool();
}

double HfConfig::probability_or(const char* key, double fallback) const {
    if (!root.has(key)) return fallback;
    auto f = root.at(key);
    if (f.is_null()) f.fail_here("expected a probability from 0 to 1, found null (leave the key out for the model's default)");
    return f.as_number_in(0, 1);
}

std::string HfConfig::string_or(const char* key, const std::string& fallback) const {
    if (!root.has(key) || root.at(key).is_null()) return fallback;
    return root.at(key).as_string();
}

std::vector<int64_t> HfConfig::index_list(const char* key) const {
    std::vector<int64_t> out;
    if (!root.has(key) || root.at(key).is_null()) return out;
    auto f = root.at(key);
    f.expect_array();
    for (size_t i = 0; i < f.size(); ++i) out.push_back(f.at(i).as_integer_in(0, kMaxConfigSize));
    return out;
}

void HfConfig::divisible(int64_t a, const char* a_key, int64_t b, const char* b_key) const {
    if (b > 0 && a % b == 0) return;
    // A default the file leaves out cannot be blamed as a field: name the divisor the file gave.
    if (root.has(a_key))
        root.at(a_key).fail_here("must be divisible by " + std::string(b_key) + " (" + std::to_string(b) + ")");
    root.at(b_key).fail_here("must divide " + std::string(a_key) + " (" + std::to_string(a) + ", the default)");
}

void HfConfig::too_many(const std::string& what, long double elements, std::string key) const {
    int64_t largest = 0;
    if (key.empty() || !root.has(key))
        for (const auto& [k, v] : sizes)
            if (v > largest) largest = v, key = k;
    std::string message = "makes " + what + " " + element_count_text(elements) + " elements, more than " +
                          element_count_text(kMaxModelElements) + ", the most zerosim takes for a model";
    if (key.empty()) fail(root.file(), "", message);
    root.at(key).fail_here(message);
}

void HfConfig::tensor_budget(long double tensors, const char* key) const {
    if (tensors <= static_cast<long double>(kMaxModelTensors)) return;
    std::string message = "makes " + element_count_text(tensors) + " parameter tensors, more than " +
                          std::to_string(kMaxModelTensors) + " (2^18), the most zerosim takes for a model";
    if (!root.has(key)) fail(root.file(), "", message);
    root.at(key).fail_here(message);
}

void HfBuilder::param(const std::string& name, std::vector<int64_t> shape) {
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
    // The last guard on the tensor count (the families check it up front where layers differ).
    if (static_cast<int64_t>(m.params.size()) >= kMaxModelTensors) config.tensor_budget(kMaxModelTensors + 1.0L, "");
    Parameter p;
    p.name = name;
    p.shape = std::move(shape);
    p.group = -1;  // decay/no-decay decided by finish_model
    m.params.push_back(std::move(p));
}

void HfBuilder::check_layers(int64_t before, int64_t layers, const char* layers_key) {
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

// GPT2LMHeadModel. Conv1D weights are stored [in, out]. lm_head shares transformer.wte.weight
// unless tie_word_embeddings is false, so named_parameters() lists it once.
void build_gpt2(const HfConfig& c, HfBuilder& b) {
    // Defaults are GPT2Config's, for keys a config.json leaves out (n_inner None: 4 * n_embd).
    int64_t V = c.count_or("vocab_size", 50257), E = c.count_or("n_embd", 768), L = c.count_or("n_layer", 12),
            H = c.count_or("n_head", 12);
    int64_t P = c.count_or("n_positions", 1024);
    int64_t I = c.count_or_none("n_inner", 4 * E);
    c.divisible(E, "n_embd", H, "n_head");
    b.m.attention_heads = b.m.kv_heads = H;
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
    b.head("lm_head", "transformer.wte.weight", V, E, c.flag_or("tie_word_embeddings", true));
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
    b.head("embed_out", "gpt_neox.embed_in.weight", V, Hd, c.flag_or("tie_word_embeddings", false));
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What zerosim builds, for the line that refuses any other model_type.
const char* const kFamilies =
    "gpt2, gpt_neox, llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo, olmo2, mixtral, "
    "qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, falcon, opt, bloom and gpt_bigcode";

void build_family(const HfConfig& c, HfBuilder& b, const std::string& type) {
    if (type == "gpt2") return build_gpt2(c, b);
    if (type == "gpt_neox") return build_gpt_neox(c, b);
    if (build_rotary_decoder(c, b, type) || build_moe_decoder(c, b, type) || build_classic(c, b, type)) return;
    if (type == "gemma3")   // Gemma3ForConditionalGeneration: a vision tower beside the text model
        c.root.at("model_type")
            .fail_here("\"gemma3\" is Gemma 3's image-text model, whose vision tower zerosim does not build; give its "
                       "text_config as a config.json of its own with \"model_type\": \"gemma3_text\"");
    c.root.at("model_type")
        .fail_here("unsupported model_type \"" + type + "\"; zerosim builds " + kFamilies +
                   " (or give a parameter-list JSON: {\"parameters\": [{\"name\": ..., \"shape\": [...]}, ...]}, README "
                   "\"Model input\")");
}

}  // namespace

}  // namespace hf

void mark_hf_tensor_splits(Model& m, const std::string& model_type) {
    // Megatron's split of a transformer (megatron/core/tensor_parallel/layers.py): the projections
    // into attention and the MLP column-parallel, the ones out of them row-parallel (their biases
    // whole), the embedding and the head vocabulary-parallel (cut along the vocabulary). Experts
    // are split as the dense MLP is (Megatron-core's experts take the tensor-parallel size when
    // expert parallelism is off); routers, MLA's down projections (q_a_proj, kv_a_proj_with_mqa:
    // DeepSeek-V3's own inference/model.py builds wq_a and wkv_a as plain Linear beside the
    // ColumnParallelLinear wq_b and wkv_b and the RowParallelLinear wo), OPT's project_in/out and
    // every norm are whole.
    static const char* const kColumn[] = {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj.",
                                          ".query_key_value.", ".dense_h_to_4h.", ".c_attn.", ".c_fc.",
                                          ".qkv_proj.", ".gate_up_proj.", ".w1.", ".w3.", ".fc1.",
                                          ".q_b_proj.", ".kv_b_proj."};
    static const char* const kRow[] = {".o_proj.weight", ".down_proj.weight", ".attention.dense.weight",
                                       ".dense_4h_to_h.weight", ".c_proj.weight", ".w2.weight", ".fc2.weight",
                                       ".out_proj.weight", ".self_attention.dense.weight"};
    static const char* const kVocab[] = {"embed_tokens.weight", "transformer.wte.weight", "embed_in.weight",
                                         "lm_head.weight", "embed_out.weight", "word_embeddings.weight"};
    const bool conv1d = model_type == "gpt2";   // Conv1D weights are [in, out]
    for (auto& p : m.params) {
        for (const char* t : kColumn)
            if (p.name.find(t) != std::string::npos) p.tp = TpSplit::Column;
        for (const char* t : kRow)
            if (hf::ends_with(p.name, t)) p.tp = TpSplit::Row;
        for (const char* t : kVocab)
            if (hf::ends_with(p.name, t)) p.tp = TpSplit::Column;
        const bool transposed = conv1d && p.shape.size() == 2 && p.name.rfind("transformer.h.", 0) == 0;
        p.tp_dim = p.tp == TpSplit::Row ? (transposed ? 0 : 1) : (transposed ? 1 : 0);
    }
}

namespace {

// Resolve each call to the module that uses parameters directly, then derive the forward order
// from the tree. A tied head owns no parameter of its own: it uses the embedding's.
Status finish_hf_model(hf::HfBuilder& b) {
    auto calls = std::move(b.m.calls);
    b.m.calls.clear();
    b.m.calls.push_back(CallNode{});  // placeholder so finish_model keeps our tree
    if (auto err = finish_model(b.m, GroupPolicy::DecayNoDecay, {})) return err;
    b.m.calls = std::move(calls);
    if (!b.tied_head.empty()) {
        int embed_idx = -1;
        for (size_t i = 0; i < b.m.params.size(); ++i)
            if (b.m.params[i].name == b.tied_embed) embed_idx = static_cast<int>(i);
        b.m.modules.push_back(Module{b.tied_head, {embed_idx}, ModuleKind::Linear, 0});
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
    std::map<std::string, int64_t> widths(b.attention_outputs.begin(), b.attention_outputs.end());
    for (auto& mod : b.m.modules) {
        auto w = widths.find(mod.name);
        if (w != widths.end()) mod.attention_width = w->second;
    }
    return std::nullopt;
}

}  // namespace

Result<Model> model_from_hf_config_json(const std::string& file, const std::string& text) {
    auto doc = parse_json_text(text, file);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), file, "");
        root.expect_object();
        hf::HfConfig c{root, {}};
        std::string type = root.at("model_type").as_string();
        hf::HfBuilder b(c);
        b.m.source = file;
        b.m.name = root.has("_name_or_path") && root.at("_name_or_path").is_string() ? root.at("_name_or_path").as_string() : type;
        if (b.m.name.empty()) b.m.name = type;
        b.m.gradient_checkpointing = c.flag_or("gradient_checkpointing", false);   // analysis/fit.hpp's activations
        hf::build_family(c, b, type);
        for (const char* key : {"hidden_size", "n_embd", "n_embed"})   // GPT2Config, GPTBigCodeConfig, BloomConfig aliases
            if (root.has(key) && root.at(key).raw().is_number_integer()) {
                b.m.hidden_size = root.at(key).as_integer_in(1, 1 << 24);
                break;
            }
        if (auto err = finish_hf_model(b)) return *err;
        mark_hf_tensor_splits(b.m, type);
        return std::move(b.m);
    } catch (const InputFailure& f) {
        return f.error;
    }
}

}  // namespace zerosim
