#include "ds_config_keys.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace zerosim {

namespace {

// DeepSpeed v0.14.2 runtime/zero/config.py, DeepSpeedZeroConfig: every field, and every alias
// (allow_population_by_field_name in runtime/config_utils.py accepts both spellings). Its base
// class DeepSpeedConfigModel sets `extra = "forbid"`, so any other key fails initialize().
const std::vector<std::string>& zero_keys() {
    static const std::vector<std::string> keys = {
        "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
        "allgather_partitions", "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights",
        "elastic_checkpoint", "offload_param", "offload_optimizer", "sub_group_size", "cpu_offload_param",
        "cpu_offload_use_pin_memory", "cpu_offload", "prefetch_bucket_size", "stage3_prefetch_bucket_size",
        "param_persistence_threshold", "stage3_param_persistence_threshold", "model_persistence_threshold",
        "stage3_model_persistence_threshold", "max_live_parameters", "stage3_max_live_parameters",
        "max_reuse_distance", "stage3_max_reuse_distance", "gather_16bit_weights_on_model_save",
        "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
        "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients", "zero_hpz_partition_size",
        "zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients",
        "mics_shard_size", "mics_hierarchical_params_gather", "memory_efficient_linear",
        "pipeline_loading_checkpoint", "override_module_apply"};
    return keys;
}

}  // namespace

const std::vector<LaterKey>& later_keys() {
    // git log v0.14.2..v0.19.5 of runtime/zero/config.py (DeepSpeedZeroConfig: field and alias),
    // runtime/constants.py and runtime/precision_config.py; the release is the first tag holding it.
    static const std::vector<LaterKey> keys = {
        {"zero_optimization", "stage3_use_all_reduce_for_fetch_params", {0, 14, 3}, "#5420"},
        {"zero_optimization", "use_all_reduce_for_fetch_params", {0, 14, 3}, "#5420"},
        {"zero_optimization", "stage3_module_granularity_threshold", {0, 16, 0}, "#6649"},
        {"zero_optimization", "module_granularity_threshold", {0, 16, 0}, "#6649"},
        {"zero_optimization", "zeropp_loco_param", {0, 16, 2}, "#6730"},
        {"zero_optimization", "log_trace_cache_warnings", {0, 16, 4}, "#7039"},
        {"zero_optimization", "zenflow", {0, 17, 5}, "ZenFlow"},
        {"zero_optimization", "enable_sanity_checks", {0, 17, 6}, "#7525"},
        {"zero_optimization", "leaf_module", {0, 18, 0}, "#7604"},
        {"zero_optimization", "stage3_allgather_sequential", {0, 18, 5}, "#7661"},
        {"zero_optimization", "allgather_sequential", {0, 18, 5}, "#7661"},
        {"zero_optimization", "save_muon_momentum_buffer_in_memory", {0, 18, 9}, "Muon"},
        {"bf16", "immediate_grad_update", {0, 17, 1}, "#6976"},
        {"bf16", "check_grad_overflow", {0, 17, 1}, "#6976"},
        {"", "torch_autocast", {0, 17, 2}, "#6993"},
        {"", "log_level", {0, 19, 3}, "#8067"},
    };
    return keys;
}

const LaterKey* later_key(const std::string& section, const std::string& key) {
    for (const auto& k : later_keys())
        if (section == k.section && key == k.key) return &k;
    return nullptr;
}

namespace {

// The keys of `section` that `release` reads: v0.14.2's and those added since, up to `release`.
std::vector<std::string> keys_at(const std::vector<std::string>& base, const char* section, Release release) {
    std::vector<std::string> keys = base;
    for (const auto& k : later_keys())
        if (std::string(section) == k.section && k.since <= release) keys.push_back(k.key);
    return keys;
}

// " ('K' arrives in vY, #PR)" for a key of a later release, else "".
std::string arrives_later(const char* section, const std::string& key, Release release) {
    const LaterKey* k = later_key(section, key);
    if (!k || k->since <= release) return "";
    return "; '" + key + "' arrives in " + k->since.name() + " (" + k->pr + ")";
}

// Top-level keys DeepSpeed v0.14.2 reads (runtime/config.py DeepSpeedConfig._initialize_params and
// the sections it hands to monitor/, profiling/, autotuning/, elasticity/, compression/,
// data_pipeline/, swap_tensor/, comm/ and nebula/). DeepSpeed ignores any other top-level key.
// tensor_parallel, moe and sequence_parallel_size are not among them (v0.14.2 takes those degrees
// from the model's mpu and groups); they are known here so that they get their own warning.
const std::vector<std::string>& top_level_keys() {
    static const std::vector<std::string> keys = {
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "steps_per_print",
        "dump_state", "optimizer", "scheduler", "zero_optimization", "zero_allow_untested_optimizer",
        "zero_force_ds_cpu_optimizer", "sparse_gradients", "amp", "fp16", "bf16", "bfloat16", "gradient_clipping",
        "graph_harvesting", "communication_data_type", "seq_parallel_comm_data_type", "prescale_gradients",
        "gradient_predivide_factor", "disable_allgather", "vocabulary_size", "wall_clock_breakdown",
        "memory_breakdown", "eigenvalue", "progressive_layer_drop", "quantize_training", "checkpoint",
        "data_types", "dataloader_drop_last", "use_data_before_expert_parallelism", "sparse_attention",
        "pipeline", "hybrid_engine", "activation_checkpointing", "flops_profiler", "tensorboard", "wandb",
        "csv_monitor", "comms_logger", "autotuning", "elasticity", "data_efficiency", "curriculum_learning",
        "compression_training", "aio", "nebula", "compile", "tensor_parallel", "moe", "sequence_parallel_size"};
    return keys;
}

// closest_key's "close" (a third of the key) is loose for short keys ("model" would suggest "moe");
// a config key is suggested only when one edit, or an edit per three characters, separates them.
std::string near_key(const std::string& key, const std::vector<std::string>& keys) {
    std::string near = closest_key(key, keys);
    if (near.empty()) return near;
    size_t d = edit_distance(key, near);
    return d <= 1 || 3 * d <= key.size() ? near : std::string();
}

bool is_one_of(const std::string& key, const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool true_flag(const JsonField& z, const char* key) {
    return z.has(key) && !z.at(key).is_null() && z.at(key).as_bool();
}

// A feature zerosim's schedule does not have yet: refused, since the prediction would be plain
// ZeRO's. DeepSpeed v0.14.2 builds these only for stage 3 (engine.py _configure_zero_optimizer
// hands them to DeepSpeedZeroOptimizer_Stage3 / MiCS_Optimizer), so below stage 3 it ignores them.
[[noreturn]] void refuse_unmodelled(const JsonField& f, const std::string& feature, int stage, Release release) {
    std::string tail = stage == 3 ? "the schedule would be plain stage 3's"
                                  : "DeepSpeed " + release.name() + " uses it at stage 3 only and ignores it at stage " +
                                        std::to_string(stage) + ", so remove it";
    f.fail_here(feature + " is not modelled yet; " + tail);
}

// DeepSpeed v0.14.2 runtime/config_utils.py _process_deprecated_field: a deprecated key written
// beside the key that replaces it fails an assertion.
void refuse_beside(const JsonField& z, const char* deprecated, std::initializer_list<const char*> replacements,
                   Release release) {
    if (!z.has(deprecated)) return;
    for (const char* r : replacements)
        if (z.has(r))
            z.at(deprecated).fail_here("DeepSpeed " + release.name() + " refuses the deprecated '" + deprecated +
                                       "' beside '" + r + "', which replaces it; keep only '" + r + "'");
}

// pydantic v1 (DeepSpeed's deepspeed.pydantic_v1) validate_model reads a field by its alias first and
// by its name only when the alias is absent; with both written the name is left over, and
// `extra = "forbid"` refuses it as an extra field.
void refuse_name_beside_alias(const JsonField& z, Release release) {
    static const char* const pairs[][2] = {
        {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
        {"param_persistence_threshold", "stage3_param_persistence_threshold"},
        {"model_persistence_threshold", "stage3_model_persistence_threshold"},
        {"max_live_parameters", "stage3_max_live_parameters"},
        {"max_reuse_distance", "stage3_max_reuse_distance"},
        {"gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"},
        {"use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params"},
        {"module_granularity_threshold", "stage3_module_granularity_threshold"},
        {"allgather_sequential", "stage3_allgather_sequential"}};
    for (const auto& [name, alias] : pairs)
        if (z.has(name) && z.has(alias))
            z.at(name).fail_here("DeepSpeed " + release.name() + " refuses '" + name + "' beside its alias '" + alias +
                                 "' (it reads the alias and forbids the other as an extra key); keep one");
}

}  // namespace

void check_zero_keys(const JsonField& z, DsConfig& c) {
    const Release release = c.release;
    const std::vector<std::string> known = keys_at(zero_keys(), "zero_optimization", release);
    for (auto it = z.raw().begin(); it != z.raw().end(); ++it) {
        if (is_one_of(it.key(), known)) continue;
        std::string later = arrives_later("zero_optimization", it.key(), release);
        std::string near = later.empty() ? near_key(it.key(), known) : std::string();
        z.at(it.key()).fail_here("DeepSpeed " + release.name() + " refuses keys zero_optimization does not have" + later +
                                 (!later.empty() ? std::string()
                                  : near.empty() ? std::string(" (runtime/zero/config.py lists them)")
                                                 : "; did you mean '" + near + "'?"));
    }
    refuse_name_beside_alias(z, release);
    refuse_beside(z, "cpu_offload", {"offload_optimizer"}, release);
    refuse_beside(z, "cpu_offload_param", {"offload_param"}, release);
    refuse_beside(z, "stage3_gather_fp16_weights_on_model_save",
                  {"gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"}, release);
    // The deprecated booleans become offload to the CPU (config.py new_param_fn).
    if (true_flag(z, "cpu_offload")) c.zero.offload_optimizer = true;
    if (true_flag(z, "cpu_offload_param")) c.zero.offload_param = true;
    if (true_flag(z, "legacy_stage1"))
        z.at("legacy_stage1").fail_here("DeepSpeed " + release.name() + " refuses legacy_stage1: true (engine.py "
                                        "_configure_zero_optimizer: the old stage 1 is gone since 0.5.9)");

    int stage = c.zero.stage;
    // ZeRO++ and MiCS are modelled at stage 3 (docs/zero-variants.md); below it DeepSpeed ignores
    // them (refuse_unmodelled says so). Hierarchical MiCS gathers and quantized non-trainable
    // weights are not modelled.
    if (z.has("zero_hpz_partition_size")) {
        auto f = z.at("zero_hpz_partition_size");
        // config.py: Field(1, ge=0); stage3.py builds the secondary group only when it is > 1.
        int64_t k = f.as_integer_in(0, INT64_MAX);
        if (k > 1 && stage != 3) refuse_unmodelled(f, "ZeRO++ hpZ (zero_hpz_partition_size)", stage, release);
        c.zero.hpz_partition_size = std::max<int64_t>(k, 1);
    }
    if (true_flag(z, "zero_quantized_weights")) {
        if (stage != 3) refuse_unmodelled(z.at("zero_quantized_weights"), "ZeRO++ qwZ (zero_quantized_weights)", stage, release);
        c.zero.quantized_weights = true;
    }
    if (true_flag(z, "zero_quantized_nontrainable_weights"))
        refuse_unmodelled(z.at("zero_quantized_nontrainable_weights"),
                          "ZeRO++ quantized non-trainable weights (zero_quantized_nontrainable_weights)", stage, release);
    if (true_flag(z, "zero_quantized_gradients")) {
        if (stage != 3) refuse_unmodelled(z.at("zero_quantized_gradients"), "ZeRO++ qgZ (zero_quantized_gradients)", stage, release);
        c.zero.quantized_gradients = true;
    }
    if (z.has("mics_shard_size")) {
        auto f = z.at("mics_shard_size");
        // engine.py _configure_zero_optimizer: MiCS when mics_shard_size > 0 (default -1).
        int64_t s = f.as_integer();
        if (s > 0 && stage != 3) refuse_unmodelled(f, "MiCS (mics_shard_size)", stage, release);
        if (s > 0) {
            c.zero.mics_shard_size = s;
            // engine.py: MiCS_Optimizer is built without the ZeRO++ arguments while zero.Init still reads
            // hpZ and qwZ: an unsupported mix whose behaviour the source does not settle.
            for (const char* k : {"zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients"})
                if ((std::string(k) == "zero_hpz_partition_size" && c.zero.hpz_partition_size > 1) ||
                    (std::string(k) != "zero_hpz_partition_size" && true_flag(z, k)))
                    f.fail_here(std::string("MiCS with ") + k + " is not modelled: DeepSpeed " + release.name() +
                                " hands it to zero.Init but not to MiCS_Optimizer (engine.py), an unsupported mix");
        }
    }
    // csrc/quantization/pt_binding.cpp reads and returns __half: with bf16 or fp32 weights the sizes
    // (what zerosim models) are right but the values are not (DeepSpeed issues #3992, #4852).
    if ((c.zero.quantized_weights || c.zero.quantized_gradients) && c.model_dtype != DType::FP16)
        c.warnings.push_back(std::string("zero_quantized_weights/zero_quantized_gradients with ") + dtype_name(c.model_dtype) +
                             " training: DeepSpeed " + release.name() + "'s quantizer kernels read fp16, so the values "
                             "would be wrong (issues #3992, #4852); the bytes are as modelled");
    if (true_flag(z, "mics_hierarchical_params_gather"))
        refuse_unmodelled(z.at("mics_hierarchical_params_gather"),
                          "MiCS hierarchical parameter gather (mics_hierarchical_params_gather)", stage, release);
}

bool offload_enabled(const JsonField& z, const char* key, Release release) {
    if (!z.has(key) || z.at(key).is_null()) return false;
    auto o = z.at(key);
    o.expect_object();
    // DeepSpeed v0.14.2 runtime/zero/offload_config.py: DeepSpeedZeroOffloadParamConfig and
    // DeepSpeedZeroOffloadOptimizerConfig, both DeepSpeedConfigModel (extra keys forbidden).
    static const std::vector<std::string> param_keys = {"device",     "nvme_path",  "buffer_count",
                                                        "buffer_size", "max_in_cpu", "pin_memory"};
    static const std::vector<std::string> optimizer_keys = {"device",        "nvme_path",      "buffer_count",
                                                            "pin_memory",    "pipeline_read",  "pipeline_write",
                                                            "fast_init",     "ratio"};
    const auto& keys = std::string(key) == "offload_param" ? param_keys : optimizer_keys;
    for (auto it = o.raw().begin(); it != o.raw().end(); ++it) {
        if (is_one_of(it.key(), keys)) continue;
        std::string near = near_key(it.key(), keys);
        o.at(it.key()).fail_here("DeepSpeed " + release.name() + " refuses keys " + key + " does not have" +
                                 (near.empty() ? std::string(" (runtime/zero/offload_config.py lists them)")
                                               : "; did you mean '" + near + "'?"));
    }
    if (!o.has("device")) return false;  // OffloadDeviceEnum's default is "none"
    auto d = o.at("device");
    std::string device = d.as_string();
    if (device != "none" && device != "cpu" && device != "nvme")
        d.fail_here("expected \"none\", \"cpu\" or \"nvme\" (DeepSpeed's OffloadDeviceEnum), found \"" + device + "\"");
    return device != "none";
}

void note_layout_key(const JsonField& root, const std::string& key, DsConfig& c);

// runtime/config.py get_pipeline_config (458-471) copies every key of "pipeline" over its defaults;
// the v0.14.2 pipeline engine reads three of them (pipe/engine.py 138-141 assert the two partition
// flags are bools, 207 the checkpoint interval) and nothing else reads the rest.
void note_pipeline_section(const JsonField& p, DsConfig& c) {
    if (p.raw().is_null()) return;
    p.expect_object();
    for (auto it = p.raw().begin(); it != p.raw().end(); ++it) {
        const std::string& k = it.key();
        if (k == "pipe_partitioned" || k == "grad_partitioned") {
            if (!it.value().is_boolean())
                p.at(k).fail_here("expected true or false (pipe/engine.py asserts a bool)");
            (k == "pipe_partitioned" ? c.pipeline.pipe_partitioned : c.pipeline.grad_partitioned) = it.value().get<bool>();
        } else if (k == "activation_checkpoint_interval") {
            c.pipeline.activation_checkpoint_interval = p.at(k).as_integer_in(0, int64_t{1} << 30);
        } else if (k != "stages" && k != "partition" && k != "seed_layers" && k != "use_reentrant") {
            c.ignored_keys.push_back("pipeline." + k + " (the pipeline engine reads pipe_partitioned, grad_partitioned and "
                                     "activation_checkpoint_interval)");
        }
    }
}

void note_top_level_keys(const JsonField& root, DsConfig& c) {
    for (auto it = root.raw().begin(); it != root.raw().end(); ++it) {
        const std::string& key = it.key();
        if (const LaterKey* later = later_key("", key); later && c.release < later->since) {
            c.ignored_keys.push_back(key + " (DeepSpeed " + c.release.name() + " does not read it; it arrives in " +
                                     later->since.name() + ", " + later->pr + ")");
            continue;
        }
        if (!is_one_of(key, top_level_keys()) && !later_key("", key)) {
            // A suggestion costs an edit distance to every known key; past the first few unknown
            // keys (the warning line is cut at about 1 KB anyway) none is made, so that a config
            // of 100k unknown keys is read in linear time, and quickly.
            std::string near = c.ignored_keys.size() < 64 ? near_key(key, top_level_keys()) : std::string();
            if (is_one_of(key, zero_keys()))
                c.ignored_keys.push_back(key + " (a zero_optimization key; DeepSpeed ignores it at the top level)");
            else
                c.ignored_keys.push_back(near.empty() ? key : key + " (did you mean '" + near + "'?)");
            continue;
        }
        note_layout_key(root, key, c);
    }
}

// The keys that touch the parallel layout. DeepSpeed's training engine takes the layout from the
// mpu and the model (PipelineModule, MoE layers), which zerosim takes from --pp/--tp/--sp/--ep and
// the model file; what a config key says is read where DeepSpeed reads it and named where not.
void note_layout_key(const JsonField& root, const std::string& key, DsConfig& c) {
    if (key == "tensor_parallel") {
        auto tp = root.at(key);
        if (tp.raw().is_null()) return;
        tp.expect_object();
        // v0.16.4+ (#7004): autotp_size turns on AutoTP for training (module_inject/layers.py).
        if (tp.has("autotp_size")) {
            const int64_t n = tp.at("autotp_size").as_integer_in(1, 1 << 20);
            if (c.release < Release{0, 16, 4})
                c.ignored_keys.push_back("tensor_parallel.autotp_size (DeepSpeed " + c.release.name() +
                                         " does not read it; it arrives in v0.16.4, #7004)");
            else
                c.autotp_size = n;
        }
        if (tp.has("tp_size") && !(tp.at("tp_size").raw().is_number_integer() && tp.at("tp_size").raw() == 1))
            c.warnings.push_back("tensor_parallel.tp_size is DeepSpeed inference's setting; the training engine takes tensor "
                                 "parallelism from the mpu: pass --tp N");
    } else if (key == "pipeline") {
        note_pipeline_section(root.at(key), c);
    } else if (key == "sequence_parallel_size") {
        c.sequence_parallel_size = root.at(key).as_integer_in(1, 1 << 20);
    } else if (key == "moe" && !root.at(key).raw().is_null()) {
        c.warnings.push_back("moe: DeepSpeed's engine reads no MoE layout from its config; MoE layers come from the model "
                             "(a parameter list's \"moe\" section) and their expert parallelism from --ep");
    }
}


namespace {

// torch.optim's optimizer classes (PyTorch 2.x, torch/optim/__init__.py): what engine.py's
// getattr(torch.optim, name) finds; the names are case-sensitive there.
const std::vector<std::string>& torch_optimizers() {
    static const std::vector<std::string> names = {"Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "SparseAdam", "Adamax",
                                                   "ASGD", "LBFGS", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"};
    return names;
}

std::string lower(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

// pydantic v1's bool (pydantic/validators.py bool_validator): true/false, 0/1, and the strings it
// lists in any case.
bool pydantic_bool(const Json& v) {
    if (v.is_boolean()) return true;
    if (v.is_number_integer() || v.is_number_unsigned()) return v == 0 || v == 1;
    if (!v.is_string()) return false;
    static const std::vector<std::string> words = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"};
    return is_one_of(lower(v.get<std::string>()), words);
}

}  // namespace

void check_optimizer_section(const JsonField& root, const DsConfig& c) {
    if (!root.has("optimizer") || root.at("optimizer").raw().is_null()) return;
    auto opt = root.at("optimizer");
    opt.expect_object();
    if (!opt.has("type") || opt.at("type").raw().is_null()) return;   // the client's own optimizer
    const std::string name = opt.at("type").as_string();
    const std::string low = lower(name);
    if (low == "onebitadam" || low == "onebitlamb" || low == "zerooneadam")
        opt.at("type").fail_here(name + " is a 1-bit optimizer: its compressed, error-compensated all_reduce of the momentum "
                                        "(runtime/fp16/onebit/) is not modelled, and the prediction would be plain Adam's");
    // runtime/config.py DEEPSPEED_OPTIMIZERS (Muon from v0.17.6, #7509), matched in lower case.
    std::vector<std::string> own = {"adagrad", "adam", "adamw", "lamb", "muadam", "muadamw", "musgd", "lion"};
    if (!(c.release < Release{0, 17, 6})) own.push_back("muon");
    if (is_one_of(low, own) || is_one_of(name, torch_optimizers())) return;
    std::string known;
    for (const auto& n : own) known += n + ", ";
    for (const auto& n : torch_optimizers()) known += n + (&n == &torch_optimizers().back() ? "" : ", ");
    opt.at("type").fail_here("DeepSpeed " + c.release.name() + " cannot build optimizer '" + name +
                             "': expected one of its own (any case) or a torch.optim class: " + known);
}

void check_comms_logger_section(const JsonField& root) {
    if (!root.has("comms_logger")) return;
    auto cl = root.at("comms_logger");
    cl.expect_object();   // CommsLoggerConfig(**ds_config["comms_logger"])
    for (auto it = cl.raw().begin(); it != cl.raw().end(); ++it) {
        const std::string& k = it.key();
        if (k == "prof_ops") {
            if (!it.value().is_array()) cl.at(k).fail_here("expected a list of op names (CommsLoggerConfig.prof_ops: list)");
        } else if (k == "enabled" || k == "prof_all" || k == "verbose" || k == "debug") {
            if (!pydantic_bool(it.value()))
                cl.at(k).fail_here("expected true or false (CommsLoggerConfig." + k + ": bool), found " + it.value().dump());
        } else {
            cl.at(k).fail_here("unknown key: DeepSpeed's CommsLoggerConfig forbids extra keys (enabled, prof_all, prof_ops, "
                               "verbose, debug)");
        }
    }
}

}  // namespace zerosim
