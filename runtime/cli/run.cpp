// `zerorun` (the run command): inputs -> schedule IR -> execution on every rank -> logs.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "run.hpp"

#include "executor/executor.hpp"
#include "executor/run_log.hpp"
#include "executor/watchdog.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "formats/schedule_outputs.hpp"
#include "formats/schedule_json.hpp"
#include "schedule/check.hpp"
#include "schedule/mesh.hpp"
#include "schedule/schedule.hpp"

namespace zerorun {

namespace {

// Every rank reads the same inputs and fails the same way: rank 0 says it once.
int input_error(Backend& be, const zerosim::Error& e) { return zerosim::print_input_error("zerorun", e, be.rank() == 0); }

// The lowest rank that failed (bookkeeping outside the schedule: one all_reduce on the world,
// never logged), or -1 when none did.
int lowest_failing_rank(Backend& be, bool failed) {
    const int64_t world = be.world();
    void* buf = be.alloc(sizeof(int64_t));
    int64_t mine = failed ? world - be.rank() : 0;
    std::memcpy(buf, &mine, sizeof mine);
    be.all_reduce(buf, buf, 1, zerosim::DType::INT64, zerosim::ReduceOp::Max);
    int64_t most = 0;
    std::memcpy(&most, be.host_view(buf), sizeof most);
    be.release(buf, sizeof(int64_t));
    return most > 0 ? static_cast<int>(world - most) : -1;
}

bool layout_flags(const RunArgs& a) { return a.pp > 1 || a.tp > 1 || a.sp > 1 || a.ep > 1; }

// A schedule file, or with a directory (zerosim schedule --rank all --format json -o DIR/) this
// rank's DIR/rank<R>.json. A 3D schedule must be this rank's program in this world.
zerosim::Result<zerosim::Schedule> read_schedule_file(Backend& be, const RunArgs& a) {
    if (!a.ds_config.empty() || !a.model.empty())
        return zerosim::Error{"", "--schedule", "give either --schedule or --ds-config and --model, not both"};
    if (!a.deepspeed.empty())
        return zerosim::Error{"", "--deepspeed", "a schedule file keeps the release it was built for (meta.dialect); "
                                                  "give --deepspeed with --ds-config and --model"};
    if (layout_flags(a))
        return zerosim::Error{"", "--schedule", "a schedule file keeps its layout (meta.layout); give --pp/--tp/--sp/--ep with "
                                                "--ds-config and --model"};
    std::string path = a.schedule;
    if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / ("rank" + std::to_string(be.rank()) + ".json")).string();
    auto s = zerosim::read_schedule_json(path);
    if (!s) return s.error();
    const auto& m = s->meta;
    const int64_t world = m.layout.is_3d() ? m.layout.world : m.world;
    if (world != be.world())
        return zerosim::Error{path, m.layout.is_3d() ? "meta.layout.world" : "meta.world",
                              "the schedule is for " + std::to_string(world) + " ranks; mpirun started " + std::to_string(be.world())};
    if (m.layout.is_3d() && m.rank != be.rank())
        return zerosim::Error{path, "meta.rank", "the schedule is rank " + std::to_string(m.rank) + "'s program; this is rank " +
                                                     std::to_string(be.rank()) + " (give the directory of every rank's schedule)"};
    if (s->params.empty()) return zerosim::Error{path, "parameters", "the schedule lists no parameters"};
    return s;
}

// `rank`'s program (this rank's, or in a pipeline another stage's: pipeline_model); `say` prints
// the notes and warnings once.
zerosim::Result<zerosim::Schedule> load_schedule(Backend& be, const RunArgs& a, int rank, bool say) {
    if (!a.schedule.empty()) return read_schedule_file(be, a);
    if (a.ds_config.empty()) return zerosim::Error{"", "--ds-config", "required (or --schedule)"};
    if (a.model.empty()) return zerosim::Error{"", "--model", "required (or --schedule)"};
    // --deepspeed: the release whose schedule runs; without it the newest, said once by rank 0.
    zerosim::Release release = zerosim::kNewestRelease;
    if (!a.deepspeed.empty()) {
        auto r = zerosim::parse_release(a.deepspeed, "--deepspeed");
        if (!r) return r.error();
        release = r.value();
    } else if (say && be.rank() == 0) {
        std::cerr << "zerorun: note: DeepSpeed " << release.number()
                  << "'s schedule (the newest release zerosim's rules cover); --deepspeed VERSION for another, "
                  << zerosim::kBaselineRelease.number() << " to " << release.number() << "\n";
    }
    auto cfg = zerosim::load_ds_config(a.ds_config, release);
    if (!cfg) return cfg.error();
    if (say && be.rank() == 0) zerosim::warn_ds_config("zerorun", cfg.value());
    auto model = zerosim::load_model(a.model);
    if (!model) return model.error();
    zerosim::ScheduleOptions opt;
    opt.world = be.world();
    opt.steps = a.steps;
    opt.seq_len = a.seq_len;
    opt.max_ops = a.max_ops;
    opt.gpus_per_node = a.gpus_per_node;
    // 3D (issue 29): the layout as zerosim schedule --pp/--tp/--sp/--ep builds it, and this MPI
    // rank's own program (zerosim schedule --rank R).
    opt.layout.world = opt.world;
    opt.layout.pipe = a.pp;
    opt.layout.tensor = a.tp;
    opt.layout.sequence = a.sp;
    opt.layout.expert = a.ep;
    opt.rank = rank;
    if (!a.max_memory.empty()) {
        auto cap = zerosim::parse_size(a.max_memory, "--max-memory");
        if (!cap) return cap.error();
        opt.max_bytes = cap.value();
    }
    return zerosim::build_schedule(model.value(), cfg.value(), opt);
}

// A pipeline's real MLP (executor/mlp.hpp) from every stage's program: this rank's own and, for
// the other stages, the program of the rank of its pipe group there (built as zerosim schedule
// --rank R builds it, or DIR/rank<R>.json). Only for a pipeline alone (no tensor, sequence or expert
// parallelism) in fp32; a model whose stages are not Linear layers keeps synthetic data (`why`).
std::shared_ptr<const PipelineMlp> pipeline_model(Backend& be, const RunArgs& a, const zerosim::Schedule& s, std::string& why) {
    const auto& l = s.meta.layout;
    if (l.pipe < 2) return nullptr;
    if (l.tensor > 1 || l.sequence > 1 || l.expert > 1) {
        why = "a pipeline with tensor, sequence or expert parallelism";
        return nullptr;
    }
    if (s.meta.model_dtype != zerosim::DType::FP32 || s.meta.comm_dtype != zerosim::DType::FP32) {
        why = "the real MLP runs in fp32 only";
        return nullptr;
    }
    auto mesh = zerosim::Mesh::build(l);
    if (!mesh) {
        why = mesh.error().message;
        return nullptr;
    }
    std::vector<zerosim::Schedule> others;
    std::vector<const zerosim::Schedule*> stages;
    const auto& members = mesh->group_of(zerosim::MeshGroup::Pipe, be.rank());
    others.reserve(members.size());
    for (int r : members) {
        if (r == be.rank()) {
            stages.push_back(&s);
            continue;
        }
        zerosim::Result<zerosim::Schedule> other =
            a.schedule.empty() ? load_schedule(be, a, r, false)
                               : zerosim::read_schedule_json((std::filesystem::path(a.schedule) / ("rank" + std::to_string(r) + ".json")).string());
        if (!other) {
            why = "stage of rank " + std::to_string(r) + ": " + other.error().message;
            return nullptr;
        }
        others.push_back(std::move(other.value()));
        stages.push_back(&others.back());
    }
    auto mlp = pipeline_mlp(stages);
    if (!mlp) {
        why = mlp.error().message;
        return nullptr;
    }
    return std::make_shared<const PipelineMlp>(std::move(mlp.value()));
}

// A tensor-parallel run's real model (executor/tensor_mlp.hpp) from this rank's program: only for
// tensor parallelism alone in fp32; a model of other modules keeps synthetic data (`why`).
std::shared_ptr<const TensorMlp> tensor_model(const zerosim::Schedule& s, std::string& why) {
    const auto& l = s.meta.layout;
    if (l.tensor < 2) return nullptr;
    if (l.pipe > 1 || l.sequence > 1 || l.expert > 1) {
        why = "tensor parallelism with pipeline, sequence or expert parallelism";
        return nullptr;
    }
    if (s.meta.model_dtype != zerosim::DType::FP32 || s.meta.comm_dtype != zerosim::DType::FP32) {
        why = "the real model runs in fp32 only";
        return nullptr;
    }
    auto t = tensor_mlp(s);
    if (!t) {
        why = t.error().message;
        return nullptr;
    }
    return std::make_shared<const TensorMlp>(std::move(t.value()));
}

// An expert-parallel run's real model (executor/moe_mlp.hpp) from this rank's program: expert
// parallelism alone in fp32; another model keeps synthetic data (`why`).
std::shared_ptr<const MoeMlp> moe_model(const zerosim::Schedule& s, std::string& why) {
    const auto& l = s.meta.layout;
    if (l.expert < 2) return nullptr;
    if (l.pipe > 1 || l.tensor > 1 || l.sequence > 1) {
        why = "expert parallelism with pipeline, tensor or sequence parallelism";
        return nullptr;
    }
    if (s.meta.model_dtype != zerosim::DType::FP32 || s.meta.comm_dtype != zerosim::DType::FP32) {
        why = "the real model runs in fp32 only";
        return nullptr;
    }
    auto m = moe_mlp(s);
    if (!m) {
        why = m.error().message;
        return nullptr;
    }
    return std::make_shared<const MoeMlp>(std::move(m.value()));
}

// A Ulysses run's real model (executor/ulysses_mlp.hpp) from this rank's program and the model
// file's attention (--model, or the schedule's meta.model_file): sequence parallelism alone in fp32.
std::shared_ptr<const UlyssesMlp> ulysses_model(const RunArgs& a, const zerosim::Schedule& s, std::string& why) {
    const auto& l = s.meta.layout;
    if (l.sequence < 2) return nullptr;
    if (l.pipe > 1 || l.tensor > 1 || l.expert > 1) {
        why = "sequence parallelism with pipeline, tensor or expert parallelism";
        return nullptr;
    }
    if (s.meta.model_dtype != zerosim::DType::FP32 || s.meta.comm_dtype != zerosim::DType::FP32) {
        why = "the real model runs in fp32 only";
        return nullptr;
    }
    auto model = zerosim::load_model(a.model.empty() ? s.meta.model_file : a.model);
    if (!model || model->parallel.attention.size() != 1) {
        why = model ? "the real Ulysses model has one attention" : model.error().message;
        return nullptr;
    }
    const auto& att = model->parallel.attention.front();
    auto m = ulysses_mlp(s, att.heads, att.head_size);
    if (!m) {
        why = m.error().message;
        return nullptr;
    }
    return std::make_shared<const UlyssesMlp>(std::move(m.value()));
}

// The execution flags as the executor's typed options, checked in the order the flags are listed.
zerosim::Result<ExecOptions> exec_options(const RunArgs& a) {
    ExecOptions o;
    o.compute_scale = a.compute_scale;
    o.sync_each_op = a.sync_each_op;
    o.timeout_s = a.timeout_s;
    o.lr = a.lr;
    o.seed = a.seed;
    o.verify = !a.no_verify;
    o.dump_weights = a.dump_weights;
    if (a.evict_before_op != "0") {
        auto ev = zerosim::parse_size(a.evict_before_op, "--evict-before-op");
        if (!ev) return ev.error();
        o.evict_before_op = *ev;
    }
    if (auto e = check_exec_options(o)) return *e;
    auto op_time = op_time_from_name(a.op_time);
    if (!op_time) return zerosim::Error{"", "--op-time", "expected rank or skew-free, found '" + a.op_time + "'"};
    o.op_time = *op_time;
    auto mode = test_fail_mode_from_name(a.test_fail_mode);
    if (!mode) return zerosim::Error{"", "--test-fail-mode", "expected exit, hang, delay or corrupt"};
    o.test = {a.test_fail_rank, a.test_fail_op, *mode};
    return o;
}

// --rank-logs DIR: this rank's own comms_logger lines (its program, its own call times and
// timestamps), DIR/rank<R>.log, the file zerosim schedule --rank all -o DIR/ predicts.
int write_rank_log(Backend& be, const RunArgs& a, const zerosim::Schedule& s, const ExecOptions& o, const nlohmann::json& mine,
                   const std::vector<std::string>& inputs) {
    if (a.rank_logs.empty()) return 0;
    std::error_code ec;
    std::filesystem::create_directories(a.rank_logs, ec);
    const std::string path = (std::filesystem::path(a.rank_logs) / ("rank" + std::to_string(be.rank()) + ".log")).string();
    nlohmann::json log = run_json(s, o, be.name(), {mine});
    return zerosim::write_output("zerorun", path, "--rank-logs", inputs, [&](std::ostream& out) { write_measured_deepspeed(out, s, log); });
}

// What the executor does not run, though the schedule is valid. Pipeline, tensor, sequence and
// expert parallel schedules run (issue 29), each rank its own program; stage 3 under Ulysses cuts
// parameters over the data group but reduce-scatters gradients over sequence x data
// (meta.param_shards), a state layout not executed yet. ZeRO++ / MiCS (issue 17) run on the
// backends' sub-communicators, qwZ/qgZ with the executor's block quantizer; a qgZ gradient whose
// scales cannot split over the all_to_alls is refused.
zerosim::Status not_executed(const RunArgs& a, const zerosim::Schedule& s) {
    const std::string file = a.ds_config.empty() ? a.schedule : a.ds_config;
    if (s.meta.partition.kind == zerosim::PartitionKind::PerParameter && s.meta.param_shards > 0 && s.meta.param_shards != s.meta.world)
        return zerosim::Error{file, "zero_optimization.stage",
                              "stage 3 under Ulysses (--sp " + std::to_string(s.meta.layout.sequence) + ": parameters cut over " +
                                  std::to_string(s.meta.param_shards) + " ranks, gradients over " + std::to_string(s.meta.world) +
                                  ") is not executed by zerorun yet; use stage 0, 1 or 2"};
    if (auto why = quantized_schedule_problem(s)) return zerosim::Error{file, "zero_optimization.zero_quantized_gradients", *why};
    return std::nullopt;
}

// The per-rank JSON logs gathered on rank 0, one line each.
std::vector<nlohmann::json> parse_rank_lines(const std::string& all) {
    std::vector<nlohmann::json> ranks;
    size_t at = 0;
    while (at < all.size()) {
        size_t nl = all.find('\n', at);
        ranks.push_back(nlohmann::json::parse(all.substr(at, nl - at)));
        at = nl + 1;
    }
    return ranks;
}

}  // namespace

// The run's last line when every result checked out: what was checked (each collective's result
// against the reference its handler computes), so that success is said, not only "wrong": 0 in the
// JSON log.
static void write_checked_line(std::ostream& err, const std::vector<nlohmann::json>& ranks) {
    int64_t elements = 0, ops = 0;
    for (const auto& r : ranks)
        for (const auto& o : r.at("ops")) {
            const int64_t n = o.at("checked").get<int64_t>();
            elements += n;
            ops += n > 0 ? 1 : 0;
        }
    if (ops == 0) {   // --no-verify, or a schedule without a result to check: say so, not "checked"
        err << "zerorun: no op result was checked\n";
        return;
    }
    err << "zerorun: results checked: " << elements << " elements of " << ops << " op results on " << ranks.size()
        << (ranks.size() == 1 ? " rank" : " ranks") << ", every one as expected\n";
}

int run_zero(Backend& be, const RunArgs& a) {
    if (a.steps < 1) return input_error(be, {"", "--steps", "expected at least 1 step"});
    auto opt = exec_options(a);
    if (!opt) return input_error(be, opt.error());
    // The outputs are checked before the run (core/output.hpp check_outputs): never an input (by
    // identity, through links: -o, --json or a weight dump naming --ds-config, --model or
    // --schedule), never a directory or a link to a file, never each other.
    const std::vector<std::string> inputs = {a.ds_config, a.model, a.schedule};
    std::vector<zerosim::OutputPath> outputs{{a.output, "-o"}};
    if (!a.json.empty()) outputs.push_back({a.json, "--json"});
    if (auto e = zerosim::check_outputs("zerorun", outputs, inputs)) return input_error(be, *e);
    // Every rank's weight dump against the inputs and the logs (each rank runs the same checks, so
    // all refuse or none does); the dumps' names differ by rank.
    for (int r = 0; !a.dump_weights.empty() && r < be.world(); ++r) {
        auto with_dump = outputs;
        with_dump.push_back({dump_path(a.dump_weights, r), "--dump-weights"});
        if (auto e = zerosim::check_outputs("zerorun", with_dump, inputs)) return input_error(be, *e);
    }
    auto sched = load_schedule(be, a, be.rank(), true);
    // The executor's contract: a schedule the IR's one check accepts (a file was checked as read).
    zerosim::Status bad = sched ? zerosim::check_schedule(sched.value(), a.schedule.empty() ? "schedule" : a.schedule)
                                : zerosim::Status(sched.error());
    // In a 3D layout every rank has its own program, so ranks may fail differently: all agree,
    // and the lowest failing rank says why (without a layout that is rank 0, as before).
    if (int lowest = lowest_failing_rank(be, bad.has_value()); lowest >= 0)
        return zerosim::print_input_error("zerorun", bad.value_or(zerosim::Error{"", "", ""}), be.rank() == lowest);
    const zerosim::Schedule& s = sched.value();
    if (auto e = not_executed(a, s)) return input_error(be, *e);

    std::shared_ptr<BetweenSteps> between;
    ExecOptions exec = opt.value();
    std::string synthetic_why;
    exec.pipeline_mlp = pipeline_model(be, a, s, synthetic_why);
    exec.tensor_mlp = tensor_model(s, synthetic_why);
    exec.moe_mlp = moe_model(s, synthetic_why);
    exec.ulysses_mlp = ulysses_model(a, s, synthetic_why);
    if (be.rank() == 0 && !synthetic_why.empty())
        std::cerr << "zerorun: note: the model's data is synthetic (" << synthetic_why << ")\n";
    if (!a.bench_between.prefix.empty()) {
        if (!a.sync_each_op)
            return input_error(be, {"", "--bench-between-steps", "needs --sync-each-op (a round must not overlap an op)"});
        auto b = make_between_steps(be, a.bench_between, inputs, outputs);
        if (!b) return input_error(be, b.error());
        between = b.value();
        exec.between_steps = between->hook;
    }
    install_termination_report(be.rank());
    MemoryTracker mem;
    RankResult result = execute_schedule(be, s, exec, mem);

    // After the schedule: the per-rank logs go to rank 0 (the runtime's own bookkeeping, not an IR
    // op: never logged, never timed).
    const nlohmann::json mine_json = rank_json(be.rank(), s, result);
    int rank_log_rc = write_rank_log(be, a, s, exec, mine_json, inputs);
    std::string mine = mine_json.dump();
    std::string all = be.gather_text_to_root(mine + "\n");
    if (be.rank() != 0) return result.wrong_total ? 1 : rank_log_rc;

    const std::vector<nlohmann::json> ranks = parse_rank_lines(all);
    int64_t wrong = 0;
    for (const auto& r : ranks) wrong += r.at("wrong").get<int64_t>();
    nlohmann::json log = run_json(s, exec, be.name(), ranks);
    // Written whole or not at all, never over an input; the -o log may go to standard output. A
    // write that fails is a runtime fault (exit 3); a failed result check is a failed run (exit 1).
    int write_rc = zerosim::write_output("zerorun", a.output, "-o", inputs, [&](std::ostream& o) { write_measured_deepspeed(o, s, log); });
    if (!a.json.empty()) {
        int rc = zerosim::write_output("zerorun", a.json, "--json", inputs, [&](std::ostream& o) { o << log.dump(1) << '\n'; });
        if (!write_rc) write_rc = rc;
    }
    if (!a.quiet && !write_rc) write_memory_report(std::cout, s, ranks);
    if (wrong) std::cerr << "zerorun: error: " << wrong << " result elements failed their check (see the JSON log)\n";
    else if (!a.quiet && !write_rc) {
        std::cout.flush();   // after the memory report, as the last line
        write_checked_line(std::cerr, ranks);
    }
    int out_rc = write_rc ? 0 : zerosim::check_standard_output("zerorun");   // one line per failure
    return wrong ? zerosim::kExitFailed : write_rc ? write_rc : rank_log_rc ? rank_log_rc : out_rc;
}

}  // namespace zerorun
