// zerosim report: one self-contained HTML report of a prediction, with a measured log beside it if given.
#include <sstream>

#include "analysis/explain.hpp"
#include "analysis/memory.hpp"
#include "analysis/memory_report.hpp"
#include "schedule/schedule.hpp"
#include "command.hpp"
#include "core/json_input.hpp"
#include "prediction/prediction_log.hpp"
#include "prediction/report.hpp"
#include "validate/diff.hpp"

namespace zerosim::cli {

namespace {

struct ReportArgs {
    ScheduleArgs sched;
    std::string topology;
    int64_t nodes = 0;
    std::string measured;
};

int run_report(const CLI::App* sub, ReportArgs& a) {
    auto sim = load_and_simulate(sub, a.sched, a.topology, a.nodes, false);
    if (!sim) return input_error(sim.error());
    const Inputs& in = sim->in;
    const Schedule& schedule = in.schedule;
    // A 3D rank holds its stage's layers, its tensor shard and its experts: ZeRO partitions those.
    Model held = in.model;
    if (schedule.meta.layout.is_3d()) {
        auto local = rank_local_model(in.model, in.cfg, options_for_rank(schedule.meta, schedule.meta.rank));
        if (!local) return input_error(local.error());
        held = std::move(local).value();
    }
    MemoryEstimate mem = estimate_memory(held, in.cfg, schedule);
    std::string explanation = explain_schedule(in.model, in.cfg, schedule);
    std::vector<LoggedOp> measured;
    std::string diff_text;
    if (!a.measured.empty()) {
        // Read once: its lines for the chart, the whole for the validator.
        auto text = read_text_file(a.measured, "log");
        if (!text) return input_error(Error{a.measured, "--measured", text.error().message});
        auto ops = comms_logger_ops(text.value(), a.measured);
        if (!ops) return input_error(ops.error());
        measured = std::move(ops).value();
        auto meas_log = parse_log(text.value(), a.measured);
        if (!meas_log) return input_error(meas_log.error());
        std::ostringstream d;
        write_diff_text(d, diff_logs(prediction_as_log(schedule, sim->logged), meas_log.value(), 0.15, DiffScope::All));
        diff_text = d.str();
    }
    ReportInput ri{schedule, sim->topology, sim->logged, sim->overlapped, mem, explanation,
                   a.measured.empty() ? nullptr : &measured, a.measured, diff_text, nullptr, "", ""};
    FitEstimate fit = fit_of(in, sim->topology, a.sched.activation_checkpointing);
    if (sim->real) {   // --what-if: the real schedule beside it
        const WhatIfComparison c = compare_what_if(a.sched.what_if, *sim, a.sched.activation_checkpointing);
        fit = c.what_if.fit;
        std::ostringstream t;
        write_what_if_table(t, c, "");
        ri.what_if_text = t.str();
    }
    if (schedule.meta.layout.is_3d()) {   // the stage that holds the most (analysis/memory_report.hpp)
        auto fits = layout_fit(in.model, in.cfg, schedule,
                               FitOptions{a.sched.activation_checkpointing || in.cfg.activation_checkpointing, 0,
                                          sim->topology.gpu_memory_gb, sim->topology.name});
        if (!fits) return input_error(fits.error());
        const int64_t most = stage_holding_most(fits.value());
        if (most >= 0) fit = fits.value()[static_cast<size_t>(most)].fit;
    }
    ri.fit = &fit;
    const std::vector<const Schedule*> stages = sim->stage_list();
    const std::vector<const Prediction*> stage_timings = sim->stage_timings();
    if (!stages.empty()) {
        ri.stages = &stages;
        ri.stage_timings = &stage_timings;
    }
    ri.activation_formula = estimate_activations(in.model, schedule.meta.seq_len, schedule.meta.micro_batch, in.cfg.model_dtype,
                                                 a.sched.activation_checkpointing || in.cfg.activation_checkpointing)
                                .formula;
    std::vector<std::string> inputs = schedule_input_files(a.sched);
    inputs.push_back(a.topology);
    if (!a.measured.empty()) inputs.push_back(a.measured);
    return emit(a.sched.output, inputs, [&](std::ostream& out) { write_html_report(out, ri); });
}

}  // namespace

Command add_report(CLI::App& app) {
    auto a = std::make_shared<ReportArgs>();
    auto* sub = app.add_subcommand("report", "One self-contained HTML report: timeline, ops, memory, explanation, measured diff");
    a->sched.per_rank = true;   // a 3D layout: --rank's program, and a pipeline's stages simulated together
    add_schedule_inputs(sub, a->sched, false);
    add_schedule_limits(sub, a->sched);
    add_zero_init(sub, a->sched);
    add_activation_checkpointing(sub, a->sched.activation_checkpointing);
    add_what_if(sub, a->sched.what_if);
    sub->add_option("--topology", a->topology, "Topology JSON")->required();
    sub->add_option("--nodes", a->nodes, "Scale the topology to this many nodes")->check(integer_in(1));
    sub->add_option("--measured", a->measured, "A measured DeepSpeed comms_logger log (real DeepSpeed or zerorun)");
    add_nccl_flag(sub, a->sched.nccl);   // the report's prediction runs the collective model, as predict's does
    add_saved_schedule(sub, a->sched);
    return {sub, [a, sub] { return run_report(sub, *a); }};
}

}  // namespace zerosim::cli
