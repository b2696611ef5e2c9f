// A real DeepSpeed config file, read the way a DeepSpeed release reads it (v0.14.2 unless the caller
// names another, inputs/release.hpp): only the keys that change what ZeRO sends, each with that
// release's default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/json_input.hpp"
#include "inputs/release.hpp"

namespace zerosim {

struct ZeroConfig {
    int stage = 0;
    bool contiguous_gradients = true;
    bool reduce_scatter = true;
    int64_t reduce_bucket_size = 500000000;
    bool use_multi_rank_bucket_allreduce = true;
    bool allgather_partitions = true;
    int64_t allgather_bucket_size = 500000000;
    bool overlap_comm = false;          // resolved for `stage`: as written, else true for stage 3 only
    // overlap_comm as the file wrote it (unset: the stage's default). Its default depends on the stage,
    // so the config keeps what the user set and DsConfig::with_stage resolves it again.
    std::optional<bool> overlap_comm_written;
    bool round_robin_gradients = false;
    int64_t sub_group_size = 1000000000;
    int64_t prefetch_bucket_size = 50000000;          // stage3_prefetch_bucket_size
    int64_t param_persistence_threshold = 100000;     // stage3_param_persistence_threshold
    int64_t model_persistence_threshold = INT64_MAX;  // stage3_model_persistence_threshold (sys.maxsize)
    int64_t max_live_parameters = 1000000000;         // stage3_max_live_parameters
    int64_t max_reuse_distance = 1000000000;          // stage3_max_reuse_distance
    bool offload_optimizer = false;
    bool offload_param = false;
    // ZeRO++ and MiCS (stage 3; DeepSpeed v0.14.2 runtime/zero/config.py), docs/zero-variants.md.
    int64_t hpz_partition_size = 1;     // zero_hpz_partition_size; 1 = off
    bool quantized_weights = false;     // zero_quantized_weights (qwZ)
    bool quantized_gradients = false;   // zero_quantized_gradients (qgZ)
    int64_t mics_shard_size = -1;       // mics_shard_size; > 0 = MiCS
};

struct DsConfig {
    std::string source;
    std::optional<int64_t> micro_batch;       // train_micro_batch_size_per_gpu
    std::optional<int64_t> grad_accum;        // gradient_accumulation_steps
    std::optional<int64_t> train_batch;       // train_batch_size
    DType model_dtype = DType::FP32;          // fp16.enabled / bf16.enabled
    std::optional<DType> communication_data_type;
    double gradient_clipping = 0.0;
    std::optional<DType> grad_accum_dtype;    // data_types.grad_accum_dtype
    ZeroConfig zero;
    // The release that reads the config: its keys, its refusals and its defaults, and the release
    // rules (schedule/release_rules.hpp) the schedule applies. The library's default is v0.14.2.
    Release release = kBaselineRelease;
    // bf16.check_grad_overflow (v0.17.1+, #6976) resolved for `release`: as written, else false up to
    // v0.19.2 and true from v0.19.3 (#8035, runtime/precision_config.py DeepSpeedBF16Config).
    bool bf16_check_grad_overflow = false;
    // An "activation_checkpointing" section is present: the model is taken to call
    // deepspeed.checkpointing.checkpoint per layer (analysis/fit.hpp counts activations so).
    bool activation_checkpointing = false;
    // Its partition_activations (deepspeed.checkpointing keeps each checkpointed input cut over the
    // model-parallel group and all_gathers it in backward, checkpointing.py
    // gather_partitioned_activations:265; nothing is sent on one tensor rank).
    bool partition_activations = false;
    std::optional<std::string> log_level;     // "log_level" (v0.19.3+, #8067): logger level, no collective
    // What the run prints of its own figures (formats/wall_clock_log.hpp): wall_clock_breakdown's
    // timer lines, flops_profiler.enabled, and steps_per_print's throughput line (as written;
    // absent: steps_per_print_resolved()).
    bool wall_clock_breakdown = false;
    bool flops_profiler = false;
    std::optional<int64_t> steps_per_print;
    // Layout keys (sim/cli applies them where --tp / --sp are not given; a flag that disagrees is refused):
    // tensor_parallel.autotp_size (v0.16.4+, #7004: DeepSpeed's AutoTP for training), 0 = absent;
    // sequence_parallel_size (the Ulysses degree; v0.17.0+ divides the batch world by it, earlier
    // releases take the group from the mpu alone), 0 = absent.
    int64_t autotp_size = 0;
    int64_t sequence_parallel_size = 0;
    // The "pipeline" section the pipeline engine reads (runtime/config.py get_pipeline_config 458-471,
    // pipe/engine.py 138-141 and 207): under tensor parallelism, activations and their gradients cross
    // stages cut over the tensor group (pipe_partitioned, grad_partitioned; both bools, default true);
    // activation_checkpoint_interval > 0 checkpoints every that many layers.
    struct Pipeline {
        bool pipe_partitioned = true;
        bool grad_partitioned = true;
        int64_t activation_checkpoint_interval = 0;
    } pipeline;
    std::vector<std::string> ignored_keys;    // keys zerosim does not know, reported in one warning
                                              // (with "(did you mean 'k'?)" where a known key is close)
    std::vector<std::string> warnings;        // what the prediction leaves out, one line each

    // steps_per_print as `release` reads it: as written, else 10 up to v0.15.1 and none (0: no
    // throughput line) from v0.15.2 (#6602, runtime/constants.py STEPS_PER_PRINT_DEFAULT).
    int64_t steps_per_print_resolved() const;

    // The dtype gradients travel in: communication_data_type if set, else the model's dtype.
    DType comm_dtype() const { return communication_data_type.value_or(model_dtype); }

    // This config at ZeRO stage k: the same as the file with "stage": k, stage-dependent defaults
    // resolved for k (overlap_comm) and every key the user set kept.
    DsConfig with_stage(int k) const;
};

// Comma-separated ZeRO stages ("0,1,2,3", for --stages), each 0..3; the list may be empty.
Result<std::vector<int>> parse_stage_list(const std::string& text);

// Micro batch and accumulation once the world size is known, with DeepSpeed's consistency rule
// train_batch_size = micro_batch * gradient_accumulation_steps * world.
struct BatchPlan {
    int64_t micro_batch = 1;
    int64_t grad_accum = 1;
    int64_t train_batch = 1;
};
Result<BatchPlan> resolve_batch(const DsConfig& cfg, int64_t world);

Result<DsConfig> load_ds_config(const std::string& path, Release release = kBaselineRelease);
// A DeepSpeed config file as the JSON document DeepSpeed's loader makes of it (core's
// parse_hjson_text: comments and trailing commas read, duplicate keys refused); for those that keep
// the document (sweep, the schedule JSON's inputs).
Result<Json> read_ds_config_document(const std::string& path);
// The config's warning lines on stderr: its ignored keys, then each of `warnings`
// ("PROGRAM: warning: FILE: ...").
void warn_ds_config(const std::string& program, const DsConfig& c);
Result<DsConfig> parse_ds_config(const std::string& file_name, const std::string& text,
                                 Release release = kBaselineRelease);

}  // namespace zerosim
