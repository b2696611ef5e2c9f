// zerosim bench: a predicted nccl-tests table for one collective over a size sweep.
#include "command.hpp"
#include "core/sizes.hpp"
#include "prediction/bench_table.hpp"
#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

namespace zerosim::cli {

namespace {

struct BenchArgs {
    std::string topology;
    int64_t nodes = 0;
    int64_t world = 0;
    std::string op = "all_reduce";
    std::string min = "8";
    std::string max = "128M";
    int64_t factor = 2;
    int gpus_per_thread = 1;
    std::string algo;
    std::string proto;
    std::string nccl;
    std::string output;
    FabricArgs fabric;
};

int run_bench(const BenchArgs& a) {
    auto kind = collective_named(a.op);
    if (!kind)
        return input_error(Error{"", "--op", "unknown collective '" + a.op +
                                                 "'; expected all_reduce, all_gather, reduce_scatter, broadcast or reduce"});
    auto topo = load_topology(a.topology, a.nodes);
    if (!topo) return input_error(topo.error());
    if (auto e = apply_nccl_flag(a.nccl, topo.value())) return input_error(*e);
    auto world = world_on(topo.value(), a.world);
    if (!world) return input_error(world.error());
    auto lo = parse_size(a.min, "--min");
    if (!lo) return input_error(lo.error());
    auto hi = parse_size(a.max, "--max");
    if (!hi) return input_error(hi.error());
    if (*hi < *lo) return input_error(Error{"", "--max", "must be at least --min"});
    if (a.factor < 2) return input_error(Error{"", "--factor", "expected 2 or more"});
    if (a.gpus_per_thread < 1 || a.gpus_per_thread > topo->gpus_per_node)
        return input_error(Error{"", "--gpus-per-thread", "expected 1 to " + std::to_string(topo->gpus_per_node) +
                                                              " (the GPUs of one node)"});
    auto only = tuner_choice_named(a.algo, a.proto, topo.value(), *kind, a.op, *world);
    if (!only) return input_error(only.error());
    auto fabric = fabric_model_for(a.fabric, topo.value(), *world);
    if (!fabric) return input_error(fabric.error());
    EngineAdjust adjust;
    if (fabric.value()) {
        ScheduleMeta meta;
        meta.world = *world;
        adjust = fabric.value()->engine_adjust(meta);
    }
    auto rows = predict_bench_rows(fabric.value() ? fabric.value()->ideal_topology() : topo.value(), *kind, *world, *lo, *hi,
                                   a.factor, a.gpus_per_thread, only.value(), fabric.value() ? &adjust : nullptr);
    if (fabric.value()) note_fabric(*fabric.value());
    std::string header = topo->name + ", " + std::to_string(*world) + " ranks on " + std::to_string(topo->nodes) + " x " +
                         std::to_string(topo->gpus_per_node) + ", " + std::to_string(a.gpus_per_thread) +
                         (a.gpus_per_thread == 1 ? " GPU" : " GPUs") + " per host thread, NCCL " + topo->nccl_version.str() +
                         (topo->aws_tuner && topo->nodes > 1 ? " with AWS's tuner plugin" : " tuner") +
                         (fabric.value() ? std::string(", fabric mode") : std::string());
    return emit(a.output, {a.topology}, [&](std::ostream& out) { write_nccl_tests_table(out, a.op, header, rows); });
}

}  // namespace

Command add_bench(CLI::App& app) {
    auto a = std::make_shared<BenchArgs>();
    auto* sub = app.add_subcommand("bench", "Predicted nccl-tests table for one collective over a size sweep");
    sub->add_option("--topology", a->topology, "Topology JSON")->required();
    sub->add_option("--nodes", a->nodes, "Scale the topology to this many nodes")->check(integer_in(1));
    sub->add_option("--world", a->world, "Ranks (default: every GPU of the topology)")->check(integer_in(1));
    sub->add_option("--op", a->op, "all_reduce, all_gather, reduce_scatter, broadcast or reduce")->capture_default_str();
    sub->add_option("-b,--min", a->min, "Smallest size (bytes; K, M, G suffixes)")->capture_default_str();
    sub->add_option("-e,--max", a->max, "Largest size")->capture_default_str();
    sub->add_option("-f,--factor", a->factor, "Size multiplier between rows")->capture_default_str()->check(integer_in(2));
    sub->add_option("-g,--gpus-per-thread", a->gpus_per_thread,
                    "GPUs one host thread drives, as nccl-tests -g (1: one process per GPU, as DeepSpeed runs)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
    sub->add_option("--algo", a->algo,
                    "Only this algorithm, as NCCL_ALGO: ring, tree, nvls, nvlstree, collnetdirect, collnetchain or pat (default: NCCL's tuner picks)");
    add_nccl_flag(sub, a->nccl);
    sub->add_option("--proto", a->proto, "Only this protocol, as NCCL_PROTO: LL, LL128 or Simple (default: NCCL's tuner picks)");
    sub->add_option("-o,--output", a->output, "Write to this file instead of standard output")->check(output_file());
    add_fabric_flags(sub, a->fabric);
    return {sub, [a] { return run_bench(*a); }};
}

}  // namespace zerosim::cli
