// zerosim calibrate: a topology's latency and bandwidth terms fitted to measured collective tables.
#include <cstdio>
#include <iostream>

#include "calibrate_compute.hpp"
#include "command.hpp"
#include "core/json_input.hpp"
#include "timing/topology.hpp"
#include "validate/calibrate.hpp"
#include "validate/prediction_error.hpp"

namespace zerosim::cli {

namespace {

struct CalibrateArgs {
    std::string topology;
    std::vector<std::string> files;
    std::string op;
    int64_t world = 0;
    int64_t nodes = 0;
    std::string column = "as-deepspeed";
    std::string algo, proto;   // NCCL_ALGO / NCCL_PROTO the measured run forced
    std::string output;
    bool accept_worse_fit = false;
    bool median_of_repeats = false;
    std::string prediction_error_out;
    CalibrateComputeArgs compute;   // --deepspeed-log: the compute fitted instead of collectives
};

int run_calibrate(const CalibrateArgs& a) {
    if (!a.compute.log.empty()) {
        if (!a.files.empty()) return input_error(Error{"", "--deepspeed-log", "fits the compute; give collective tables or it, not both"});
        CalibrateComputeArgs c = a.compute;
        c.topology = a.topology;
        c.nodes = a.nodes;
        c.output = a.output;
        c.sched.world = a.world;
        return run_calibrate_compute(c);
    }
    if (a.files.empty()) return input_error(Error{"", "tables", "required: nccl-tests style tables (or --deepspeed-log LOG)"});
    std::vector<std::string> inputs = a.files;
    inputs.push_back(a.topology);
    std::vector<OutputPath> outputs{{a.output, "-o"}};
    if (!a.prediction_error_out.empty()) outputs.push_back({a.prediction_error_out, "--prediction-error-out"});
    if (auto e = check_command_outputs(outputs, inputs)) return input_error(*e);
    // Each file is read once: the topology both parsed and kept as JSON (the output is the input
    // plus a calibration block), each table parsed and its head searched for the collective.
    auto read = read_topology_document(a.topology, a.nodes);
    if (!read) return input_error(read.error());
    const Topology* topo = &read->topology;
    const Json* doc = &read->doc;
    int64_t world = a.world > 0 ? a.world : topo->total_gpus();
    std::vector<Measurement> rows;
    for (const auto& f : a.files) {
        auto table = read_calibration_table(f, a.op, a.column, world);
        if (!table) return input_error(table.error());
        if (!a.algo.empty() || !a.proto.empty())
            for (Measurement& m : table.value()) {
                auto only = tuner_choice_named(a.algo, a.proto, *topo, m.op, collective_info(m.op).name, world);
                if (!only) return input_error(only.error());
                m.only = only.value();
            }
        rows.insert(rows.end(), table->begin(), table->end());
    }
    auto cal = calibrate(*topo, rows, a.median_of_repeats);
    if (!cal) return input_error(Error{a.files.front(), cal.error().field, cal.error().message});
    write_calibration_summary(std::cerr, cal.value());
    for (const auto& w : poor_fit_warnings(cal.value())) std::cerr << "zerosim: warning: " << w << "\n";
    // A fit worse than the file as given is refused (exit 1, a failed verdict) unless asked for.
    if (auto worse = worse_than_uncalibrated(cal.value()); !worse.empty()) {
        if (!a.accept_worse_fit) {
            std::cerr << "zerosim: error: " << a.topology << ": " << worse << "; not written (--accept-worse-fit writes it)\n";
            return 1;
        }
        std::cerr << "zerosim: warning: " << worse << "; written as --accept-worse-fit asks\n";
    }
    Json out = calibrated_topology(*doc, cal.value(), a.files, a.column);
    if (a.output.empty()) return input_error(Error{"", "-o", "give the calibrated topology a file name (the input is never overwritten)"});
    int rc = emit(a.output, inputs, [&](std::ostream& o) { o << out.dump(2) << '\n'; });
    if (rc || a.prediction_error_out.empty()) return rc;
    // The prediction's own standard error, from the rounds' spread (validate --prediction-error).
    auto ranges = prediction_standard_errors(rows);
    if (ranges.empty())
        return input_error(Error{a.files.front(), "--prediction-error-out",
                                 "no row is repeated over rounds: the prediction's standard error needs bench rounds (e.g. "
                                 "zerorun --bench-between-steps)"});
    for (const auto& r : ranges)
        if (r.collective != "all")
            std::fprintf(stderr, "  prediction se   %-16s %s %3.1f%% (%zu sizes, %zu+ rounds)\n", r.collective.c_str(),
                         r.max_bytes ? "<  256 KiB" : ">= 256 KiB", r.se * 100, r.rows, r.rounds);
    return emit(
        a.prediction_error_out, inputs, [&](std::ostream& o) { o << prediction_error_json(ranges, a.files).dump(2) << '\n'; },
        "--prediction-error-out");
}

}  // namespace

Command add_calibrate(CLI::App& app) {
    auto a = std::make_shared<CalibrateArgs>();
    auto* sub = app.add_subcommand("calibrate", "Fit a topology's latency and bandwidth terms to measured collective tables");
    sub->add_option("--topology", a->topology, "The topology to calibrate")->required();
    sub->add_option("tables", a->files, "nccl-tests style tables (nccl-tests, zerorun bench)");
    add_calibrate_compute_flags(sub, a->compute);
    sub->add_option("--op", a->op, "The collective the tables measured (default: read from the file)");
    sub->add_option("--world", a->world, "Ranks in the measurements (default: every GPU of the topology)")->check(integer_in(1));
    sub->add_option("--nodes", a->nodes, "Scale the topology to this many nodes")->check(integer_in(1));
    sub->add_option("--column", a->column,
                    "Which time of each row to fit: out-of-place, in-place, or as-deepspeed (in-place for all_reduce, "
                    "broadcast and reduce, out-of-place for all_gather and reduce_scatter, as DeepSpeed calls them)")
        ->check(CLI::IsMember({"as-deepspeed", "out-of-place", "in-place"}))
        ->capture_default_str();
    sub->add_option("--algo", a->algo,
                    "The algorithm the measured run forced (NCCL_ALGO: ring, tree, nvls, nvlstree, collnetdirect, collnetchain, "
                    "pat); default: the tuner's choice");
    sub->add_option("--proto", a->proto, "The protocol the measured run forced (NCCL_PROTO: LL, LL128, Simple); default: the tuner's choice");
    sub->add_option("-o,--output", a->output, "The calibrated topology file to write")->required()->check(output_file());
    sub->add_flag("--median-of-repeats", a->median_of_repeats,
                  "Fit the rows of one collective and size (bench rounds repeated, e.g. zerorun --bench-between-steps) as "
                  "their median");
    sub->add_option("--prediction-error-out", a->prediction_error_out,
                    "Also write the prediction's standard error per collective and size range, from the spread of rows repeated "
                    "over bench rounds (for zerosim validate --prediction-error)")
        ->check(output_file());
    sub->add_flag("--accept-worse-fit", a->accept_worse_fit,
                  "Write the calibrated topology even when its fit is worse than the topology as given");
    return {sub, [a] { return run_calibrate(*a); }};
}

}  // namespace zerosim::cli
