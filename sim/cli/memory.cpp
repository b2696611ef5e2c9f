// zerosim memory: model-state memory per rank and stage, beside the ZeRO paper and DeepSpeed's estimator.
#include <optional>
#include <sstream>

#include "analysis/memory_report.hpp"
#include "command.hpp"

namespace zerosim::cli {

namespace {

struct MemoryArgs {
    ScheduleArgs sched;
    std::string stages = "0,1,2,3";
    std::string format = "text";
    std::string measured;   // a zerorun --json log
    std::string topology;   // the GPU to fit on (gpu.memory_gb), optional
};

// The GPU to fit on: the topology's gpu.memory_gb (none given: the fit is "unknown"), and its
// node's RAM for offloaded states (host.memory_gb).
Status read_fit_topology(const MemoryArgs& a, FitOptions& fit) {
    if (a.topology.empty()) return std::nullopt;
    auto topo = load_topology(a.topology);
    if (!topo) return topo.error();
    fit.gpu_memory_gb = topo->gpu_memory_gb;
    fit.gpu = topo->name;
    fit.host_memory_gb = topo->host_memory_gb;
    fit.ranks_per_node = topo->gpus_per_node;
    return std::nullopt;
}

// A 3D layout (the flags', or a GPT-NeoX config's): per pipeline stage's rank, the model states,
// the activations at the stage's peak and the fit against the topology's GPU.
int run_layout_memory(const MemoryArgs& a) {
    if (!a.measured.empty())
        return input_error(Error{"", "--measured", "not with a pipeline, tensor, sequence or expert parallel layout yet "
                                                   "(zerorun's measured memory is for one data-parallel rank)"});
    ScheduleArgs s = a.sched;
    s.per_rank = true;
    auto in = load_inputs(s);
    if (!in) return input_error(in.error());
    FitOptions fit{a.sched.activation_checkpointing, a.sched.seq_len, 0, ""};
    if (auto e = read_fit_topology(a, fit)) return input_error(*e);
    std::ostringstream text;
    const auto written = a.format == "json" ? write_layout_memory_json(text, in->model, in->cfg, in->schedule, fit)
                                            : write_layout_memory_text(text, in->model, in->cfg, in->schedule, fit);
    if (written) return input_error(*written);
    std::vector<std::string> inputs = schedule_input_files(a.sched);
    if (!a.topology.empty()) inputs.push_back(a.topology);
    return emit(a.sched.output, inputs, [&](std::ostream& out) { out << text.str(); });
}

int run_memory(const MemoryArgs& a) {
    if (!a.sched.neox_config.empty()) return run_layout_memory(a);
    for (const auto& [flag, value] : {std::pair{"--ds-config", &a.sched.ds_config}, std::pair{"--model", &a.sched.model}})
        if (value->empty()) return input_error(Error{"", flag, "required"});
    auto release = resolve_release(a.sched.deepspeed);
    if (!release) return input_error(release.error());
    auto model = load_model(a.sched.model);   // first: its hidden size fills a Trainer config's buckets
    if (!model) return input_error(model.error());
    auto cfg = load_trainer_ds_config(a.sched.ds_config, release.value(), a.sched.trainer, model.value());
    if (!cfg) return input_error(cfg.error());
    warn_ds_config("zerosim", cfg.value());
    if (refuse_layout(a.sched, cfg.value())) return run_layout_memory(a);
    auto stages = parse_stage_list(a.stages);
    if (!stages) return input_error(stages.error());
    if (stages->empty()) return input_error(Error{"", "--stages", "expected stages such as 0,1,2,3"});
    std::optional<MeasuredMemory> measured;
    if (!a.measured.empty()) {
        auto m = read_zerorun_memory(a.measured);
        if (!m) return input_error(m.error());
        measured = m.value();
    }
    FitOptions fit{a.sched.activation_checkpointing, a.sched.seq_len, 0, ""};
    if (auto e = read_fit_topology(a, fit)) return input_error(*e);
    auto report = memory_report(model.value(), cfg.value(), a.sched.world, stages.value(), measured, a.measured, fit,
                                a.sched.gpus_per_node);
    if (!report) return input_error(report.error());
    return emit(a.sched.output, {a.sched.ds_config, a.sched.model, a.measured, a.topology}, [&](std::ostream& out) {
        if (a.format == "json")
            write_memory_json(out, report.value());
        else
            write_memory_text(out, report.value());
    });
}

}  // namespace

Command add_memory(CLI::App& app) {
    auto a = std::make_shared<MemoryArgs>();
    auto* sub = app.add_subcommand("memory", "Model-state memory per rank and stage, beside the ZeRO paper and DeepSpeed's estimator; with --pp/--tp/--sp/--ep or --neox-config, per pipeline stage: model states, activations (micro batches in flight under 1F1B, Korthikanti's /t, Ulysses' s/sp) and the fit on the GPU");
    add_schedule_inputs(sub, a->sched, true);
    sub->add_option("--stages", a->stages, "Stages to show")->capture_default_str();
    sub->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
    sub->add_option("--topology", a->topology, "Topology JSON whose gpu.memory_gb the memory per rank is fitted against");
    add_activation_checkpointing(sub, a->sched.activation_checkpointing);
    sub->add_option("--measured", a->measured, "A zerorun --json log to set its measured memory beside the prediction");
    return {sub, [a] { return run_memory(*a); }};
}

}  // namespace zerosim::cli
