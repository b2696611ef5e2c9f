#include "command.hpp"

#include <cstdio>
#include <iostream>

#include "analysis/memory_report.hpp"
#include "analysis/memory.hpp"
#include "core/number_list.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "formats/schedule_json.hpp"
#include "inputs/neox_config.hpp"
#include "prediction/gathered_budget.hpp"
#include "schedule/what_if.hpp"
#include "schedule/schedule.hpp"

namespace zerosim::cli {

int input_error(const Error& e) { return print_input_error("zerosim", e); }

CLI::Validator integer_in(int64_t min, int64_t max) {
    return CLI::Validator(
        [min, max](std::string& text) {
            auto v = parse_int_flag(text, "", min, max);
            return v ? std::string() : v.error().message;
        },
        "");
}

CLI::Validator finite_at_least(double min, bool exclusive) {
    return CLI::Validator(
        [min, exclusive](std::string& text) {
            auto v = parse_real_flag(text, "", min, exclusive);
            return v ? std::string() : v.error().message;
        },
        "");
}

CLI::Validator output_file() {
    return CLI::Validator(
        [](std::string& text) {
            auto e = check_output_name(text, "");
            return e ? e->message : std::string();
        },
        "");
}

int parse_error(CLI::App& app, const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);   // --help, --version: a request, not an error
    return input_error(command_line_error(e.what()));
}

int emit(const std::string& path, const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write,
         const std::string& flag) {
    return write_output("zerosim", path, flag, inputs, write);
}

Status check_command_outputs(const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs) {
    return check_outputs("zerosim", outputs, inputs);
}

void add_trainer_flags(CLI::App* sub, TrainerArgs& t) {
    const std::string g = "Hugging Face Trainer (fills the config's \"auto\" values as the Trainer does)";
    auto integer = [&](const char* names, std::optional<int64_t>& v, const char* what) {
        sub->add_option_function<int64_t>(names, [&v](const int64_t& x) { v = x; }, what)->check(integer_in(1))->group(g);
    };
    auto number = [&](const char* names, std::optional<double>& v, const char* what) {
        sub->add_option_function<double>(names, [&v](const double& x) { v = x; }, what)->check(finite_at_least(0))->group(g);
    };
    integer("--per_device_train_batch_size,--per-device-train-batch-size", t.per_device_train_batch_size,
            "train_micro_batch_size_per_gpu");
    integer("--gradient_accumulation_steps,--gradient-accumulation-steps", t.gradient_accumulation_steps,
            "gradient_accumulation_steps");
    sub->add_flag("--fp16", t.fp16, "fp16.enabled true (bf16.enabled false)")->group(g);
    sub->add_flag("--bf16", t.bf16, "bf16.enabled true (fp16.enabled false)")->group(g);
    number("--learning_rate,--learning-rate", t.learning_rate, "optimizer.params.lr, scheduler.params.warmup_max_lr (default 5e-5)");
    number("--max_grad_norm,--max-grad-norm", t.max_grad_norm, "gradient_clipping (default 1.0)");
    number("--weight_decay,--weight-decay", t.weight_decay, "optimizer.params.weight_decay (default 0)");
    number("--adam_beta1,--adam-beta1", t.adam_beta1, "optimizer.params.betas[0] (default 0.9)");
    number("--adam_beta2,--adam-beta2", t.adam_beta2, "optimizer.params.betas[1] (default 0.999)");
    number("--adam_epsilon,--adam-epsilon", t.adam_epsilon, "optimizer.params.eps (default 1e-8)");
    integer("--warmup_steps,--warmup-steps", t.warmup_steps, "scheduler.params.warmup_num_steps (default 0)");
    integer("--max_steps,--max-steps", t.max_steps, "scheduler.params.total_num_steps");
}

Result<DsConfig> load_trainer_ds_config(const std::string& path, Release release, const TrainerArgs& t, const Model& model) {
    std::vector<std::string> notes;
    auto doc = read_trainer_ds_config_document(path, t, model.hidden_size, notes);
    if (!doc) return doc.error();
    for (const auto& n : notes) std::cerr << "zerosim: note: " << printable(path, 512) << ": " << printable(n) << "\n";
    if (!t.any_given() && notes.empty() && !has_auto_value(doc.value())) return load_ds_config(path, release);
    return parse_ds_config(path, doc->dump(), release);
}

void add_model_and_config(CLI::App* sub, ScheduleArgs& a) {
    // Required unless --neox-config (or a subcommand's --schedule) stands for them: load_inputs checks.
    auto* ds = sub->add_option("--ds-config", a.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize");
    auto* model = sub->add_option("--model", a.model, "Hugging Face config.json (gpt2, gpt_neox, llama...) or a parameter-list JSON");
    sub->add_option("--neox-config", a.neox_config,
                    "GPT-NeoX YAML config(s), merged in order as GPT-NeoX merges them: the model, pipe-parallel-size, "
                    "model-parallel-size and the DeepSpeed keys, in place of --ds-config and --model (docs/neox.md)")
        ->expected(1, 64)
        ->excludes(ds)
        ->excludes(model);
    sub->add_option("--vocab-size", a.vocab_size,
                    "With --neox-config: the tokenizer's vocabulary size (the YAML names only the tokenizer), padded as "
                    "GPT-NeoX pads it")
        ->check(integer_in(1, int64_t{1} << 32));
    add_trainer_flags(sub, a.trainer);
}

void add_schedule_inputs(CLI::App* sub, ScheduleArgs& a, bool world_required) {
    add_model_and_config(sub, a);
    auto* w = sub->add_option("--world", a.world, "Ranks in all (data parallel x --pp x --tp x --sp)")->check(integer_in(1));
    if (world_required) w->required();
    if (world_required)  // predict and report take it from the topology
        sub->add_option("--gpus-per-node", a.gpus_per_node,
                        "Ranks DeepSpeed sees on one node (its device_count()): qgZ's intra/inter-node groups")
            ->check(integer_in(1));
    sub->add_option("--steps", a.steps, "Optimizer steps")->capture_default_str()->check(integer_in(1, INT32_MAX));
    sub->add_option("--seq-len", a.seq_len, "Sequence length for compute (default: the model's, else 1024)")
        ->check(integer_in(1));
    sub->add_option("-o,--output", a.output, "Write to this file instead of standard output")->check(output_file());
    sub->add_option("--overflow-steps", a.overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    add_deepspeed_flag(sub, a.deepspeed);
    add_layout_flags(sub, a);
}

void add_layout_flags(CLI::App* sub, ScheduleArgs& a) {
    sub->add_option("--pp", a.pp, "Pipeline stages (deepspeed.pipe.PipelineModule num_stages); data parallel is what is left of --world")
        ->capture_default_str()
        ->check(integer_in(1));
    sub->add_option("--tp", a.tp, "Tensor-parallel ranks (Megatron's model parallel size; default: the config's "
                                  "tensor_parallel.autotp_size, else 1)")
        ->check(integer_in(1));
    sub->add_option("--sp", a.sp, "Ulysses sequence-parallel ranks (default: the config's sequence_parallel_size, else 1)")
        ->check(integer_in(1));
    sub->add_option("--ep", a.ep, "MoE expert-parallel ranks (ep_size), inside the data-parallel group")
        ->capture_default_str()
        ->check(integer_in(1));
    sub->add_option("--pp-partition", a.pp_partition,
                    "How PipelineModule cuts layers into stages (partition_method): parameters (default), uniform or "
                    "type:REGEX (the layers whose class name matches; GPT-NeoX's default type:transformer|mlp)")
        ->check(CLI::Validator(
            [](std::string& v) {
                return v == "parameters" || v == "uniform" || (v.rfind("type:", 0) == 0 && v.size() > 5)
                           ? std::string()
                           : "expected parameters, uniform or type:REGEX, found '" + v + "'";
            },
            "METHOD"));
    sub->add_option("--rank", a.rank, "With --pp/--tp/--sp/--ep: the rank whose ops to build (0 is the rank DeepSpeed's logger prints)")
        ->capture_default_str()
        ->check(integer_in(0));
}

// A layout size from its flag, else the config's key (0 = absent), else 1; both and unequal: refused.
static Result<int64_t> flag_or_key(int64_t flag, const char* name, int64_t key, const DsConfig& cfg, const char* key_name) {
    if (flag > 0 && key > 0 && flag != key)
        return Error{cfg.source, key_name, "says " + std::to_string(key) + ", " + name + " says " + std::to_string(flag) +
                                               "; give one, or make them agree"};
    return flag > 0 ? flag : key > 0 ? key : 1;
}

static Status apply_layout_flags(const ScheduleArgs& a, const DsConfig& cfg, ScheduleOptions& opt);

// --pp-partition's word (module.py _partition_layers' partition_method); "" = parameters.
Status refuse_layout(const ParallelLayout& L) {
    if (!L.is_3d()) return std::nullopt;
    return Error{"", L.pipe > 1 ? "--pp" : L.tensor > 1 ? "--tp" : L.sequence > 1 ? "--sp" : "--ep",
                 "a pipeline, tensor, sequence or expert parallel layout is not taken by this subcommand yet; zerosim "
                 "predict, sweep and need time it, schedule and explain list its ops per rank, memory its model states per stage"};
}

Status refuse_layout(const ScheduleArgs& a, const DsConfig& cfg) {
    ScheduleOptions opt;
    opt.world = a.world;
    if (auto e = apply_layout_flags(a, cfg, opt)) return e;
    return refuse_layout(opt.layout);
}

// The layout the flags (and the config's layout keys) give, on `world` ranks.
static Status apply_layout_flags(const ScheduleArgs& a, const DsConfig& cfg, ScheduleOptions& opt) {
    auto tp = flag_or_key(a.tp, "--tp", cfg.autotp_size, cfg, "tensor_parallel.autotp_size");
    if (!tp) return tp.error();
    auto sp = flag_or_key(a.sp, "--sp", cfg.sequence_parallel_size, cfg, "sequence_parallel_size");
    if (!sp) return sp.error();
    opt.layout.world = opt.world;
    opt.layout.pipe = a.pp;
    opt.layout.tensor = tp.value();
    opt.layout.sequence = sp.value();
    opt.layout.expert = a.ep;
    opt.rank = a.rank;
    opt.set_pipe_partition(a.pp_partition);
    return std::nullopt;
}

void add_deepspeed_flag(CLI::App* sub, std::string& version) {
    sub->add_option("--deepspeed", version,
                    "DeepSpeed release whose schedule to use, " + kBaselineRelease.number() + " to " +
                        kNewestRelease.number() + " (default: " + kNewestRelease.number() + ")");
}

Result<Release> resolve_release(const std::string& version) {
    if (!version.empty()) return parse_release(version, "--deepspeed");
    std::cerr << "zerosim: note: DeepSpeed " << kNewestRelease.number()
              << "'s schedule (the newest release zerosim's rules cover); --deepspeed VERSION for another, "
              << kBaselineRelease.number() << " to " << kNewestRelease.number() << "\n";
    return kNewestRelease;
}

void add_zero_init(CLI::App* sub, ScheduleArgs& a) {
    sub->add_flag("--zero-init", a.zero_init,
                  "Stage 3: the model is built under deepspeed.zero.Init");
}

void add_activation_checkpointing(CLI::App* sub, bool& flag) {
    // --gradient-checkpointing: the same, under the name of Hugging Face Trainer's flag.
    sub->add_flag("--activation-checkpointing,--gradient-checkpointing", flag,
                  "Every transformer block checkpointed (as HF's gradient_checkpointing wraps each decoder layer): its forward "
                  "runs again in backward (time, and stage 3's fetches), and the fit counts 2sbh per layer plus one layer "
                  "recomputed. A model's own \"checkpointed\" list and the config's activation_checkpointing section do the same");
}

FitEstimate fit_of(const Inputs& in, const Topology& t, bool activation_checkpointing) {
    return schedule_fit(in.model, in.cfg, in.schedule,
                        FitOptions{activation_checkpointing, 0, t.gpu_memory_gb, t.name, t.host_memory_gb, t.gpus_per_node});
}

void add_what_if(CLI::App* sub, std::string& name) {
    sub->add_option("--what-if", name,
                    "Price a schedule DeepSpeed does not send (never DeepSpeed's; docs/what-if.md): reduce-scatter (stages "
                    "1/2 reduce_scatter each bucket, DeepSpeed #6463/#7440); stage 3 replaced by PyTorch FSDP's "
                    "fsdp-full-shard (per-block gathers in forward and backward, 3 psi), fsdp-shard-grad-op (gathered "
                    "once, kept to backward, 2 psi) or hybrid-shard (full shard inside a node, gradient shards "
                    "all_reduced across nodes)");
}

Status apply_what_if_flag(const std::string& name, Schedule& s) {
    auto changed = apply_what_if(name, s);
    if (!changed) return changed.error();
    std::cerr << "zerosim: note: " << what_if_note(name, s, changed.value()) << "\n";
    return std::nullopt;
}

void add_schedule_limits(CLI::App* sub, ScheduleArgs& a) {
    sub->add_option("--max-ops", a.max_ops, "Refuse a schedule estimated to hold more ops than this")
        ->capture_default_str()
        ->check(integer_in(1));
    sub->add_option("--max-memory", a.max_memory, "Refuse a schedule estimated to take more memory than this (default 4G)");
}

// The config's warnings and its offload note on stderr, read from its file or from a saved schedule.
static void note_ds_config(const DsConfig& cfg) {
    warn_ds_config("zerosim", cfg);
    if (cfg.zero.offload_optimizer || cfg.zero.offload_param)
        std::cerr << "zerosim: note: " << printable(cfg.source, 512)
                  << ": offload_optimizer/offload_param: collectives as DeepSpeed changes them; PCIe copies and the CPU "
                     "optimizer step timed from the topology's host.pcie_gbps and host.cpu_adam_gbs (assumptions; "
                     "sim/timing/offload_time.hpp), NVMe offload timed as CPU\n";
}

// A GPT-NeoX config's layout where the flags leave it: pipe-parallel-size (>= 1: the pipeline
// engine, even with one stage), model-parallel-size and pipe-partition-method; a flag that says
// otherwise is refused.
static Status apply_neox_layout(const ScheduleArgs& a, const NeoxInputs& n, ScheduleOptions& opt) {
    const std::string src = n.ds_config.source;
    if (a.pp > 1 && a.pp != std::max<int64_t>(n.pipe, 1))
        return Error{src, "pipe-parallel-size", "says " + std::to_string(n.pipe) + ", --pp says " + std::to_string(a.pp) +
                                                    "; give one, or make them agree"};
    if (a.tp > 0 && a.tp != n.tensor)
        return Error{src, "model-parallel-size", "says " + std::to_string(n.tensor) + ", --tp says " + std::to_string(a.tp) +
                                                     "; give one, or make them agree"};
    // The layout's own refusal would name --pp; the user wrote the file's keys.
    const int64_t cut = std::max<int64_t>(n.pipe, 1) * n.tensor;
    if (opt.world % cut != 0)
        return Error{src, n.tensor > 1 ? "model-parallel-size" : "pipe-parallel-size",
                     "pipe-parallel-size " + std::to_string(n.pipe) + " x model-parallel-size " + std::to_string(n.tensor) +
                         " must divide --world (" + std::to_string(opt.world) + ")"};
    opt.layout.pipe = std::max<int64_t>(n.pipe, 1);
    opt.layout.pipe_engine = n.pipe >= 1;
    opt.layout.tensor = n.tensor;
    if (a.pp_partition.empty()) opt.set_pipe_partition(n.partition_method);
    if (n.partition_method != "parameters" && n.partition_method != "uniform" && n.partition_method.rfind("type:", 0) != 0)
        return Error{src, "pipe-partition-method", "expected parameters, uniform or type:REGEX, found '" + n.partition_method + "'"};
    return std::nullopt;
}

Status load_config_and_model(const ScheduleArgs& a, Release release, std::optional<DsConfig>& cfg, std::optional<Model>& model,
                             std::optional<NeoxInputs>& neox) {
    if (!a.neox_config.empty()) {
        auto n = load_neox_config(a.neox_config, a.vocab_size, release);
        if (!n) return n.error();
        neox = std::move(n).value();
        cfg = neox->ds_config;
        model = neox->model;
        return std::nullopt;
    }
    if (a.vocab_size > 0) return Error{"", "--vocab-size", "goes with --neox-config (a model file gives its own vocabulary)"};
    for (const auto& [flag, value] : {std::pair{"--model", &a.model}, std::pair{"--ds-config", &a.ds_config}})
        if (value->empty()) return Error{"", flag, "required (or --neox-config FILE.yml, a GPT-NeoX config)"};
    auto m = load_model(a.model);   // first: its hidden size fills a Trainer config's buckets
    if (!m) return m.error();
    model = std::move(m).value();
    auto c = load_trainer_ds_config(a.ds_config, release, a.trainer, *model);
    if (!c) return c.error();
    cfg = std::move(c).value();
    return std::nullopt;
}

// Checkpointing asked for (the flag or the config's section) on a model without transformer blocks
// and without its own "checkpointed" list: nothing is recomputed, which the user should hear.
static void warn_nothing_checkpointed(const Model& m, const DsConfig& cfg, const ScheduleOptions& opt) {
    if (!opt.activation_checkpointing && !cfg.activation_checkpointing) return;
    if (!checkpointed_calls(m, cfg, opt).empty()) return;
    std::cerr << "zerosim: warning: " << (opt.activation_checkpointing ? std::string("--activation-checkpointing") : printable(cfg.source, 512) + ": activation_checkpointing")
              << ": " << printable(m.source, 512) << " has no transformer blocks (parameters named <prefix>.<index>.<...>), so nothing "
              << "is recomputed in backward; list the checkpointed module calls in the parameter list's \"checkpointed\"\n";
}

namespace {

// What building a schedule takes: the config, the model and the options the flags make.
struct ScheduleRequest {
    DsConfig cfg;
    Model model;
    ScheduleOptions opt;
    std::optional<NeoxInputs> neox;
};

Result<ScheduleRequest> schedule_request(const ScheduleArgs& a) {
    auto release = resolve_release(a.deepspeed);
    if (!release) return release.error();
    std::optional<DsConfig> cfg;
    std::optional<Model> model;
    std::optional<NeoxInputs> neox;
    if (auto e = load_config_and_model(a, release.value(), cfg, model, neox)) return *e;
    note_ds_config(*cfg);
    ScheduleOptions opt;
    opt.world = a.world;
    opt.steps = a.steps;
    opt.seq_len = a.seq_len;
    opt.max_ops = a.max_ops;
    opt.zero_init = a.zero_init;
    opt.activation_checkpointing = a.activation_checkpointing;
    opt.gpus_per_node = a.gpus_per_node;
    if (auto e = apply_layout_flags(a, cfg.value(), opt)) return *e;
    if (neox)
        if (auto e = apply_neox_layout(a, *neox, opt)) return *e;
    if (!a.per_rank)
        if (auto e = refuse_layout(opt.layout)) return *e;
    if (!a.max_memory.empty()) {
        auto cap = parse_size(a.max_memory, "--max-memory");
        if (!cap) return cap.error();
        opt.max_bytes = cap.value();
    }
    auto steps = parse_int_list(a.overflow_steps, "--overflow-steps", "step numbers");
    if (!steps) return steps.error();
    opt.overflow_steps = steps.value();
    warn_nothing_checkpointed(model.value(), cfg.value(), opt);
    return ScheduleRequest{std::move(cfg).value(), std::move(model).value(), std::move(opt), std::move(neox)};
}

}  // namespace

// predict's long run: the stream, and its template to simulate (ScheduleArgs::by_period); the
// whole schedule where it does not repeat or is a pipeline's (its stages are simulated together).
static Result<Schedule> schedule_or_template(const ScheduleRequest& r, std::optional<ScheduleStream>& stream) {
    auto s = ScheduleStream::open(r.model, r.cfg, r.opt);
    if (!s) return s.error();
    if (!s->repeats()) return Schedule(s->held());   // held whole
    if (s->meta().layout.pipe > 1) return build_schedule(r.model, r.cfg, r.opt);
    Schedule held = s->held();
    stream = std::move(s).value();
    return held;
}

Result<Inputs> load_inputs(const ScheduleArgs& a) {
    auto r = schedule_request(a);
    if (!r) return r.error();
    std::optional<ScheduleStream> stream;
    auto sched = a.by_period ? schedule_or_template(r.value(), stream) : build_schedule(r->model, r->cfg, r->opt);
    if (!sched) return sched.error();
    Inputs in{std::move(r->cfg), std::move(r->model), std::move(sched).value(), nullptr, nullptr, std::move(stream)};
    if (r->neox) {
        in.neox_ds_config = std::move(r->neox->ds_config_doc);
        in.neox_model = std::move(r->neox->model_doc);
    }
    return in;
}

Result<StreamInputs> load_stream_inputs(const ScheduleArgs& a) {
    auto r = schedule_request(a);
    if (!r) return r.error();
    auto sched = ScheduleStream::open(r->model, r->cfg, r->opt);
    if (!sched) return sched.error();
    StreamInputs in{std::move(sched).value(), nullptr, nullptr};
    if (r->neox) {
        in.neox_ds_config = std::move(r->neox->ds_config_doc);
        in.neox_model = std::move(r->neox->model_doc);
    }
    return in;
}

// The flags that build a schedule, which a saved schedule replaces (each subcommand has some of them).
static const char* const kScheduleBuildingFlags[] = {"--ds-config", "--model",          "--world",     "--steps",
                                                     "--seq-len",   "--overflow-steps", "--deepspeed", "--zero-init",
                                                     "--max-ops",   "--max-memory",     "--gpus-per-node",
                                                     "--pp",        "--tp",             "--sp",        "--ep",
                                                     "--pp-partition", "--rank", "--neox-config", "--vocab-size",
                                                     "--activation-checkpointing", "--per_device_train_batch_size",
                                                     "--gradient_accumulation_steps", "--fp16", "--bf16", "--learning_rate",
                                                     "--max_grad_norm", "--weight_decay", "--adam_beta1", "--adam_beta2",
                                                     "--adam_epsilon", "--warmup_steps", "--max_steps"};

void add_saved_schedule(CLI::App* sub, ScheduleArgs& a) {
    sub->add_option("--schedule", a.schedule,
                    "A schedule saved by zerosim schedule --format json (possibly edited), in place of --ds-config, "
                    "--model and the flags that build one; predicted as it is (docs/schedule-ir.md)");
    for (const char* flag : {"--ds-config", "--model", "--world"})
        if (auto* o = sub->get_option_no_throw(flag)) o->required(false);   // required without --schedule: checked on run
}

// Whether the command line gave `flag` (a flag the subcommand lacks was not given).
static bool given(const CLI::App* sub, const char* flag) {
    const CLI::Option* o = sub->get_option_no_throw(flag);
    return o && o->count() > 0;
}

// Without --schedule, the flags CLI11 no longer requires (add_saved_schedule); with it, none that
// would build another schedule, which the file's IR would silently override.
static Status check_saved_schedule_flags(const CLI::App* sub, const ScheduleArgs& a, bool world_required) {
    if (a.schedule.empty()) {
        for (const char* flag : {"--ds-config", "--model"})
            if (!given(sub, flag) && !given(sub, "--neox-config"))
                return Error{"", flag, "required (or --schedule FILE, a schedule saved by zerosim schedule --format json)"};
        if (world_required && !given(sub, "--world"))
            return Error{"", "--world", "required (or --schedule FILE, a schedule saved by zerosim schedule --format json)"};
        return std::nullopt;
    }
    for (const char* flag : kScheduleBuildingFlags)
        if (given(sub, flag))
            return Error{"", "--schedule",
                         std::string("a saved schedule was built from its config, model, world and steps and keeps them: "
                                     "give --schedule or ") + flag + ", not both"};
    return std::nullopt;
}

Result<Inputs> load_schedule_inputs(const CLI::App* sub, const ScheduleArgs& a, bool world_required) {
    if (auto e = check_saved_schedule_flags(sub, a, world_required)) return *e;
    if (a.schedule.empty()) return load_inputs(a);
    auto saved = read_saved_schedule(a.schedule);
    if (!saved) return saved.error();
    auto in = saved_schedule_inputs(std::move(saved).value(), a.schedule);
    if (!in) return in.error();
    note_ds_config(in->cfg);
    return Inputs{std::move(in->cfg), std::move(in->model), std::move(in->schedule), nullptr, nullptr, std::nullopt};
}

std::vector<std::string> schedule_input_files(const ScheduleArgs& a) {
    if (!a.schedule.empty()) return {a.schedule};
    if (!a.neox_config.empty()) return a.neox_config;
    return {a.ds_config, a.model};
}

// Built outside zero.Init, stage 3's engine start holds the whole model on every GPU
// (_broadcast_model, then Init(module=...) partitioning it): say so when that cannot fit.
// `saved`: the schedule came from --schedule, which refuses --zero-init beside it: the hint names
// the command that builds one (an error never suggests a flag the command lacks or refuses).
static void warn_engine_start_memory(const Schedule& s, const Topology& t, bool saved) {
    if (s.meta.stage != 3 || s.meta.zero_init || t.gpu_memory_gb <= 0) return;
    const double bytes = static_cast<double>(s.meta.total_params) * dtype_size(s.meta.model_dtype);
    if (bytes <= t.gpu_memory_gb * 1e9) return;
    char line[320];
    std::snprintf(line, sizeof line,
                  "the engine start broadcasts the whole model (%.1f GB of parameters) to every GPU, more than its %.0f GB; "
                  "a model this large is built under deepspeed.zero.Init: %s",
                  bytes / 1e9, t.gpu_memory_gb,
                  saved ? "save the schedule with zerosim schedule --zero-init" : "pass --zero-init");
    std::cerr << "zerosim: warning: " << printable(t.source, 512) << ": " << printable(line) << "\n";
}

// A saved schedule on the topology predict would have built it for: its world on the topology's
// GPUs, built for the topology's GPUs per node (what DeepSpeed's device_count() sees there).
static Status check_saved_on_topology(const Schedule& s, const std::string& path, const Topology& t) {
    if (auto e = check_world_fits(t, s.meta.world))
        return Error{path, "meta.world", e->message + " (the world the schedule was built for)"};
    const int64_t g = s.meta.variants.gpus_per_node;
    if (g != t.gpus_per_node)
        return Error{path, "meta.zero_variants.gpus_per_node",
                     (g > 0 ? "is " + std::to_string(g) : std::string("is not given")) + ", the topology's nodes have " +
                         std::to_string(t.gpus_per_node) + " GPUs; save the schedule with zerosim schedule --gpus-per-node " +
                         std::to_string(t.gpus_per_node) + ", as predict builds it on this topology"};
    return std::nullopt;
}

// The inputs on the topology: a saved schedule as it is, or one built on --world (else every GPU)
// with the topology's GPUs per node; the fabric model (--fabric) for that world, its what-ifs
// checked before a schedule is built.
static Result<Inputs> inputs_on_topology(const CLI::App* sub, ScheduleArgs& a, const Topology& t,
                                         std::shared_ptr<FabricModel>& fabric) {
    if (!a.schedule.empty()) {
        auto in = load_schedule_inputs(sub, a, false);
        if (!in) return in.error();
        if (auto e = check_saved_on_topology(in->schedule, a.schedule, t)) return *e;
        a.world = in->schedule.meta.world;
        auto f = fabric_model_for(a.fabric, t, a.world);
        if (!f) return f.error();
        fabric = std::move(f).value();
        return in;
    }
    if (auto e = check_saved_schedule_flags(sub, a, false)) return *e;
    auto world = world_on(t, a.world);
    if (!world) return world.error();
    a.world = world.value();
    a.gpus_per_node = t.gpus_per_node;   // what DeepSpeed's device_count() sees (qgZ's node groups)
    auto f = fabric_model_for(a.fabric, t, a.world);   // --fabric: its what-ifs checked first
    if (!f) return f.error();
    fabric = std::move(f).value();
    return load_inputs(a);
}

std::vector<const Schedule*> Simulated::stage_list() const {
    std::vector<const Schedule*> v;
    for (const auto& s : stages) v.push_back(&s);
    return v;
}

std::vector<const Prediction*> Simulated::stage_timings() const {
    std::vector<const Prediction*> v;
    for (const auto& p : stages_overlapped) v.push_back(&p);
    return v;
}

// A pipeline's stages: the inputs' rank at its stage and the rank with its data, sequence and
// tensor index on every other stage, built as the inputs' schedule was.
static Result<std::vector<Schedule>> stage_schedules(const Inputs& in, const ScheduleArgs& a) {
    const ScheduleMeta& m = in.schedule.meta;
    std::vector<Schedule> stages;
    for (int64_t k = 0; k < m.layout.pipe; ++k) {
        if (k == m.pipe_stage) {
            stages.push_back(in.schedule);
            continue;
        }
        ScheduleOptions o = options_for_stage(m, k);
        o.gpus_per_node = a.gpus_per_node;
        o.zero_init = a.zero_init;
        o.max_ops = a.max_ops;
        o.overflow_steps = m.overflow_steps;
        auto s = build_schedule(in.model, in.cfg, o);
        if (!s) return s.error();
        stages.push_back(std::move(s).value());
    }
    return stages;
}

// A pipeline's stages timed together: sends meet their receives, the bubble comes out of the run.
static Status simulate_stages(Simulated& sim, const ScheduleArgs& a, const Topology& timed, const EngineAdjust* adj) {
    auto stages = stage_schedules(sim.in, a);
    if (!stages) return stages.error();
    sim.stages = std::move(stages).value();
    const auto list = sim.stage_list();
    auto logged = simulate_ranks(list, timed, TimingMode::Synchronized, adj);
    if (!logged) return logged.error();
    auto overlapped = simulate_ranks(list, timed, TimingMode::Overlapped, adj);
    if (!overlapped) return overlapped.error();
    sim.stages_logged = std::move(logged).value();
    sim.stages_overlapped = std::move(overlapped).value();
    const auto at = static_cast<size_t>(sim.in.schedule.meta.pipe_stage);
    sim.logged = sim.stages_logged[at];
    sim.overlapped = sim.stages_overlapped[at];
    return std::nullopt;
}

Result<Simulated> load_and_simulate(const CLI::App* sub, ScheduleArgs& a, const std::string& topology, int64_t nodes,
                                    bool announce) {
    auto topo = load_topology(topology, nodes);
    if (!topo) return topo.error();
    if (auto e = apply_nccl_flag(a.nccl, topo.value())) return *e;
    std::shared_ptr<FabricModel> fabric;   // --fabric: null without it
    auto in = inputs_on_topology(sub, a, topo.value(), fabric);
    if (!in) return in.error();
    if (in->schedule.meta.layout.is_3d() && !a.what_if.empty())   // not modelled for a 3D layout yet, by name
        return Error{"", "--what-if", "not with a pipeline, tensor, sequence or expert parallel layout yet"};
    std::optional<Schedule> real;
    if (!a.what_if.empty()) {
        real = in->schedule;
        if (auto e = apply_what_if_flag(a.what_if, in->schedule)) return *e;
    }
    if (announce && in->stream)
        std::cerr << "zerosim: simulating the first " << kTemplateSteps << " steps (" << in->schedule.ops.size() << " of "
                  << in->stream->op_count() << " ops) on " << topo->name << "; the later steps repeat one of them ...\n";
    else if (announce && (in->schedule.meta.steps > 1 || a.world > 256))
        std::cerr << "zerosim: simulating " << in->schedule.ops.size() << " ops on " << topo->name << " ...\n";
    warn_engine_start_memory(real ? *real : in->schedule, topo.value(), !a.schedule.empty());   // DeepSpeed's engine start
    // Fabric mode plans on its ideal topology and divides each plan by its traffic's slowdown.
    const Topology& timed = fabric ? fabric->ideal_topology() : topo.value();
    EngineAdjust adjust;
    if (fabric) adjust = fabric->engine_adjust(in->schedule.meta);
    const EngineAdjust* adj = fabric ? &adjust : nullptr;
    const bool pipeline = in->schedule.meta.layout.pipe > 1;   // its stages are simulated together below
    Result<Prediction> logged = Prediction{}, overlapped = Prediction{};
    if (!pipeline) logged = simulate(in->schedule, timed, TimingMode::Synchronized, INT64_MAX, adj);
    if (!logged) return logged.error();
    if (!pipeline)
        overlapped = simulate(in->schedule, timed, TimingMode::Overlapped,
                              gathered_parameter_budget(in->model, in->cfg, in->schedule, topo.value()), adj);
    if (!overlapped) return overlapped.error();
    Prediction real_overlapped;
    if (real) {   // DeepSpeed's own schedule, timed as predict times it, for the side-by-side table
        EngineAdjust real_adjust;   // its own groups (a what-if may regroup the ranks)
        if (fabric) real_adjust = fabric->engine_adjust(real->meta);
        auto r = simulate(*real, timed, TimingMode::Overlapped,
                          gathered_parameter_budget(in->model, in->cfg, *real, topo.value()), fabric ? &real_adjust : nullptr);
        if (!r) return r.error();
        real_overlapped = std::move(r).value();
    }
    Simulated sim{std::move(topo).value(), std::move(in).value(), std::move(logged).value(), std::move(overlapped).value(),
                  std::move(real), std::move(real_overlapped), {}, {}, {}};
    if (pipeline)   // on the topology as it now lives in `sim` (topo was moved there)
        if (auto e = simulate_stages(sim, a, fabric ? fabric->ideal_topology() : sim.topology, adj)) return *e;
    if (fabric) note_fabric(*fabric);   // after every simulation: its flow simulations are counted
    return sim;
}

WhatIfComparison compare_what_if(const std::string& name, const Simulated& sim, bool activation_checkpointing) {
    const FitEstimate fit = fit_of(sim.in, sim.topology, activation_checkpointing);
    FitEstimate real_fit = fit;
    // fit_of's figures are of the inputs' (what-if) schedule; DeepSpeed's own has the memory model's.
    real_fit.model_states = estimate_memory(sim.in.model, sim.in.cfg, *sim.real).total();
    const std::string ds = "DeepSpeed " + sim.real->meta.release.number() + ", stage " + std::to_string(sim.real->meta.stage);
    const int64_t g = sim.topology.gpus_per_node;
    return WhatIfComparison{name, what_if_side(ds, *sim.real, sim.real_overlapped, real_fit, g),
                            what_if_side("what-if " + name + " (not DeepSpeed)", sim.in.schedule, sim.overlapped, fit, g)};
}

void add_nccl_flag(CLI::App* sub, std::string& nccl) {
    sub->add_option("--nccl", nccl,
                    "NCCL release whose tuner is predicted, e.g. 2.18, 2.21, 2.23, 2.26, 2.28 (default: the topology's nccl.version, else 2.28)");
}

Status apply_nccl_flag(const std::string& nccl, Topology& t) {
    if (nccl.empty()) return std::nullopt;
    auto v = NcclVersion::parse(nccl);
    if (!v) return Error{"", "--nccl", "unknown NCCL release '" + nccl + "'; expected " + known_nccl_versions()};
    t.nccl_version = *v;
    return std::nullopt;
}

}  // namespace zerosim::cli
