// zerosim need: the inter-node bandwidth, node count or bucket size at which a target is met
// (exposed communication at most X% of the step, or the step at most T ms), by bisection over
// predictions (prediction/need.hpp).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <tuple>

#include "command.hpp"
#include "inputs/neox_config.hpp"
#include "core/number_list.hpp"
#include "prediction/need.hpp"
#include "prediction/need_layout.hpp"

namespace zerosim::cli {

namespace {

struct NeedArgs {
    std::string ds_config, model, topology, output, deepspeed, nccl;
    int64_t nodes = 0;
    int steps = 2;
    int64_t seq_len = 0;
    bool zero_init = false;
    std::string solve;
    double exposed_below = -1, step_below = -1;
    std::string range;
    double tolerance = 0.01;
    std::string pp, tp, sp, ep;   // --solve layout's candidates (comma lists)
    bool activation_checkpointing = false;
    TrainerArgs trainer;   // a Trainer config's "auto" values (inputs/trainer_auto.hpp)
    // predict's flags, taken at every probe
    std::string what_if, overflow_steps, max_memory;
    std::vector<std::string> neox_config;   // GPT-NeoX's YAML in place of --model and --ds-config
    int64_t vocab_size = 0;
    int64_t max_ops = kDefaultMaxOps;
    FabricArgs fabric;
};

// --solve layout's candidate lists: the flags', else 1,2,4,8 pipeline stages and tensor ranks up to a node.
Result<LayoutCandidates> layout_candidates(const NeedArgs& a, const Topology& t, const DsConfig& cfg);

// A config that fixes tensor or Ulysses parallelism (tensor_parallel.autotp_size, sequence_parallel_size)
// fixes that dimension of the search: a list that leaves its size out is refused by the key.
Status pin_to_config(std::vector<int64_t>& list, int64_t key, const char* key_name, const char* flag, bool given,
                     const std::string& source) {
    if (key <= 0) return std::nullopt;
    if (given && std::find(list.begin(), list.end(), key) == list.end())
        return Error{source, key_name, "says " + std::to_string(key) + ", which " + flag + " leaves out"};
    list = {key};
    std::cerr << "zerosim: note: " << printable(source, 512) << ": " << key_name << " " << key << " fixes " << flag << " at " << key << "\n";
    return std::nullopt;
}

Result<LayoutCandidates> layout_candidates(const NeedArgs& a, const Topology& t, const DsConfig& cfg) {
    LayoutCandidates c;
    c.activation_checkpointing = a.activation_checkpointing;
    c.tp.clear();
    for (int64_t n : {1, 2, 4, 8})
        if (n <= t.gpus_per_node) c.tp.push_back(n);
    for (auto [text, flag, list] : {std::tuple{&a.pp, "--pp", &c.pp}, std::tuple{&a.tp, "--tp", &c.tp},
                                    std::tuple{&a.sp, "--sp", &c.sp}, std::tuple{&a.ep, "--ep", &c.ep}}) {
        if (text->empty()) continue;
        auto sizes = parse_size_list(*text, flag);
        if (!sizes) return sizes.error();
        *list = std::move(sizes).value();
    }
    if (auto e = pin_to_config(c.tp, cfg.autotp_size, "tensor_parallel.autotp_size", "--tp", !a.tp.empty(), a.ds_config)) return *e;
    if (auto e = pin_to_config(c.sp, cfg.sequence_parallel_size, "sequence_parallel_size", "--sp", !a.sp.empty(), a.ds_config))
        return *e;
    return c;
}

Result<std::pair<double, double>> parse_range(const std::string& text) {
    auto colon = text.find(':');
    Error bad{"", "--range", "expected LO:HI with 0 < LO < HI, e.g. 1:400, found '" + text + "'"};
    if (colon == std::string::npos) return bad;
    try {
        size_t n1 = 0, n2 = 0;
        double lo = std::stod(text.substr(0, colon), &n1), hi = std::stod(text.substr(colon + 1), &n2);
        if (n1 != colon || n2 != text.size() - colon - 1 || !(lo > 0) || !(hi > lo) || !std::isfinite(hi)) return bad;
        return std::make_pair(lo, hi);
    } catch (const std::exception&) {
        return bad;
    }
}

// What predict takes, applied at every probe (--solve layout takes checkpointing and fabric mode through
// the sweep's points; the rest are refused there by name).
Status need_predict_flags(const NeedArgs& a, NeedProblem& p) {
    p.activation_checkpointing = a.activation_checkpointing;
    p.what_if = a.what_if;
    if (auto e = fabric_sweep_options(a.fabric, p.fabric)) return e;
    auto steps = parse_int_list(a.overflow_steps, "--overflow-steps", "step numbers");
    if (!steps) return steps.error();
    p.overflow_steps = steps.value();
    p.max_ops = a.max_ops;
    if (!a.max_memory.empty()) {
        auto cap = parse_size(a.max_memory, "--max-memory");
        if (!cap) return cap.error();
        p.max_bytes = cap.value();
    }
    if (!p.what_if.empty())
        std::cerr << "zerosim: note: --what-if " << printable(p.what_if)
                  << ": every probe times a schedule DeepSpeed does not send (docs/what-if.md)\n";
    return std::nullopt;
}

// --model and --ds-config, or a GPT-NeoX config (command.hpp load_config_and_model), whose layout only
// --solve layout searches.
Status need_model_and_config(const NeedArgs& a, Release release, bool layout, std::optional<DsConfig>& cfg,
                             std::optional<Model>& model, std::optional<NeoxInputs>& neox) {
    if (!a.neox_config.empty())
        for (auto [flag, given] : {std::pair{"--model", !a.model.empty()}, std::pair{"--ds-config", !a.ds_config.empty()}})
            if (given) return Error{"", flag, "not with --neox-config (the GPT-NeoX config holds the model and the DeepSpeed keys)"};
    ScheduleArgs files;
    files.model = a.model;
    files.ds_config = a.ds_config;
    files.neox_config = a.neox_config;
    files.vocab_size = a.vocab_size;
    files.trainer = a.trainer;
    if (auto e = load_config_and_model(files, release, cfg, model, neox)) return e;
    if (neox && !layout && (neox->pipe >= 1 || neox->tensor > 1))
        return Error{neox->ds_config.source, neox->pipe >= 1 ? "pipe-parallel-size" : "model-parallel-size",
                     "--solve " + a.solve + " predicts data parallelism alone; --solve layout searches a GPT-NeoX config's layouts"};
    return std::nullopt;
}

// The files need read, which -o may never name.
std::vector<std::string> need_input_files(const NeedArgs& a) {
    std::vector<std::string> files{a.topology};
    for (const std::string* f : {&a.ds_config, &a.model})
        if (!f->empty()) files.push_back(*f);
    files.insert(files.end(), a.neox_config.begin(), a.neox_config.end());
    return files;
}

int run_need(const NeedArgs& a) {
    const bool layout = a.solve == "layout";
    if (layout && (a.exposed_below >= 0 || a.step_below >= 0))
        return input_error(Error{"", a.exposed_below >= 0 ? "--exposed-below" : "--step-below",
                                 "--solve layout finds the shortest step that fits; it takes no target"});
    if (!layout && (a.exposed_below >= 0) == (a.step_below >= 0))
        return input_error(Error{"", "--exposed-below/--step-below", "give exactly one target"});
    for (auto [flag, value] : {std::pair{"--pp", &a.pp}, std::pair{"--tp", &a.tp}, std::pair{"--sp", &a.sp}, std::pair{"--ep", &a.ep}})
        if (!layout && !value->empty())
            return input_error(Error{"", flag, "goes with --solve layout (the candidates it tries); the other solves are of "
                                               "data parallelism alone"});
    auto release = resolve_release(a.deepspeed);
    if (!release) return input_error(release.error());
    std::optional<DsConfig> cfg;
    std::optional<Model> model;
    std::optional<NeoxInputs> neox;
    if (auto e = need_model_and_config(a, release.value(), layout, cfg, model, neox)) return input_error(*e);
    warn_ds_config("zerosim", *cfg);
    // The other solves predict data parallelism alone: a config that asks for tensor or sequence
    // parallelism is refused by its key rather than solved as if it did not.
    if (!layout && (cfg->autotp_size > 1 || cfg->sequence_parallel_size > 1))
        return input_error(Error{a.ds_config, cfg->autotp_size > 1 ? "tensor_parallel.autotp_size" : "sequence_parallel_size",
                                 "--solve " + a.solve + " predicts data parallelism alone; --solve layout takes tensor and "
                                 "sequence parallelism (--tp, --sp)"});
    auto topo = load_topology(a.topology);
    if (!topo) return input_error(topo.error());
    if (auto e = apply_nccl_flag(a.nccl, topo.value())) return input_error(*e);
    NeedProblem p;
    p.model = std::move(model).value();
    p.cfg = cfg.value();
    p.topology = topo.value();
    p.nodes = a.nodes;
    p.steps = a.steps;
    p.seq_len = a.seq_len;
    p.zero_init = a.zero_init;
    p.quantity = a.solve == "nodes"                ? NeedQuantity::Nodes
                 : a.solve == "reduce-bucket-size" ? NeedQuantity::ReduceBucketSize
                 : a.solve == "prefetch-bucket-size" ? NeedQuantity::PrefetchBucketSize
                                                     : NeedQuantity::InterNodeBandwidth;
    p.target = a.exposed_below >= 0 ? NeedTarget::ExposedPercent : NeedTarget::StepMs;
    p.target_value = a.exposed_below >= 0 ? a.exposed_below : a.step_below;
    p.tolerance = a.tolerance;
    if (neox) {
        p.pipe_engine = neox->pipe >= 1;
        p.pp_partition = neox->partition_method;
    }
    if (auto e = need_predict_flags(a, p)) return input_error(*e);
    if (!a.range.empty()) {
        auto r = parse_range(a.range);
        if (!r) return input_error(r.error());
        p.lo = r->first, p.hi = r->second;
    }
    if (layout) {
        // A layout point is a sweep's (prediction/sweep_layout.cpp): no what-if or overflow schedule there.
        for (auto [flag, given] : {std::pair{"--what-if", !a.what_if.empty()}, std::pair{"--overflow-steps", !a.overflow_steps.empty()}})
            if (given) return input_error(Error{"", flag, "is not taken by --solve layout (its points are sweep's 3D points)"});
        auto candidates = layout_candidates(a, p.topology, p.cfg);
        if (!candidates) return input_error(candidates.error());
        auto found = solve_layout(p, candidates.value());
        if (!found) return input_error(found.error());
        return emit(a.output, need_input_files(a),
                    [&](std::ostream& out) { write_layout_answer(out, p, found.value()); });
    }
    auto answer = solve_need(p);
    if (!answer) return input_error(answer.error());
    return emit(a.output, need_input_files(a), [&](std::ostream& out) { write_need_text(out, p, answer.value()); });
}

}  // namespace

Command add_need(CLI::App& app) {
    auto a = std::make_shared<NeedArgs>();
    auto* sub = app.add_subcommand(
        "need", "Solve for the inter-node bandwidth, node count or bucket size at which exposed communication or step time meets a target");
    sub->add_option("--ds-config", a->ds_config, "DeepSpeed config JSON (or --neox-config)");
    sub->add_option("--model", a->model, "Hugging Face config.json or a parameter-list JSON (or --neox-config)");
    sub->add_option("--neox-config", a->neox_config,
                    "GPT-NeoX YAML config(s), merged in order, in place of --model and --ds-config (docs/neox.md); its "
                    "pipeline and tensor layout are searched by --solve layout")
        ->expected(1, -1);
    sub->add_option("--vocab-size", a->vocab_size,
                    "With --neox-config: the tokenizer's vocabulary size, padded as GPT-NeoX pads it")
        ->check(integer_in(1));
    sub->add_option("--topology", a->topology, "Topology JSON (its node design)")->required();
    sub->add_option("--nodes", a->nodes, "Nodes (default: the file's; not with --solve nodes)")->check(integer_in(1));
    sub->add_option("--solve", a->solve,
                    "inter-node-bandwidth (per GPU, GB/s), nodes, reduce-bucket-size, prefetch-bucket-size, or layout (the "
                    "pipeline x tensor x sequence x expert layout with the shortest step that fits)")
        ->required()
        ->check(CLI::IsMember({"inter-node-bandwidth", "nodes", "reduce-bucket-size", "prefetch-bucket-size", "layout"}));
    sub->add_option("--exposed-below", a->exposed_below, "Target: exposed communication at most this percent of the step")
        ->check(finite_at_least(0));
    sub->add_option("--step-below", a->step_below, "Target: the step at most this many milliseconds")->check(finite_at_least(0, true));
    sub->add_option("--range", a->range,
                    "LO:HI searched (default 0.5:400 GB/s, 1:1024 nodes, 1e5:2e9 elements)");
    sub->add_option("--tolerance", a->tolerance, "Relative tolerance on the answer (nodes: exact)")
        ->capture_default_str()
        ->check(finite_at_least(0, true));
    sub->add_option("--steps", a->steps, "Steps predicted (the last is measured)")->capture_default_str()->check(integer_in(1, 64));
    sub->add_option("--seq-len", a->seq_len, "Sequence length (default: the model's, else 1024)")->check(integer_in(1));
    sub->add_flag("--zero-init", a->zero_init, "Stage 3: the model is built under deepspeed.zero.Init");
    sub->add_option("-o,--output", a->output, "Write to this file instead of standard output")->check(output_file());
    sub->add_option("--pp", a->pp, "--solve layout: pipeline stages to try (comma list; default 1,2,4,8)");
    sub->add_option("--tp", a->tp, "--solve layout: tensor-parallel sizes to try (default 1,2,4,8 up to a node's GPUs)");
    sub->add_option("--sp", a->sp, "--solve layout: Ulysses sequence-parallel sizes to try (default 1)");
    sub->add_option("--ep", a->ep, "--solve layout: MoE expert-parallel sizes to try (default 1)");
    add_activation_checkpointing(sub, a->activation_checkpointing);
    add_deepspeed_flag(sub, a->deepspeed);
    add_nccl_flag(sub, a->nccl);
    add_trainer_flags(sub, a->trainer);
    add_what_if(sub, a->what_if);
    add_fabric_flags(sub, a->fabric);
    sub->add_option("--overflow-steps", a->overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    sub->add_option("--max-ops", a->max_ops, "Refuse a probe's schedule past this many ops")->capture_default_str()->check(integer_in(1));
    sub->add_option("--max-memory", a->max_memory, "Refuse a probe's schedule estimated to take more memory than this (default 4G)");
    return {sub, [a] {
                if (a->solve == "nodes" && a->nodes > 0)
                    return input_error(Error{"", "--nodes", "--solve nodes searches the node count; leave --nodes out"});
                return run_need(*a);
            }};
}

}  // namespace zerosim::cli
