// zerosim calibrate --deepspeed-log: the topology's GEMM efficiency fitted to a DeepSpeed run's
// wall_clock_breakdown lines (validate/compute_fit.hpp), written as a calibrated topology whose
// sources say what it was fitted to.
#include <cstdio>
#include <iostream>

#include "calibrate_compute.hpp"
#include "core/json_input.hpp"
#include "formats/wall_clock_log.hpp"
#include "timing/topology.hpp"
#include "validate/compute_fit.hpp"

namespace zerosim::cli {

namespace {

std::string ms_text(double ms) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", ms);
    return buf;
}

}  // namespace

Result<TopologyDocument> read_topology_document(const std::string& path, int64_t nodes) {
    auto text = read_text_file(path, "topology file");
    if (!text) return text.error();
    auto topo = parse_topology(path, text.value(), nodes);
    if (!topo) return topo.error();
    auto doc = parse_json_text(text.value(), path);
    if (!doc) return doc.error();
    return TopologyDocument{std::move(topo).value(), std::move(doc).value()};
}

int run_calibrate_compute(const CalibrateComputeArgs& a) {
    std::vector<std::string> inputs = schedule_input_files(a.sched);
    inputs.push_back(a.topology);
    inputs.push_back(a.log);
    if (auto e = check_command_outputs({{a.output, "-o"}}, inputs)) return input_error(*e);
    auto log = read_deepspeed_figures(a.log);
    if (!log) return input_error(log.error());
    auto read = read_topology_document(a.topology, a.nodes);
    if (!read) return input_error(read.error());
    const Topology& topo = read->topology;
    ScheduleArgs sched = a.sched;
    sched.world = sched.world > 0 ? sched.world : topo.total_gpus();
    sched.steps = 2;
    auto in = load_inputs(sched);
    if (!in) return input_error(in.error());
    auto fit = fit_compute_efficiency(in->schedule, topo, log.value());
    if (!fit) return input_error(fit.error());
    std::cerr << compute_fit_summary(fit.value());
    Json out = read->doc;
    out["gpu"]["compute_efficiency"] = fit->efficiency;
    out["sources"]["gpu.compute_efficiency"] =
        "fitted by zerosim calibrate --deepspeed-log " + a.log + " (median of " + std::to_string(fit->lines) +
        " " + fit->from + ": forward " + ms_text(fit->measured_fwd_ms) + " ms, backward " + ms_text(fit->measured_bwd_ms) +
        " ms) for " + in->schedule.meta.model_name + " on " + std::to_string(sched.world) + " ranks";
    if (fit->mem_fitted) {
        const bool cpu = fit->step_term == "host.cpu_adam_gbs";
        out[cpu ? "host" : "gpu"][cpu ? "cpu_adam_gbs" : "memory_efficiency"] = fit->mem_efficiency;
        out["sources"][fit->step_term] = "fitted by zerosim calibrate --deepspeed-log " + a.log + " (the optimizer step, median " +
                                                  ms_text(fit->measured_step_ms) + " ms) for " + in->schedule.meta.model_name +
                                                  " on " + std::to_string(sched.world) + " ranks";
    }
    return emit(a.output, inputs, [&](std::ostream& o) { o << out.dump(2) << '\n'; });
}

void add_calibrate_compute_flags(CLI::App* sub, CalibrateComputeArgs& a) {
    sub->add_option("--deepspeed-log", a.log,
                    "Fit gpu.compute_efficiency to this DeepSpeed log's wall_clock_breakdown lines (fwd_microstep, "
                    "bwd_microstep, ...) instead of collective tables; needs the run's --ds-config and --model (and --world)");
    add_model_and_config(sub, a.sched);
    sub->add_option("--seq-len", a.sched.seq_len, "With --deepspeed-log: the run's sequence length (default: the model's)")
        ->check(integer_in(1));
    add_deepspeed_flag(sub, a.sched.deepspeed);
    add_zero_init(sub, a.sched);
    add_activation_checkpointing(sub, a.sched.activation_checkpointing);
}

}  // namespace zerosim::cli
