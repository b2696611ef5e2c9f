// zerorun's flags of what the run runs: its inputs and schedule, the training and its checks, the
// hidden hooks of the fault tests.
#include <limits>

#include "core/output.hpp"
#include "core/sizes.hpp"
#include "flags.hpp"

namespace zerorun {

CLI::Validator integer_in(int64_t min, int64_t max) {
    return CLI::Validator(
        [min, max](std::string& text) {
            auto v = zerosim::parse_int_flag(text, "", min, max);
            return v ? std::string() : v.error().message;
        },
        "");
}

CLI::Validator finite_at_least(double min, bool exclusive) {
    return CLI::Validator(
        [min, exclusive](std::string& text) {
            auto v = zerosim::parse_real_flag(text, "", min, exclusive);
            return v ? std::string() : v.error().message;
        },
        "");
}

CLI::Validator output_file() {
    return CLI::Validator(
        [](std::string& text) {
            auto e = zerosim::check_output_name(text, "");
            return e ? e->message : std::string();
        },
        "");
}

void add_input_flags(CLI::App& app, RunArgs& ra) {
    app.add_option("--ds-config", ra.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize");
    app.add_option("--model", ra.model, "Hugging Face config.json or a parameter-list JSON");
    app.add_option("--deepspeed", ra.deepspeed, "DeepSpeed release whose schedule to run, 0.14.2 to 0.19.5 (default: 0.19.5)");
    app.add_option("--schedule", ra.schedule, "Run this schedule IR (zerosim schedule --format json) instead of building one");
    app.add_option("--steps", ra.steps, "Optimizer steps to run")->capture_default_str()->check(integer_in(1, INT32_MAX));
    app.add_option("--seq-len", ra.seq_len, "Sequence length for compute segments (default: the model's, else 1024)")
        ->check(integer_in(1));
    app.add_option("--pp", ra.pp, "Pipeline stages, as zerosim's --pp; each rank runs its own program")->check(integer_in(1, INT32_MAX));
    app.add_option("--tp", ra.tp, "Tensor-parallel ranks, as zerosim's --tp")->check(integer_in(1, INT32_MAX));
    app.add_option("--sp", ra.sp, "Ulysses sequence-parallel ranks, as zerosim's --sp")->check(integer_in(1, INT32_MAX));
    app.add_option("--ep", ra.ep, "MoE expert-parallel ranks (ep_size), as zerosim's --ep")->check(integer_in(1, INT32_MAX));
    app.add_option("--gpus-per-node", ra.gpus_per_node, "Ranks per node DeepSpeed sees (device_count()): qgZ's node groups")
        ->check(integer_in(1));
}

void add_training_flags(CLI::App& app, RunArgs& ra) {
    // --lr is a float: a finite double past FLT_MAX would become inf in it.
    app.add_option("--lr", ra.lr, "Adam learning rate")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& text) {
                auto v = zerosim::parse_real_flag(text, "", 0, false);
                if (!v) return v.error().message;
                if (*v > std::numeric_limits<float>::max()) return "expected a number a float holds (at most 3.4e38), found '" + text + "'";
                return std::string();
            },
            ""));
    app.add_option("--seed", ra.seed, "Seed of initial weights and loss targets")->capture_default_str()->check(integer_in(0));
    app.add_option("--max-ops", ra.max_ops, "Refuse a schedule estimated to hold more ops than this")
        ->capture_default_str()
        ->check(integer_in(1));
    app.add_option("--max-memory", ra.max_memory, "Refuse a schedule estimated to take more memory than this (default 4G)");
    app.add_flag("--no-verify", ra.no_verify, "Skip checking collective results (no full-model reference state)");
}

// Hidden (empty group): make one rank fail on purpose, for the fault tests.
void add_test_hook_flags(CLI::App& app, RunArgs& ra) {
    app.add_option("--test-fail-rank", ra.test_fail_rank)->group("")->check(integer_in(-1, INT32_MAX));
    app.add_option("--test-fail-op", ra.test_fail_op)->group("")->check(integer_in(-1));
    app.add_option("--test-fail-mode", ra.test_fail_mode)->group("");
}

}  // namespace zerorun
