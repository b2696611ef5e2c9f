// zerosim schedule: every collective (and compute segment) ZeRO issues, in three formats.
#include "command.hpp"
#include "core/json_input.hpp"
#include "formats/schedule_outputs.hpp"

namespace zerosim::cli {

namespace {

// The documents the schedule was built from, for the JSON's "inputs" (predict --schedule reads them).
Result<ScheduleSources> schedule_sources(const ScheduleArgs& a) {
    auto cfg = read_json_file(a.ds_config);
    if (!cfg) return cfg.error();
    auto model = read_json_file(a.model);
    if (!model) return model.error();
    return ScheduleSources{std::move(cfg).value(), std::move(model).value()};
}

int run_schedule(const ScheduleArgs& a) {
    auto in = load_inputs(a);
    if (!in) return input_error(in.error());
    if (!a.what_if.empty())
        if (auto e = apply_what_if_flag(a.what_if, in->schedule)) return input_error(*e);
    const Schedule& s = in->schedule;
    std::optional<ScheduleSources> sources;
    if (a.format == "json") {
        auto read = schedule_sources(a);
        if (!read) return input_error(read.error());
        sources = std::move(read).value();
    }
    return emit(a.output, {a.ds_config, a.model}, [&](std::ostream& out) {
        if (a.format == "deepspeed") {
            DeepSpeedLogOptions o;
            o.log_summary = a.log_summary;
            write_schedule_deepspeed(out, s, o);
        } else if (a.format == "json") {
            write_schedule_json(out, s, &*sources);
        } else {
            TableOptions o;
            o.compute = a.compute;
            write_schedule_table(out, s, o);
        }
    });
}

}  // namespace

Command add_schedule(CLI::App& app) {
    auto a = std::make_shared<ScheduleArgs>();
    a->per_rank = true;
    auto* sub = app.add_subcommand(
        "schedule", "List every collective (and compute segment) ZeRO issues for a model, config and world size");
    sub->add_option("--ds-config", a->ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize")->required();
    sub->add_option("--model", a->model, "Hugging Face config.json (gpt2, gpt_neox, llama...) or a parameter-list JSON")
        ->required();
    sub->add_option("--world", a->world, "Ranks in all (data parallel x --pp x --tp x --sp)")->required()->check(integer_in(1));
    add_layout_flags(sub, *a);
    sub->add_option("--steps", a->steps, "Optimizer steps to list")->capture_default_str()->check(integer_in(1, INT32_MAX));
    sub->add_option("--seq-len", a->seq_len, "Sequence length for compute estimates (default: the model's, else 1024)")
        ->check(integer_in(1));
    sub->add_option("--format", a->format, "deepspeed (comms_logger lines), table, or json (the schedule IR)")
        ->check(CLI::IsMember({"deepspeed", "table", "json"}))
        ->capture_default_str();
    sub->add_option("-o,--output", a->output, "Write to this file instead of standard output");
    sub->add_option("--overflow-steps", a->overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    add_deepspeed_flag(sub, a->deepspeed);
    sub->add_flag("--log-summary", a->log_summary, "deepspeed format: end with deepspeed.comm.log_summary()'s table");
    sub->add_flag("--compute", a->compute, "table format: include compute segments");
    add_schedule_limits(sub, *a);
    add_zero_init(sub, *a);
    add_what_if(sub, a->what_if);
    sub->add_option("--gpus-per-node", a->gpus_per_node,
                    "Ranks DeepSpeed sees on one node (its device_count()): qgZ's intra/inter-node groups, "
                    "--what-if hybrid-shard's node groups")
        ->check(integer_in(1));
    return {sub, [a] { return run_schedule(*a); }};
}

}  // namespace zerosim::cli
