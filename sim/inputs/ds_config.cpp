#include "inputs/ds_config.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <iostream>
#include <limits>

#include "core/json_input.hpp"
#include "core/number_list.hpp"
#include "ds_config_keys.hpp"

namespace zerosim {

namespace {

// Which Hugging Face Trainer argument fills an "auto" value, so the error can say what to set.
const std::map<std::string, std::string>& auto_sources() {
    static const std::map<std::string, std::string> m = {
        {"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"},
        {"gradient_accumulation_steps", "--gradient_accumulation_steps"},
        {"train_batch_size", "world size x --per_device_train_batch_size x --gradient_accumulation_steps"},
        {"gradient_clipping", "--max_grad_norm"},
        {"fp16.enabled", "--fp16 (or --fp16_full_eval)"},
        {"bf16.enabled", "--bf16 (or --bf16_full_eval)"},
        {"zero_optimization.reduce_bucket_size", "the model: hidden_size * hidden_size"},
        {"zero_optimization.stage3_prefetch_bucket_size", "the model: 0.9 * hidden_size * hidden_size"},
        {"zero_optimization.stage3_param_persistence_threshold", "the model: 10 * hidden_size"},
    };
    return m;
}

void reject_auto(const JsonField& f) {
    if (f.is_string() && f.raw().get<std::string>() == "auto") {
        auto it = auto_sources().find(f.path());
        std::string from = it == auto_sources().end() ? "the Hugging Face Trainer" : it->second;
        f.fail_here("is \"auto\", which the Hugging Face Trainer fills in from " + from +
                    "; schedule, predict, explain, memory, report and need take the Trainer's flags and fill it as the Trainer "
                    "does (inputs/trainer_auto.hpp); elsewhere write the number (or true/false) here");
    }
}

int64_t positive_count(const JsonField& f) {
    reject_auto(f);
    int64_t v = f.as_integer();
    if (v <= 0) f.fail_here("expected a positive whole number, found " + f.raw().dump());
    return v;
}

int64_t non_negative_count(const JsonField& f) {
    reject_auto(f);
    int64_t v = f.as_integer();
    if (v < 0) f.fail_here("expected a whole number >= 0, found " + f.raw().dump());
    return v;
}

bool flag(const JsonField& f) {
    reject_auto(f);
    return f.as_bool();
}

bool section_enabled(const JsonField& root, const std::string& key) {
    if (!root.has(key)) return false;
    auto sec = root.at(key);
    sec.expect_object();
    if (!sec.has("enabled")) return false;
    return flag(sec.at("enabled"));
}

// deepspeed.checkpointing's section (runtime/activation_checkpointing/config.py): its keys and
// types; partition_activations kept, the host copies of cpu_checkpointing named as not in the time.
void read_activation_checkpointing(const JsonField& sec, DsConfig& c) {
    sec.expect_object();
    for (auto it = sec.raw().begin(); it != sec.raw().end(); ++it) {
        const std::string& k = it.key();
        if (k == "partition_activations") c.partition_activations = flag(sec.at(k));
        else if (k == "cpu_checkpointing" || k == "contiguous_memory_optimization" || k == "synchronize_checkpoint_boundary" ||
                 k == "profile") {
            if (flag(sec.at(k)) && k == "cpu_checkpointing")
                c.warnings.push_back("activation_checkpointing.cpu_checkpointing: the checkpointed activations' copies to host "
                                     "memory and back are not in the predicted time");
        } else if (k == "number_checkpoints") {
            if (!sec.at(k).raw().is_null()) positive_count(sec.at(k));
        } else {   // DeepSpeed reads the section with get_scalar_param and never looks at other keys
            c.warnings.push_back("activation_checkpointing." + k + ": not a key DeepSpeed reads (partition_activations, "
                                 "cpu_checkpointing, contiguous_memory_optimization, number_checkpoints, "
                                 "synchronize_checkpoint_boundary, profile); ignored, as DeepSpeed ignores it");
        }
    }
}

// The batch and clipping keys at the top level.
void read_ds_batch_keys(const JsonField& root, DsConfig& c) {
    if (root.has("train_micro_batch_size_per_gpu")) c.micro_batch = positive_count(root.at("train_micro_batch_size_per_gpu"));
    if (root.has("gradient_accumulation_steps")) c.grad_accum = positive_count(root.at("gradient_accumulation_steps"));
    c.activation_checkpointing = root.has("activation_checkpointing");
    if (c.activation_checkpointing) read_activation_checkpointing(root.at("activation_checkpointing"), c);
    if (root.has("train_batch_size")) c.train_batch = positive_count(root.at("train_batch_size"));
    if (root.has("steps_per_print") && !root.at("steps_per_print").raw().is_null())
        c.steps_per_print = positive_count(root.at("steps_per_print"));
    if (root.has("wall_clock_breakdown")) c.wall_clock_breakdown = flag(root.at("wall_clock_breakdown"));
    if (root.has("flops_profiler") && root.at("flops_profiler").has("enabled"))
        c.flops_profiler = flag(root.at("flops_profiler").at("enabled"));
    if (root.has("gradient_clipping")) {
        auto g = root.at("gradient_clipping");
        reject_auto(g);
        // DeepSpeed clips when the value is > 0; a negative norm is no clipping written wrongly.
        c.gradient_clipping = g.as_number_in(0.0, std::numeric_limits<double>::max());
    }
}

// The training dtype (fp16, bf16 or fp32), the communication dtype and the gradient
// accumulation dtype.
void read_ds_dtypes(const JsonField& root, DsConfig& c) {
    bool fp16 = section_enabled(root, "fp16");
    bool bf16 = section_enabled(root, "bf16") || section_enabled(root, "bfloat16");
    if (fp16 && bf16)
        root.at(root.has("bf16") ? "bf16" : "bfloat16").fail_here("fp16 and bf16 are both enabled; DeepSpeed accepts only one");
    c.model_dtype = fp16 ? DType::FP16 : bf16 ? DType::BF16 : DType::FP32;
    if (root.has("communication_data_type")) {
        auto f = root.at("communication_data_type");
        if (!f.is_null()) {
            std::string v = f.as_string();
            auto t = dtype_from_name(v);
            if (!t || (*t != DType::FP32 && *t != DType::FP16 && *t != DType::BF16))
                f.fail_here("expected \"fp32\", \"fp16\" or \"bf16\", found \"" + v + "\"");
            c.communication_data_type = *t;
        }
    }

    if (root.has("data_types")) {
        auto dt = root.at("data_types");
        dt.expect_object();
        if (dt.has("grad_accum_dtype") && !dt.at("grad_accum_dtype").is_null()) {
            auto f = dt.at("grad_accum_dtype");
            auto t = dtype_from_name(f.as_string());
            if (!t || (*t != DType::FP32 && *t != DType::FP16 && *t != DType::BF16))
                f.fail_here("expected \"fp32\", \"fp16\" or \"bf16\", found \"" + f.as_string() + "\"");
            c.grad_accum_dtype = *t;
        }
    }
}

// The zero_optimization section: the stage, its flags and sizes, offload, and the keys each
// release has.
void read_ds_zero_optimization(const JsonField& root, DsConfig& c) {
    auto z = root.at("zero_optimization");
    z.expect_object();
    auto& zc = c.zero;
    if (z.has("stage")) {
        auto s = z.at("stage");
        reject_auto(s);
        int64_t v = s.as_integer();
        if (v < 0 || v > 3) s.fail_here("expected a ZeRO stage 0, 1, 2 or 3, found " + std::to_string(v));
        zc.stage = static_cast<int>(v);
    }
    auto read_bool = [&](const char* key, bool& out) {
        if (z.has(key)) out = flag(z.at(key));
    };
    auto read_count = [&](std::initializer_list<const char*> keys, int64_t& out, bool allow_zero) {
        for (const char* key : keys)
            if (z.has(key)) out = allow_zero ? non_negative_count(z.at(key)) : positive_count(z.at(key));
    };
    read_bool("contiguous_gradients", zc.contiguous_gradients);
    read_bool("reduce_scatter", zc.reduce_scatter);
    read_bool("use_multi_rank_bucket_allreduce", zc.use_multi_rank_bucket_allreduce);
    read_bool("allgather_partitions", zc.allgather_partitions);
    read_bool("round_robin_gradients", zc.round_robin_gradients);
    if (z.has("overlap_comm") && !z.at("overlap_comm").is_null()) zc.overlap_comm_written = flag(z.at("overlap_comm"));
    read_count({"reduce_bucket_size"}, zc.reduce_bucket_size, false);
    read_count({"allgather_bucket_size"}, zc.allgather_bucket_size, false);
    read_count({"sub_group_size"}, zc.sub_group_size, false);
    read_count({"prefetch_bucket_size", "stage3_prefetch_bucket_size"}, zc.prefetch_bucket_size, true);
    read_count({"param_persistence_threshold", "stage3_param_persistence_threshold"},
               zc.param_persistence_threshold, true);
    read_count({"model_persistence_threshold", "stage3_model_persistence_threshold"},
               zc.model_persistence_threshold, true);
    read_count({"max_live_parameters", "stage3_max_live_parameters"}, zc.max_live_parameters, true);
    read_count({"max_reuse_distance", "stage3_max_reuse_distance"}, zc.max_reuse_distance, true);
    zc.offload_optimizer = offload_enabled(z, "offload_optimizer", c.release);
    zc.offload_param = offload_enabled(z, "offload_param", c.release);
    check_zero_keys(z, c);
}

}  // namespace

namespace {

// DeepSpeed's deprecated "zero_optimization": true / false (runtime/zero/config.py
// read_zero_config_deprecated, v0.14.2 to v0.19.5): stage 1 / 0, and the top-level
// "allgather_size" (default 5e8) as stage 1's allgather_bucket_size. Rewritten here into the
// section it stands for, with DeepSpeed's own warning.
void read_deprecated_zero_flag(Json& doc, DsConfig& c) {
    if (!doc.is_object() || !doc.contains("zero_optimization") || !doc["zero_optimization"].is_boolean()) return;
    const bool on = doc["zero_optimization"].get<bool>();
    Json z = Json::object();
    z["stage"] = on ? 1 : 0;
    if (on && doc.contains("allgather_size")) {
        z["allgather_bucket_size"] = doc["allgather_size"];
        doc.erase("allgather_size");
    }
    doc["zero_optimization"] = std::move(z);
    c.warnings.push_back(std::string("\"zero_optimization\": ") + (on ? "true" : "false") +
                         " is DeepSpeed's deprecated form; read as stage " + (on ? "1" : "0") +
                         " (read_zero_config_deprecated); write \"zero_optimization\": {\"stage\": N}");
}

}  // namespace

Result<DsConfig> parse_ds_config(const std::string& file, const std::string& text, Release release) {
    auto doc = parse_hjson_text(text, file);
    if (!doc) return doc.error();
    try {
        DsConfig c;
        read_deprecated_zero_flag(doc.value(), c);
        JsonField root(doc.value(), file, "");
        root.expect_object();
        c.source = file;
        c.release = release;
        note_top_level_keys(root, c);
        check_optimizer_section(root, c);
        check_comms_logger_section(root);
        read_ds_batch_keys(root, c);
        read_ds_dtypes(root, c);
        if (root.has("zero_optimization")) read_ds_zero_optimization(root, c);
        read_release_keys(root, c);
        return c.with_stage(c.zero.stage);
    } catch (const InputFailure& f) {
        return f.error;
    }
}

void warn_ds_config(const std::string& program, const DsConfig& c) {
    warn_ignored_keys(program, c.source, c.ignored_keys);
    for (const auto& w : c.warnings) std::cerr << program << ": warning: " << printable(c.source, 512) << ": " << printable(w) << '\n';
}

int64_t DsConfig::steps_per_print_resolved() const {
    if (steps_per_print) return *steps_per_print;
    return release < Release{0, 15, 2} ? 10 : 0;
}

DsConfig DsConfig::with_stage(int k) const {
    DsConfig c = *this;
    c.zero.stage = k;
    // DeepSpeed v0.14.2 runtime/zero/config.py, DeepSpeedZeroConfig.overlap_comm_valid: an unset
    // overlap_comm is `stage == ZeroStageEnum.weights`, i.e. true for stage 3 only.
    c.zero.overlap_comm = zero.overlap_comm_written.value_or(k == 3);
    return c;
}

Result<std::vector<int>> parse_stage_list(const std::string& text) {
    auto stages = parse_int_list(text, "--stages", "stages");
    if (!stages) return Error{"", "--stages", "expected stages such as 0,1,2,3"};
    for (int st : stages.value())
        if (st < 0 || st > 3) return Error{"", "--stages", "stage " + std::to_string(st) + " is not 0..3"};
    return stages;
}

Result<Json> read_ds_config_document(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed config");
    if (!text) return text.error();
    return parse_hjson_text(text.value(), path);
}

Result<DsConfig> load_ds_config(const std::string& path, Release release) {
    auto text = read_text_file(path, "DeepSpeed config");
    if (!text) return text.error();
    return parse_ds_config(path, text.value(), release);
}

Result<BatchPlan> resolve_batch(const DsConfig& c, int64_t world) {
    BatchPlan b;
    const std::string& f = c.source;
    // Every product below is checked: a batch of 2^62 per rank times 4 ranks must not wrap.
    bool overflow = false;
    auto times = [&](int64_t x, int64_t y) {
        int64_t r = 0;
        if (__builtin_mul_overflow(x, y, &r)) overflow = true;
        return r;
    };
    auto too_big = [&](const char* field) {
        return Error{f, field, "the batch it implies with the world size (" + std::to_string(world) +
                                   ") exceeds 2^63 - 1 samples"};
    };
    if (c.train_batch && c.micro_batch && c.grad_accum) {
        int64_t product = times(times(*c.micro_batch, *c.grad_accum), world);
        if (overflow) return too_big("train_micro_batch_size_per_gpu");
        if (*c.train_batch != product)
            return Error{f, "train_batch_size",
                         "must equal train_micro_batch_size_per_gpu * gradient_accumulation_steps * world = " +
                             std::to_string(*c.micro_batch) + " * " + std::to_string(*c.grad_accum) + " * " +
                             std::to_string(world) + ", found " + std::to_string(*c.train_batch)};
        b = {*c.micro_batch, *c.grad_accum, *c.train_batch};
    } else if (c.train_batch && c.micro_batch) {
        int64_t per_step = times(*c.micro_batch, world);
        if (overflow) return too_big("train_micro_batch_size_per_gpu");
        if (*c.train_batch % per_step != 0)
            return Error{f, "train_batch_size", "is not divisible by train_micro_batch_size_per_gpu * world"};
        b = {*c.micro_batch, *c.train_batch / per_step, *c.train_batch};
    } else if (c.train_batch && c.grad_accum) {
        int64_t per_micro = times(*c.grad_accum, world);
        if (overflow) return too_big("gradient_accumulation_steps");
        if (*c.train_batch % per_micro != 0)
            return Error{f, "train_batch_size", "is not divisible by gradient_accumulation_steps * world"};
        b = {*c.train_batch / per_micro, *c.grad_accum, *c.train_batch};
    } else if (c.train_batch) {
        if (*c.train_batch % world != 0) return Error{f, "train_batch_size", "is not divisible by the world size"};
        b = {*c.train_batch / world, 1, *c.train_batch};
    } else if (c.micro_batch) {
        int64_t gas = c.grad_accum.value_or(1);
        int64_t total = times(times(*c.micro_batch, gas), world);
        if (overflow) return too_big("train_micro_batch_size_per_gpu");
        b = {*c.micro_batch, gas, total};
    } else {
        return Error{f, "train_micro_batch_size_per_gpu",
                     "DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu; neither is set"};
    }
    return b;
}

}  // namespace zerosim
