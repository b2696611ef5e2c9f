// zerosim sweep: predictions over a grid of stages, node counts, topologies and DeepSpeed settings.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <thread>

#include "command.hpp"
#include "core/output.hpp"
#include "prediction/sweep.hpp"
#include "schedule/what_if.hpp"
#include "schedule/what_if_fsdp.hpp"

namespace zerosim::cli {

namespace {

struct SweepArgs {
    SweepSpec spec;
    SweepFlags flags;
    std::string output;
    std::string plot;
    int jobs = 0;
    std::string deepspeed;
    std::string nccl;
    FabricArgs fabric;
};

// What every point of the sweep assumes unless a --set changes it, said once before the run: the
// batch, dtype and sequence length (issue 32: a sweep without --ds-config named neither), and per
// topology the figures no measurement fitted (predict's "assumed" note).
Status note_sweep_assumptions(const SweepSpec& spec, const SweepInputs& in) {
    Json doc = in.ds_config;
    if (!doc.contains("train_micro_batch_size_per_gpu") && !doc.contains("train_batch_size")) doc["train_micro_batch_size_per_gpu"] = 1;
    auto cfg = parse_ds_config(spec.config_source(), doc.dump(), spec.release);
    if (!cfg) return cfg.error();
    std::ostringstream batch;
    if (cfg->train_batch && !cfg->micro_batch)
        batch << "train_batch_size " << *cfg->train_batch << " (micro batch and accumulation per world)";
    else
        batch << "micro batch " << cfg->micro_batch.value_or(1) << " per GPU, gradient accumulation "
              << (cfg->train_batch ? std::string("from train_batch_size ") + std::to_string(*cfg->train_batch)
                                   : std::to_string(cfg->grad_accum.value_or(1)));
    const int64_t seq = spec.seq_len > 0 ? spec.seq_len : in.model.default_seq_len > 0 ? in.model.default_seq_len : 1024;
    std::cerr << "zerosim: note: every point: " << batch.str() << ", " << dtype_name(cfg->model_dtype) << ", sequence length " << seq
              << (spec.seq_len > 0 ? " (--seq-len)" : in.model.default_seq_len > 0 ? " (the model's)" : " (the default; the model gives none)")
              << (spec.ds_config.empty() && spec.neox_config.empty() ? "; DeepSpeed's defaults, no --ds-config"
                                                                     : "; from " + printable(spec.config_source(), 256))
              << "\n";
    ScheduleMeta meta;   // what assumed_figures reads: the highest stage swept, the config's offload
    meta.stage = spec.stages.empty() ? 0 : *std::max_element(spec.stages.begin(), spec.stages.end());
    meta.offload_optimizer = cfg->zero.offload_optimizer;
    meta.offload_param = cfg->zero.offload_param;
    for (const auto& path : spec.topologies) {
        const Topology& t = in.topologies.at(path);
        const std::string assumed = assumed_line(t, assumed_figures(t, meta));
        if (!assumed.empty()) std::cerr << "zerosim: note: " << printable(assumed) << "\n";
    }
    return std::nullopt;
}

// The model and the config: --model (with --ds-config or DeepSpeed's defaults), or GPT-NeoX's YAML.
Status sweep_config_flags(const SweepSpec& spec) {
    if (spec.neox_config.empty() && spec.model.empty()) return Error{"", "--model", "required (or --neox-config FILE.yml, a GPT-NeoX config)"};
    if (!spec.neox_config.empty() && !spec.model.empty())
        return Error{"", "--model", "not with --neox-config (the GPT-NeoX config describes the model)"};
    if (!spec.neox_config.empty() && !spec.ds_config.empty())
        return Error{"", "--ds-config", "not with --neox-config (the GPT-NeoX config holds the DeepSpeed keys)"};
    if (spec.neox_config.empty() && spec.vocab_size > 0)
        return Error{"", "--vocab-size", "goes with --neox-config (a model file gives its own vocabulary)"};
    return std::nullopt;
}

// A GPT-NeoX config's layout where --pp and --tp leave it (a sweep may vary them: the flags' lists
// then replace the file's sizes, said in a note), its pipeline engine and partition method.
void neox_layout(const SweepInputs& in, SweepSpec& spec) {
    const std::string src = printable(spec.config_source(), 256);
    const int64_t pipe = std::max<int64_t>(in.neox_pipe, 1);
    if (spec.pp == std::vector<int64_t>{1}) spec.pp = {pipe};
    else if (spec.pp != std::vector<int64_t>{pipe})
        std::cerr << "zerosim: note: " << src << ": --pp replaces pipe-parallel-size " << in.neox_pipe << "\n";
    if (spec.tp == std::vector<int64_t>{1}) spec.tp = {in.neox_tensor};
    else if (spec.tp != std::vector<int64_t>{in.neox_tensor})
        std::cerr << "zerosim: note: " << src << ": --tp replaces model-parallel-size " << in.neox_tensor << "\n";
    spec.pipe_engine = in.neox_pipe >= 1;
    spec.pp_partition = in.neox_partition;
}

int run_sweep_cmd(SweepArgs& a) {
    SweepSpec& spec = a.spec;
    if (auto e = apply_sweep_flags(a.flags, spec)) return input_error(*e);
    if (auto e = fabric_sweep_options(a.fabric, spec.fabric)) return input_error(*e);
    auto release = resolve_release(a.deepspeed);
    if (!release) return input_error(release.error());
    spec.release = release.value();
    if (!spec.what_if.empty()) {
        if (spec.what_if != "reduce-scatter" && !fsdp_strategy(spec.what_if)) {
            Schedule none;   // the name is checked before the schedule
            return input_error(apply_what_if(spec.what_if, none).error());
        }
        if (spec.what_if == "reduce-scatter")
            std::cerr << "zerosim: note: --what-if reduce-scatter: stage 1/2 points are NOT DeepSpeed's schedule: each bucket "
                         "all_reduce sent as reduce_scatter_tensor (DeepSpeed #6463/#7440)\n";
        else
            std::cerr << "zerosim: note: --what-if " << spec.what_if << ": stage 3 points are NOT DeepSpeed's schedule: "
                         "PyTorch FSDP's, a unit per transformer block (docs/what-if.md)\n";
    }
    if (auto e = sweep_config_flags(spec)) return input_error(*e);
    // Inputs are read once, here, so that a bad file is one clear error, not one per point.
    auto inputs = load_sweep_inputs(spec);
    if (!inputs) return input_error(inputs.error());
    if (inputs->neox_pipe >= 0) neox_layout(*inputs, spec);
    for (auto& [path, topo] : inputs.value().topologies)
        if (auto e = apply_nccl_flag(a.nccl, topo)) return input_error(*e);
    if (auto e = check_sweep_values(spec, inputs.value())) return input_error(*e);
    if (!spec.ds_config.empty()) {
        auto cfg = parse_ds_config(spec.ds_config, inputs->ds_config.dump(), spec.release);
        if (!cfg) return input_error(cfg.error());
        warn_ds_config("zerosim", cfg.value());
        // A config that fixes tensor or Ulysses parallelism is a layout sweep of that size (its columns shown).
        if (cfg->autotp_size > 0 && spec.tp == std::vector<int64_t>{1}) spec.tp = {cfg->autotp_size};
        if (cfg->sequence_parallel_size > 0 && spec.sp == std::vector<int64_t>{1}) spec.sp = {cfg->sequence_parallel_size};
    }
    std::vector<std::string> files = spec.topologies;
    if (spec.neox_config.empty()) files.push_back(spec.model);
    files.insert(files.end(), spec.neox_config.begin(), spec.neox_config.end());
    if (!spec.ds_config.empty()) files.push_back(spec.ds_config);
    std::vector<OutputPath> outputs{{a.output, "-o"}};
    if (!a.plot.empty()) outputs.push_back({a.plot, "--plot"});
    if (auto e = check_command_outputs(outputs, files)) return input_error(*e);
    std::map<std::string, size_t> dropped;   // layouts DeepSpeed cannot run, by reason
    auto all = runnable_layouts(sweep_points(spec), inputs.value(), dropped, spec.pipe_engine);
    for (const auto& [why, count] : dropped)
        std::cerr << "zerosim: note: " << count << " point(s) left out: " << why << "\n";
    if (all.empty()) return input_error(Error{"", "--topology/--stages/--nodes", "the grid is empty: nothing to predict"});
    if (auto e = note_sweep_assumptions(spec, inputs.value())) return input_error(*e);
    auto points = shard_points(all, spec.shard, spec.shards);
    spec.jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto rows = run_sweep(spec, inputs.value(), points, sweep_progress(stderr, isatty(2)));
    if (!rows && points.empty()) return input_error(rows.error());
    if (!rows) {
        std::cerr << "zerosim: error: " << rows.error().what() << '\n';
        return kExitRuntimeFault;
    }
    size_t failed = std::count_if(rows->begin(), rows->end(), [](const SweepResult& r) { return !r.error.empty(); });
    if (failed) std::cerr << "zerosim: warning: " << failed << " point(s) could not be predicted (see the error column)\n";
    // A sweep none of whose points could be predicted is a failed run, whatever it writes.
    int verdict = !rows->empty() && failed == rows->size() ? kExitFailed : 0;
    if (verdict) std::cerr << "zerosim: error: none of the " << failed << " point(s) could be predicted\n";
    if (!a.plot.empty()) {
        int rc = emit(a.plot, files, [&](std::ostream& out) { write_sweep_svg(out, spec, rows.value()); }, "--plot");
        if (rc) return rc;
    }
    int rc = emit(a.output, files, [&](std::ostream& out) { write_sweep_csv(out, spec, rows.value(), spec.shard == 0); });
    return rc ? rc : verdict;
}

}  // namespace

Command add_sweep(CLI::App& app) {
    auto a = std::make_shared<SweepArgs>();
    auto* sub = app.add_subcommand("sweep", "Predict a grid of stages, node counts, topologies and DeepSpeed settings");
    sub->add_option("--model", a->spec.model, "Hugging Face config.json or parameter-list JSON (or --neox-config)");
    sub->add_option("--neox-config", a->spec.neox_config,
                    "GPT-NeoX YAML config(s), merged in order: the model, pipe-parallel-size, model-parallel-size and the "
                    "DeepSpeed keys, in place of --model and --ds-config (docs/neox.md); --pp and --tp lists replace its layout")
        ->expected(1, -1);
    sub->add_option("--vocab-size", a->spec.vocab_size,
                    "With --neox-config: the tokenizer's vocabulary size (the YAML names only the tokenizer), padded as GPT-NeoX pads it")
        ->check(integer_in(1));
    sub->add_option("--ds-config", a->spec.ds_config, "DeepSpeed config (default: DeepSpeed's defaults, micro batch 1)");
    add_deepspeed_flag(sub, a->deepspeed);
    sub->add_option("--topology", a->flags.topologies, "Topology files (repeat or comma-separate)")->required();
    sub->add_option("--stages", a->flags.stages, "ZeRO stages")->capture_default_str();
    sub->add_option("--nodes", a->flags.nodes, "Node counts (world = nodes x GPUs per node)")->capture_default_str();
    sub->add_option("--set", a->flags.sets,
                    "A DeepSpeed key and its values, e.g. zero_optimization.reduce_bucket_size=5e7,5e8, or the topology's "
                    "network.oversubscription, network.nodes_per_leaf or network.background_spine_load");
    add_fabric_flags(sub, a->fabric);
    sub->add_option("--steps", a->spec.steps, "Steps per prediction (the last one is reported)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
    sub->add_option("--seq-len", a->spec.seq_len, "Sequence length for compute")->check(integer_in(1));
    sub->add_flag("--zero-init", a->spec.zero_init,
                  "Stage-3 points: the model is built under deepspeed.zero.Init (no engine-start broadcasts)");
    add_activation_checkpointing(sub, a->spec.activation_checkpointing);
    sub->add_option("--what-if", a->spec.what_if,
                    "Not DeepSpeed's schedule (docs/what-if.md): reduce-scatter (stage 1/2 points reduce_scatter each bucket, "
                    "DeepSpeed #6463/#7440); fsdp-full-shard, fsdp-shard-grad-op or hybrid-shard (stage 3 points as "
                    "PyTorch FSDP)");
    sub->add_option("-o,--output", a->output, "CSV file (default: standard output)")->check(output_file());
    sub->add_option("--plot", a->plot, "SVG plot of step time and memory against ranks")->check(output_file());
    sub->add_option("--pp", a->flags.pp, "Pipeline stages to try (comma list; DeepSpeed's PipelineModule, ZeRO 0 and 1)")
        ->capture_default_str();
    sub->add_option("--tp", a->flags.tp, "Tensor-parallel sizes to try (comma list)")->capture_default_str();
    sub->add_option("--sp", a->flags.sp, "Ulysses sequence-parallel sizes to try (comma list)")->capture_default_str();
    sub->add_option("--ep", a->flags.ep, "MoE expert-parallel sizes to try (comma list; inside the data-parallel ranks)")
        ->capture_default_str();
    add_nccl_flag(sub, a->nccl);
    sub->add_option("--jobs", a->jobs, "Worker processes (default: every core)")->check(integer_in(1, 4096));
    sub->add_option("--shard", a->flags.shard,
                    "i/k: predict the i-th of k contiguous parts (0-based); concatenating the CSVs gives the whole grid");
    return {sub, [a] { return run_sweep_cmd(*a); }};
}

}  // namespace zerosim::cli
