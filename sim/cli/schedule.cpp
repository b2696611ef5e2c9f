// zerosim schedule: every collective (and compute segment) ZeRO issues, in three formats.
#include <filesystem>

#include "command.hpp"
#include "core/json_input.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/release.hpp"

namespace zerosim::cli {

namespace {

// The documents the schedule was built from, for the JSON's "inputs" (predict --schedule reads them).
Result<ScheduleSources> schedule_sources(const ScheduleArgs& a, const Json& neox_ds_config, const Json& neox_model) {
    if (!a.neox_config.empty())   // the DeepSpeed config GPT-NeoX builds and the model as a parameter list
        return ScheduleSources{neox_ds_config, neox_model};
    auto m = load_model(a.model);
    if (!m) return m.error();
    std::vector<std::string> notes;   // printed once, when the config was loaded
    auto cfg = read_trainer_ds_config_document(a.ds_config, a.trainer, m->hidden_size, notes);   // "auto" filled
    if (!cfg) return cfg.error();
    auto model = read_json_file(a.model);
    if (!model) return model.error();
    return ScheduleSources{std::move(cfg).value(), std::move(model).value()};
}

// The schedule in the format the flags name, op by op from the stream.
int write_stream(const ScheduleArgs& a, const ScheduleStream& s, const Json& neox_ds_config, const Json& neox_model) {
    std::optional<ScheduleSources> sources;
    if (a.format == "json") {
        auto read = schedule_sources(a, neox_ds_config, neox_model);
        if (!read) return input_error(read.error());
        sources = std::move(read).value();
    }
    return emit(a.output, schedule_input_files(a), [&](std::ostream& out) {
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

// One rank's schedule (ScheduleArgs::rank) written as the flags say: streamed step by step
// (schedule/stream.hpp), or built whole where --what-if rewrites it.
int write_schedule(const ScheduleArgs& a) {
    if (a.what_if.empty()) {
        auto in = load_stream_inputs(a);
        if (!in) return input_error(in.error());
        return write_stream(a, in->schedule, in->neox_ds_config, in->neox_model);
    }
    auto in = load_inputs(a);
    if (!in) return input_error(in.error());
    if (auto e = apply_what_if_flag(a.what_if, in->schedule)) return input_error(*e);
    return write_stream(a, ScheduleStream::of(in->schedule), in->neox_ds_config, in->neox_model);
}

// --rank all: every rank's schedule, one file each, DIR/rank0.log .. rankN-1.log (.json and .txt
// for those formats), the layout zerosim validate reads back as one log per rank.
int write_every_rank(ScheduleArgs a) {
    if (a.pp <= 1 && a.tp <= 1 && a.sp <= 1 && a.ep <= 1 && a.neox_config.empty())   // tp, sp 0: not given
        return input_error(Error{"", "--rank", "all needs a pipeline, tensor, sequence or expert parallel layout "
                                               "(--pp, --tp, --sp, --ep): without one every rank's ops are rank 0's"});
    // One schedule and one file per rank: bounded, so a typo'd --world cannot fill a disk.
    constexpr int64_t kMaxRankFiles = 4096;
    if (a.world > kMaxRankFiles)
        return input_error(Error{"", "--rank", "all writes one file per rank, at most " + std::to_string(kMaxRankFiles) +
                                                   "; --world is " + std::to_string(a.world) + " (give --rank R for one rank)"});
    std::error_code ec;
    const bool folder = std::filesystem::is_directory(a.output, ec);
    if (a.output.empty() || (!folder && a.output.back() != '/'))
        return input_error(Error{"", "--rank", "all writes one file per rank: give -o a folder (-o DIR/)"});
    if (!folder && !std::filesystem::create_directories(a.output, ec))
        return input_error(Error{a.output, "-o", "cannot create the folder: " + ec.message()});
    const std::string ext = a.format == "deepspeed" ? ".log" : a.format == "json" ? ".json" : ".txt";
    const std::string dir = a.output;
    for (int64_t r = 0; r < a.world; ++r) {
        a.rank = r;
        a.output = (std::filesystem::path(dir) / ("rank" + std::to_string(r) + ext)).string();
        if (int rc = write_schedule(a)) return rc;
        // The release note said once is enough: the later ranks are built for the same release.
        if (a.deepspeed.empty()) a.deepspeed = kNewestRelease.number();
    }
    return 0;
}

int run_schedule(const ScheduleArgs& a, bool every_rank) { return every_rank ? write_every_rank(a) : write_schedule(a); }

}  // namespace

Command add_schedule(CLI::App& app) {
    auto a = std::make_shared<ScheduleArgs>();
    a->per_rank = true;
    auto* sub = app.add_subcommand(
        "schedule", "List every collective (and compute segment) ZeRO issues for a model, config and world size");
    add_model_and_config(sub, *a);
    sub->add_option("--world", a->world, "Ranks in all (data parallel x --pp x --tp x --sp)")->required()->check(integer_in(1));
    add_layout_flags(sub, *a);
    // schedule alone also takes --rank all (write_every_rank): the word sets `every` and reaches
    // the number's check as 0 (the option, its help and its checks stay command.cpp's).
    auto every = std::make_shared<bool>(false);
    sub->get_option("--rank")
        ->transform([every](std::string v) {
            if (v != "all") return v;
            *every = true;
            return std::string("0");
        })
        ->description("With --pp/--tp/--sp/--ep: the rank whose ops to build (0 is the rank DeepSpeed's logger prints), "
                      "or all with -o DIR/ (DIR/rank0.log ..)");
    sub->add_option("--steps", a->steps, "Optimizer steps to list")->capture_default_str()->check(integer_in(1, INT32_MAX));
    sub->add_option("--seq-len", a->seq_len, "Sequence length for compute estimates (default: the model's, else 1024)")
        ->check(integer_in(1));
    sub->add_option("--format", a->format, "deepspeed (comms_logger lines), table, or json (the schedule IR)")
        ->check(CLI::IsMember({"deepspeed", "table", "json"}))
        ->capture_default_str();
    sub->add_option("-o,--output", a->output, "Write to this file instead of standard output")->check(output_file());
    sub->add_option("--overflow-steps", a->overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    add_deepspeed_flag(sub, a->deepspeed);
    sub->add_flag("--log-summary", a->log_summary, "deepspeed format: end with deepspeed.comm.log_summary()'s table");
    sub->add_flag("--compute", a->compute, "table format: include compute segments");
    add_schedule_limits(sub, *a);
    add_zero_init(sub, *a);
    add_activation_checkpointing(sub, a->activation_checkpointing);
    add_what_if(sub, a->what_if);
    sub->add_option("--gpus-per-node", a->gpus_per_node,
                    "Ranks DeepSpeed sees on one node (its device_count()): qgZ's intra/inter-node groups, "
                    "--what-if hybrid-shard's node groups")
        ->check(integer_in(1));
    return {sub, [a, every] { return run_schedule(*a, *every); }};
}

}  // namespace zerosim::cli
