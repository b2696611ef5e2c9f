// GPT-NeoX's YAML configs (EleutherAI/gpt-neox at 252ddc52, the commit of configs/20B.yml):
// megatron/neox_arguments/arguments.py (from_ymls, the derived values), neox_args.py (defaults),
// deepspeed_args.py (the keys handed to DeepSpeed) and megatron/model/gpt2_model.py GPT2ModelPipe
// (the layer list), transformer.py, word_embeddings.py and norms.py (the parameters).
#include "inputs/neox_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

namespace zerosim {

namespace {

// --- YAML to JSON, as PyYAML's FullLoader types plain scalars (YAML 1.1 resolvers) --------------

constexpr int kMaxNeoxDepth = 64;   // GPT-NeoX configs nest three deep; a hostile file stops here

Json neox_scalar(const YAML::Node& n) {
    const std::string& v = n.Scalar();
    if (n.Tag() == "!") return v;   // quoted: a string whatever it reads like
    static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    if (yes.count(v)) return true;
    if (no.count(v)) return false;
    if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
    static const std::regex integer("[-+]?(0|[1-9][0-9_]*)");
    static const std::regex real("[-+]?(\\.[0-9]+|[0-9][0-9_]*\\.[0-9_]*)([eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+");
    std::string digits = v;
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    try {
        if (std::regex_match(v, integer)) return static_cast<int64_t>(std::stoll(digits));
        if (std::regex_match(v, real)) return std::stod(digits);
    } catch (const std::out_of_range&) {
        return v;   // read as text; the typed accessor that wants a number names the key
    }
    return v;
}

Json neox_to_json(const YAML::Node& n, const std::string& file, const std::string& path, int depth) {
    if (depth > kMaxNeoxDepth) fail(file, path, "nested deeper than " + std::to_string(kMaxNeoxDepth) + " levels");
    switch (n.Type()) {
        case YAML::NodeType::Scalar:
            return neox_scalar(n);
        case YAML::NodeType::Sequence: {
            Json out = Json::array();
            for (size_t i = 0; i < n.size(); ++i)
                out.push_back(neox_to_json(n[i], file, path + "[" + std::to_string(i) + "]", depth + 1));
            return out;
        }
        case YAML::NodeType::Map: {
            Json out = Json::object();
            for (const auto& kv : n) {
                if (!kv.first.IsScalar()) fail(file, path, "a key that is not a plain name");
                const std::string key = kv.first.Scalar();
                if (out.contains(key)) fail(file, path.empty() ? key : path + "." + key, "given twice");
                out[key] = neox_to_json(kv.second, file, path.empty() ? key : path + "." + key, depth + 1);
            }
            return out;
        }
        default:
            return nullptr;
    }
}

// NeoXArgs.from_ymls (arguments.py 142-185): each file's keys with '-' read as '_'; a key a later file
// repeats is refused (GPT-NeoX compares the key as written with the merged, converted ones).
Json merge_neox_files(const std::vector<std::string>& names, const std::vector<std::string>& texts,
                      std::vector<std::string>& origin) {
    Json merged = Json::object();
    for (size_t f = 0; f < texts.size(); ++f) {
        YAML::Node doc;
        try {
            doc = YAML::Load(texts[f]);
        } catch (const YAML::Exception& e) {
            fail(names[f], "", "malformed YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
        }
        if (!doc.IsMap()) fail(names[f], "", "expected a mapping of GPT-NeoX keys at the top level");
        Json one = neox_to_json(doc, names[f], "", 0);
        for (auto it = one.begin(); it != one.end(); ++it) {
            if (merged.contains(it.key()))
                fail(names[f], it.key(), "is given again after an earlier file (GPT-NeoX's from_ymls refuses duplicate keys)");
            std::string key = it.key();
            std::replace(key.begin(), key.end(), '-', '_');
            merged[key] = it.value();
            origin.push_back(key);
        }
    }
    return merged;
}

// --- What GPT-NeoX reads -------------------------------------------------------------------------

// NeoXArgsDeepspeedConfig (deepspeed_args.py): the keys handed to deepspeed.initialize as its config.
const std::vector<std::string>& neox_deepspeed_keys() {
    static const std::vector<std::string> keys = {
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer", "scheduler",
        "fp32_allreduce", "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "fp16", "bf16", "amp",
        "gradient_clipping", "zero_optimization", "curriculum_learning", "steps_per_print", "wall_clock_breakdown",
        "dump_state", "flops_profiler", "communication_data_type", "autotuning", "activation_checkpointing",
        "sparse_attention", "data_efficiency", "tensorboard", "wandb", "csv_monitor", "elasticity", "comms_logger",
        "compression_training", "checkpoint", "data_types", "zero_allow_untested_optimizer"};
    return keys;
}

// Keys of the model's shape that zerosim reads (neox_args.py NeoXArgsModel / NeoXArgsParallelism).
const std::vector<std::string>& neox_model_keys() {
    static const std::vector<std::string> keys = {
        "num_layers", "hidden_size", "num_attention_heads", "seq_length", "max_position_embeddings", "norm", "pos_emb",
        "rotary_pct", "no_weight_tying", "gpt_j_residual", "output_layer_parallelism", "make_vocab_size_divisible_by",
        "pipe_parallel_size", "model_parallel_size", "pipe_partition_method", "checkpoint_activations",
        "checkpoint_num_layers", "partition_activations", "activation", "deepspeed_extra_args", "layernorm_epsilon",
        "rms_norm_epsilon", "rotary_emb_base", "rotary_save_freqs_buffer"};
    return keys;
}

// Keys that change the model's parameters or its collectives, refused unless at GPT-NeoX's default
// (a structure zerosim does not build yet): key, default as GPT-NeoX writes it.
const std::vector<std::pair<std::string, Json>>& neox_unmodelled_keys() {
    static const std::vector<std::pair<std::string, Json>> keys = {
        {"num_kv_heads", nullptr},     {"mlp_type", "regular"},        {"moe_num_experts", 1},
        {"sequence_parallel", false},  {"use_bias_in_norms", true},    {"use_bias_in_attn_linear", true},
        {"use_qk_layernorm", false},   {"num_unique_layers", nullptr}, {"intermediate_size", nullptr},
        {"expansion_factor", nullptr}, {"attention_config", nullptr},  {"num_tokentypes", 0},
        {"use_mup", false},            {"te_columnparallel", false},   {"te_rowparallel", false}};
    return keys;
}

// Training settings that change no collective (data, schedule of the learning rate, logging, init):
// read by GPT-NeoX and not needed here; any other key is named in a warning.
bool neox_quiet_key(const std::string& k) {
    static const std::set<std::string> quiet = {
        "vocab_file", "merge_file", "save", "load", "data_path", "train_data_paths", "valid_data_paths", "test_data_paths",
        "data_impl", "split", "train_iters", "lr_decay_iters", "lr_decay_style", "warmup", "min_lr", "lr", "init_method",
        "output_layer_init_method", "weight_decay", "hidden_dropout", "attention_dropout", "log_interval",
        "eval_interval", "eval_iters", "save_interval", "tensorboard_dir", "log_dir", "tokenizer_type",
        "distributed_backend", "seed", "scaled_upper_triang_masked_softmax_fusion", "scaled_masked_softmax_fusion",
        "bias_gelu_fusion", "synchronize_each_layer", "use_wandb", "wandb_group", "wandb_team", "wandb_project",
        "wandb_host", "keep_last_n_checkpoints", "checkpoint_factor", "extra_save_iters", "log_grad_norm",
        "log_param_norm", "log_optimizer_states", "log_gradient_noise_scale", "launcher", "hostfile", "include",
        "exclude", "num_nodes", "num_gpus", "master_port", "master_addr", "use_shared_fs", "finetune", "iteration",
        "no_load_optim", "no_load_rng", "no_save_optim", "no_save_rng", "short_seq_prob", "mmap_warmup", "label_data_paths",
        "train_data_weights", "valid_data_weights", "test_data_weights", "weight_by_num_documents",
        "weighted_sampler_alpha", "data_cache_dir", "eod_mask_loss", "reset_attention_mask", "reset_position_ids",
        "opt_pos_emb_offset", "onnx_safe", "apply_query_key_layer_scaling", "attention_softmax_in_fp32",
        "rope_fusion", "fp16_lm_cross_entropy", "precision", "config_files", "user_script", "git_hash", "clip_grad",
        "checkpoint_scale", "checkpoint_validation_with_forward_pass", "memory_profiling", "profile", "profile_step_start",
        "profile_step_stop", "comet_project", "use_comet", "zero_stage", "zero_reduce_scatter", "zero_contiguous_gradients",
        "zero_reduce_bucket_size", "zero_allgather_bucket_size", "lr_decay_fraction", "contiguous_checkpointing",
        "checkpoint_in_cpu", "hysteresis", "dynamic_loss_scale", "loss_scale", "loss_scale_window", "min_loss_scale",
        "initial_scale_power", "pack_impl", "allow_chopped", "dataset_impl", "s3_path", "gradient_noise_scale_n_batches"};
    return quiet.count(k) > 0;
}

struct NeoxShape {
    int64_t layers = 0, hidden = 0, heads = 0, seq = 0, max_positions = 0, vocab = 0, ff = 0, ff_in = 0;
    std::string norm = "layernorm", pos_emb = "learned", output_parallelism = "row";
    bool tied = true, gpt_j = false;
};

void add_param(Json& params, const std::string& name, std::vector<int64_t> shape, const char* tp = nullptr, bool reduce = true) {
    Json p = {{"name", name}, {"shape", std::move(shape)}};
    if (tp) p["tp"] = tp;
    if (!reduce) p["tp_reduce"] = false;
    params.push_back(std::move(p));
}

void add_norm(Json& params, const std::string& prefix, const NeoxShape& s) {
    if (s.norm == "rmsnorm") {   // norms.py RMSNorm: scale (an offset only with bias, off by default)
        add_param(params, prefix + ".scale", {s.hidden});
        return;
    }
    add_param(params, prefix + ".weight", {s.hidden});   // torch LayerNorm (or Apex's fused one)
    add_param(params, prefix + ".bias", {s.hidden});
}

// EmbeddingPipe (word_embeddings.py Embedding): a vocabulary-parallel word embedding, and a learned
// position embedding only with pos-emb "learned".
void add_embedding(Json& params, const std::string& prefix, const NeoxShape& s) {
    add_param(params, prefix + ".word_embeddings.weight", {s.vocab, s.hidden}, "column");
    if (s.pos_emb == "learned") add_param(params, prefix + ".position_embeddings.weight", {s.max_positions, s.hidden});
}

// ParallelTransformerLayerPipe (transformer.py 516-662): attention's fused query_key_value (column
// parallel, 3h) and dense (row parallel), the MLP's h -> ff (column) and ff -> h (row); row-parallel
// biases are whole on every rank (skip_bias_add). Registration order is forward order.
void add_transformer_layer(Json& params, const std::string& prefix, const NeoxShape& s) {
    add_norm(params, prefix + ".input_layernorm", s);
    add_param(params, prefix + ".attention.query_key_value.weight", {3 * s.hidden, s.hidden}, "column");
    add_param(params, prefix + ".attention.query_key_value.bias", {3 * s.hidden}, "column");
    // gpt_j_residual (transformer.py 549-572, 624): attention's dense and the MLP's output skip their
    // all_reduce (parallel_output) and the layer reduces their sum once, after the MLP.
    add_param(params, prefix + ".attention.dense.weight", {s.hidden, s.hidden}, "row", !s.gpt_j);
    add_param(params, prefix + ".attention.dense.bias", {s.hidden});
    add_norm(params, prefix + ".post_attention_layernorm", s);
    add_param(params, prefix + ".mlp.dense_h_to_4h.weight", {s.ff, s.hidden}, "column");
    add_param(params, prefix + ".mlp.dense_h_to_4h.bias", {s.ff}, "column");
    add_param(params, prefix + ".mlp.dense_4h_to_h.weight", {s.hidden, s.ff_in}, "row");
    add_param(params, prefix + ".mlp.dense_4h_to_h.bias", {s.hidden});
}

Json pipe_layer(const std::string& name, const char* type, std::vector<int64_t> output, const NeoxShape& s, bool mask) {
    Json l = {{"name", name}, {"type", type}, {"output", std::move(output)}};
    // get_attn_mask (megatron/utils.py 63-73): one [1, 1, s, s] causal mask for the whole batch.
    if (mask) l["mask"] = std::vector<int64_t>{1, 1, s.seq, s.seq};
    return l;
}

// GPT2ModelPipe.init_specs (gpt2_model.py 183-345): embedding, _pre_transformer_block, the layers,
// _post_transformer_block, NormPipe, then the output layer (the embedding again when tied). The
// activations between the embedding and _post_transformer_block are (hidden, attention_mask).
Json neox_param_list(const NeoxShape& s, const std::string& name) {
    Json params = Json::array(), layers = Json::array();
    const std::string embed = s.tied ? "tied_modules.embed" : "0";
    add_embedding(params, embed, s);
    layers.push_back(pipe_layer(embed, "EmbeddingPipe", {s.seq, s.hidden}, s, true));
    if (s.tied) layers.back()["tied_weight"] = "word_embeddings.weight";
    layers.push_back(pipe_layer("1", "_pre_transformer_block", {s.seq, s.hidden}, s, true));
    for (int64_t i = 0; i < s.layers; ++i) {
        const std::string idx = std::to_string(2 + i);
        add_transformer_layer(params, idx, s);
        layers.push_back(pipe_layer(idx, "ParallelTransformerLayerPipe", {s.seq, s.hidden}, s, true));
    }
    layers.push_back(pipe_layer(std::to_string(2 + s.layers), "_post_transformer_block", {s.seq, s.hidden}, s, false));
    const std::string norm = std::to_string(3 + s.layers);
    add_norm(params, norm + ".norm", s);
    layers.push_back(pipe_layer(norm, "NormPipe", {s.seq, s.hidden}, s, false));
    if (s.tied) {
        layers.push_back(pipe_layer(embed, "EmbeddingPipe", {s.seq, s.vocab}, s, false));
        layers.back()["tied_weight"] = "word_embeddings.weight";
    } else {
        const std::string out = std::to_string(4 + s.layers);
        // ParallelLinear (transformer.py 137-170): no bias; column splits the vocabulary, row the input.
        add_param(params, out + ".final_linear.weight", {s.vocab, s.hidden}, s.output_parallelism.c_str());
        layers.push_back(pipe_layer(out, "ParallelLinearPipe", {s.seq, s.vocab}, s, false));
    }
    // GPT-NeoX's mpu (megatron/mpu/mappings.py 44, 123) calls torch.distributed itself: DeepSpeed's
    // comms logger never sees the tensor-parallel collectives.
    return Json{{"name", name},
                {"seq_len", s.seq},
                {"tp_collectives_logged", false},
                {"parameters", params},
                {"pipeline", {{"layers", layers}}}};
}

// --- Reading the merged keys ---------------------------------------------------------------------

struct NeoxRead {
    NeoxShape shape;
    NeoxInputs out;
};

int64_t neox_int(const JsonField& root, const char* key, int64_t def, int64_t lo, int64_t hi) {
    return root.has(key) && !root.at(key).raw().is_null() ? root.at(key).as_integer_in(lo, hi) : def;
}
bool neox_bool(const JsonField& root, const char* key, bool def) {
    return root.has(key) && !root.at(key).raw().is_null() ? root.at(key).as_bool() : def;
}
std::string neox_choice(const JsonField& root, const char* key, const std::string& def, std::initializer_list<const char*> allowed,
                        const std::string& why) {
    if (!root.has(key) || root.at(key).raw().is_null()) return def;
    std::string v = root.at(key).as_string();
    for (const char* a : allowed)
        if (v == a) return v;
    root.at(key).fail_here("\"" + v + "\" " + why);
}

void read_neox_shape(const JsonField& root, int64_t vocab_size, NeoxRead& r) {
    NeoxShape& s = r.shape;
    for (const char* k : {"num_layers", "hidden_size", "num_attention_heads", "seq_length"})
        if (!root.has(k) || root.at(k).raw().is_null()) root.fail_here(std::string("expected the key ") + k + " (GPT-NeoX requires it)");
    s.layers = root.at("num_layers").as_integer_in(1, 1 << 16);
    s.hidden = root.at("hidden_size").as_integer_in(1, 1 << 20);
    s.heads = root.at("num_attention_heads").as_integer_in(1, 1 << 16);
    s.seq = root.at("seq_length").as_integer_in(1, 1 << 24);
    if (s.hidden % s.heads != 0)
        root.at("hidden_size").fail_here(std::to_string(s.hidden) + " does not divide over num_attention_heads " + std::to_string(s.heads));
    s.max_positions = neox_int(root, "max_position_embeddings", s.seq, 1, 1 << 24);
    s.norm = neox_choice(root, "norm", "layernorm", {"layernorm", "rmsnorm"}, "is not modelled (layernorm and rmsnorm are)");
    s.pos_emb = neox_choice(root, "pos_emb", "learned", {"learned", "rotary", "alibi", "none", "sinusoidal"},
                            "is not modelled (learned, rotary, alibi, sinusoidal and none are; rpe adds parameters zerosim does not build)");
    s.tied = !neox_bool(root, "no_weight_tying", false);
    s.gpt_j = neox_bool(root, "gpt_j_residual", false);
    s.output_parallelism = neox_choice(root, "output_layer_parallelism", "row", {"row", "column"}, "expected row or column");
    // ParallelMLP (transformer.py 84-108): 4h; geglu 2 x int(8h/3) in, half of it out.
    const std::string act = neox_choice(root, "activation", "gelu", {"gelu", "geglu", "relu", "softsign", "swish", "mish"},
                                        "is not one of GPT-NeoX's activations");
    s.ff = act == "geglu" ? 2 * static_cast<int64_t>(4.0 * 2 / 3 * static_cast<double>(s.hidden)) : 4 * s.hidden;
    s.ff_in = act == "geglu" ? s.ff / 2 : s.ff;
    r.out.pipe = neox_int(root, "pipe_parallel_size", 0, 0, 1 << 16);
    r.out.tensor = neox_int(root, "model_parallel_size", 1, 1, 1 << 16);
    if (root.has("pipe_partition_method") && !root.at("pipe_partition_method").raw().is_null())
        r.out.partition_method = root.at("pipe_partition_method").as_string();
    // arguments.py: padded_vocab_size, the tokenizer's size padded to a multiple of
    // make_vocab_size_divisible_by x model_parallel_size (megatron/tokenizer _vocab_size_with_padding).
    const int64_t multiple = neox_int(root, "make_vocab_size_divisible_by", 128, 1, 1 << 20) * r.out.tensor;
    if (vocab_size <= 0)
        root.fail_here("the vocabulary size comes from the tokenizer, which the YAML only names (vocab-file): give "
                       "--vocab-size N (GPT-NeoX-20B's tokenizer: 50277, padded to 50432 at model-parallel-size 2)");
    s.vocab = (vocab_size + multiple - 1) / multiple * multiple;
}

void check_neox_unmodelled(const JsonField& root, NeoxRead& r) {
    for (const auto& [key, def] : neox_unmodelled_keys()) {
        if (!root.has(key) || root.at(key).raw() == def || root.at(key).raw().is_null()) continue;
        root.at(key).fail_here("is not modelled yet (zerosim builds GPT-NeoX's default here: " +
                               (def.is_null() ? std::string("unset") : def.dump()) + ")");
    }
    if (neox_bool(root, "partition_activations", false) && r.out.tensor > 1)
        root.at("partition_activations")
            .fail_here("true with model-parallel-size " + std::to_string(r.out.tensor) +
                       " is not modelled (deepspeed.checkpointing's all_gathers of the partitioned activations in backward)");
}

// NeoXArgs.deepspeed_config: the DeepSpeed keys as written, deepspeed_extra_args merged (arguments.py
// 520-540 refuses a key given in both), and train_batch_size left to DeepSpeed's resolution.
Json neox_ds_config(const JsonField& root, const Json& merged) {
    Json ds = Json::object();
    for (const auto& k : neox_deepspeed_keys())
        if (merged.contains(k) && !merged.at(k).is_null()) ds[k] = merged.at(k);
    if (merged.contains("deepspeed_extra_args") && !merged.at("deepspeed_extra_args").is_null()) {
        auto extra = root.at("deepspeed_extra_args");
        extra.expect_object();
        for (auto it = extra.raw().begin(); it != extra.raw().end(); ++it) {
            if (ds.contains(it.key()))
                extra.at(it.key()).fail_here("is also given at the top level (GPT-NeoX refuses a key in both places)");
            ds[it.key()] = it.value();
        }
    }
    return ds;
}

Result<NeoxInputs> build_neox(const std::string& source, const Json& merged, const std::vector<std::string>& keys,
                              int64_t vocab_size, Release release) {
    NeoxRead r;
    JsonField root(merged, source, "");
    read_neox_shape(root, vocab_size, r);
    check_neox_unmodelled(root, r);
    std::vector<std::string> unread;
    for (const auto& k : keys) {
        const auto& ds = neox_deepspeed_keys();
        const auto& model = neox_model_keys();
        if (std::find(ds.begin(), ds.end(), k) == ds.end() && std::find(model.begin(), model.end(), k) == model.end() &&
            !neox_quiet_key(k) && std::none_of(neox_unmodelled_keys().begin(), neox_unmodelled_keys().end(),
                                               [&](const auto& u) { return u.first == k; }))
            unread.push_back(k);
    }
    if (!unread.empty()) {
        std::string list;
        for (const auto& k : unread) list += (list.empty() ? "" : ", ") + k;
        r.out.warnings.push_back("keys zerosim does not read (as GPT-NeoX settings that change no collective): " + list);
    }
    r.out.ds_config_doc = neox_ds_config(root, merged);
    // A YAML string need not be UTF-8; JSON text must be: bytes that are not become U+FFFD.
    auto cfg = parse_ds_config(source, r.out.ds_config_doc.dump(-1, ' ', false, Json::error_handler_t::replace), release);
    if (!cfg) return cfg.error();
    r.out.ds_config = std::move(cfg).value();
    r.out.model_doc = neox_param_list(r.shape, "gpt-neox (" + source + ")");
    auto model = model_from_param_list_json(source, r.out.model_doc.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (!model) return model.error();
    Model& m = model.value();
    m.attention_heads = r.shape.heads;
    m.kv_heads = r.shape.heads;
    m.default_seq_len = r.shape.seq;
    // checkpoint-activations: GPT2ModelPipe hands PipelineModule activation_checkpoint_interval =
    // checkpoint-num-layers (gpt2_model.py), and each transformer layer's input is what it keeps
    // (analysis/fit.hpp counts one layer per checkpoint).
    m.gradient_checkpointing = neox_bool(root, "checkpoint_activations", false);
    // PipelineModule checkpoints only ParallelTransformerLayerPipe layers (pipe/module.py
    // _is_checkpointable for GPT2ModelPipe): their forward runs again in backward, with its
    // tensor-parallel all_reduces (schedule/recompute.cpp). checkpoint-num-layers above 1 groups
    // consecutive layers into one checkpoint: the same recompute, one call per group.
    if (m.gradient_checkpointing)
        for (const auto& layer : m.parallel.pipe_layers)
            if (layer.type == "ParallelTransformerLayerPipe") m.checkpointed.push_back(layer.name);
    r.out.model = std::move(m);
    // Said with the config's own warnings (warn_ds_config), under the files' names.
    r.out.ds_config.warnings.insert(r.out.ds_config.warnings.end(), r.out.warnings.begin(), r.out.warnings.end());
    return std::move(r.out);
}

}  // namespace

Result<NeoxInputs> parse_neox_config(const std::vector<std::string>& names, const std::vector<std::string>& texts,
                                     int64_t vocab_size, Release release) {
    if (names.empty() || names.size() != texts.size()) return Error{"", "--neox-config", "expected at least one YAML file"};
    std::string source;
    for (const auto& n : names) source += (source.empty() ? "" : " + ") + n;
    try {
        std::vector<std::string> keys;
        Json merged = merge_neox_files(names, texts, keys);
        return build_neox(source, merged, keys, vocab_size, release);
    } catch (const InputFailure& f) {
        return f.error;
    } catch (const YAML::Exception& e) {
        return Error{source, "", std::string("malformed YAML: ") + e.what()};
    } catch (const nlohmann::json::exception& e) {   // a value JSON cannot hold (found by fuzz_neox)
        return Error{source, "", std::string("a value zerosim cannot read: ") + e.what()};
    }
}

Result<NeoxInputs> load_neox_config(const std::vector<std::string>& paths, int64_t vocab_size, Release release) {
    std::vector<std::string> texts;
    for (const auto& p : paths) {
        auto t = read_text_file(p, "GPT-NeoX config");
        if (!t) return t.error();
        texts.push_back(std::move(t).value());
    }
    return parse_neox_config(paths, texts, vocab_size, release);
}

}  // namespace zerosim
