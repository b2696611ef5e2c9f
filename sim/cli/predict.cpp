// zerosim predict: the schedule timed on a topology by discrete-event simulation.
#include "command.hpp"
#include "prediction/assumed.hpp"
#include "prediction/predict_outputs.hpp"
#include "prediction/stage_time.hpp"
#include "prediction/what_if_compare.hpp"

namespace zerosim::cli {

namespace {

struct PredictArgs {
    ScheduleArgs sched;
    std::string topology;
    int64_t nodes = 0;
    std::string format = "deepspeed";
    std::string trace;
    std::string timing = "logger";
    bool no_summary = false;
};

// The run's own figures, as its config makes it print them (formats/wall_clock_log.hpp).
PredictReport::OwnFigures own_figures(const DsConfig& cfg, const ScheduleMeta& m) {
    PredictReport::OwnFigures f;
    const int64_t data = m.layout.is_3d() ? m.layout.data() : m.world;
    f.timers = cfg.wall_clock_breakdown || cfg.flops_profiler;
    f.steps_per_print = cfg.steps_per_print_resolved();
    f.train_batch = m.micro_batch * std::max<int64_t>(1, m.grad_accum) * data;
    return f;
}

int run_predict(const CLI::App* sub, PredictArgs& a) {
    std::vector<std::string> inputs = schedule_input_files(a.sched);
    inputs.push_back(a.topology);
    std::vector<OutputPath> outputs{{a.sched.output, "-o"}};
    if (!a.trace.empty()) outputs.push_back({a.trace, "--trace"});
    if (auto e = check_command_outputs(outputs, inputs)) return input_error(*e);   // before minutes of simulation
    // A long run is simulated as its template and written by period where the writer goes op by
    // op (prediction/timed_stream.hpp); --trace, --what-if and a saved schedule take every step.
    a.sched.by_period = a.format != "json" && a.trace.empty() && a.sched.what_if.empty() && a.sched.schedule.empty();
    auto sim = load_and_simulate(sub, a.sched, a.topology, a.nodes, true);
    if (!sim) return input_error(sim.error());
    std::optional<TimedStream> timed;
    if (sim->in.stream) {
        auto t = time_by_period(*sim->in.stream, sim->logged, sim->overlapped);
        if (t) {
            timed = std::move(t).value();
        } else {   // every step simulated after all
            std::cerr << "zerosim: note: " << t.error().message << "; simulating every step\n";
            a.sched.by_period = false;
            sim = load_and_simulate(sub, a.sched, a.topology, a.nodes, true);
            if (!sim) return input_error(sim.error());
        }
    }
    const Schedule& sched = sim->in.schedule;
    const Prediction &logged = timed ? timed->logged_run : sim->logged, &overlapped = timed ? timed->overlapped_run : sim->overlapped;
    // The deepspeed format shows the logger's view unless asked for the overlapped one.
    const Prediction& shown = a.timing == "overlapped" ? overlapped : logged;
    FitEstimate fit = fit_of(sim->in, sim->topology, a.sched.activation_checkpointing);
    std::optional<WhatIfComparison> compare;
    if (sim->real) {   // --what-if: the real schedule beside it
        compare = compare_what_if(a.sched.what_if, *sim, a.sched.activation_checkpointing);
        fit = compare->what_if.fit;
    }
    std::vector<StageFit> stage_fits;   // a 3D layout: each stage's memory (analysis/memory_report.hpp)
    if (sched.meta.layout.is_3d()) {
        const FitOptions o{a.sched.activation_checkpointing || sim->in.cfg.activation_checkpointing, 0, sim->topology.gpu_memory_gb,
                           sim->topology.name};
        auto fits = layout_fit(sim->in.model, sim->in.cfg, sched, o);
        if (!fits) return input_error(fits.error());
        stage_fits = std::move(fits).value();
        const int64_t most = stage_holding_most(stage_fits);
        if (most >= 0) fit = stage_fits[static_cast<size_t>(most)].fit;
    }
    // Which of the step's figures are the topology's guesses, once, before the answer.
    const std::string assumed = assumed_line(sim->topology, assumed_figures(sim->topology, sched.meta));
    if (!assumed.empty()) std::cerr << "zerosim: note: " << printable(assumed) << "\n";
    PredictReport report{sched, sim->topology, shown, overlapped, &fit, ""};
    if (!stage_fits.empty()) report.stage_fits = &stage_fits;
    if (compare) report.what_if_json = what_if_json(*compare);
    if (timed) report.timed = &*timed;
    report.figures = own_figures(sim->in.cfg, timed ? timed->stream->meta() : sched.meta);
    const std::vector<StageTime> stages = stage_times(sim->stage_list(), sim->stage_timings());
    if (!stages.empty()) report.stages = &stages;
    if (!a.trace.empty()) {
        int rc = emit(a.trace, inputs, [&](std::ostream& out) {
            if (sim->stages.empty())
                write_chrome_trace(out, sched, overlapped);
            else
                write_chrome_trace_stages(out, sim->stage_list(), sim->stage_timings());
        }, "--trace");
        if (rc != 0) return rc;
    }
    return emit(a.sched.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_predicted_json(out, report);
        else if (a.format == "csv")
            write_predicted_csv(out, report);
        else if (a.format == "summary")
            write_step_summary(out, report, "");
        else
            write_predicted_deepspeed(out, report, !a.no_summary);
        if (compare && (a.format == "summary" || a.format == "deepspeed"))
            write_what_if_table(out, *compare, a.format == "deepspeed" ? "# " : "");
    });
}

}  // namespace

Command add_predict(CLI::App& app) {
    auto a = std::make_shared<PredictArgs>();
    auto* sub = app.add_subcommand("predict", "Time the schedule on a topology by discrete-event simulation (SimGrid)");
    a->sched.per_rank = true;   // a 3D layout: --rank's program, and a pipeline's stages simulated together
    add_schedule_inputs(sub, a->sched, false);
    add_schedule_limits(sub, a->sched);
    add_zero_init(sub, a->sched);
    add_activation_checkpointing(sub, a->sched.activation_checkpointing);
    add_what_if(sub, a->sched.what_if);
    sub->add_option("--topology", a->topology, "Topology JSON (see topologies/README.md)")->required();
    sub->add_option("--nodes", a->nodes, "Scale the topology's node design to this many nodes")->check(integer_in(1));
    add_nccl_flag(sub, a->sched.nccl);
    add_fabric_flags(sub, a->sched.fabric);
    sub->add_option("--format", a->format,
                    "deepspeed (comms_logger lines, summary and step times), json or csv (per op), summary (step times)")
        ->check(CLI::IsMember({"deepspeed", "json", "csv", "summary"}))
        ->capture_default_str();
    sub->add_option("--trace", a->trace, "Write a Chrome-trace timeline (open in Perfetto or chrome://tracing)")
        ->check(output_file());
    sub->add_flag("--no-log-summary", a->no_summary, "deepspeed format: leave out the log_summary() table");
    sub->add_option("--timing", a->timing,
                    "op times in the deepspeed format: logger (synchronised after every op, as DeepSpeed's comms "
                    "logger measures) or overlapped (as the hardware runs them)")
        ->check(CLI::IsMember({"logger", "overlapped"}))
        ->capture_default_str();
    add_saved_schedule(sub, a->sched);
    return {sub, [a, sub] { return run_predict(sub, *a); }};
}

}  // namespace zerosim::cli
