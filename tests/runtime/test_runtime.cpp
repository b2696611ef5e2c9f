// zerorun under mpirun: real processes, real MPI collectives, results checked from outside.
//
// What is checked, and against what:
//  - every collective's result on every rank (zerorun's own checks, read from its JSON log);
//  - final fp32 master weights of stages 0-3 against an independent single-process computation of
//    the same loss (zerorun::Reference, no MPI, no partitioning) and against each other;
//  - the measured op sequence (rank 0's comms_logger lines, parsed by the validator's parser)
//    against the schedule IR, op by op;
//  - fault handling: a rank that exits or hangs makes every rank stop with a clear error in time;
//  - bad inputs give one line and exit code 2.
// zerorun bench (nccl-tests tables whose #wrong is a real check) is in test_runtime_bench.cpp.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "nlohmann/json.hpp"
#include "executor/executor.hpp"
#include "executor/loss.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "formats/comms_log.hpp"
#include "formats/schedule_outputs.hpp"
#include "schedule/schedule.hpp"
#include "runtime_test_helpers.hpp"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using zerorun_test::count_lines_starting;
using zerorun_test::fixture;
using zerorun_test::RunResult;
using zerorun_test::shell;

RunResult mpirun(int np, const std::string& args) { return zerorun_test::mpirun_program(np, ZERORUN_BINARY, args); }

// A fresh folder per test.
std::string workdir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : name)
        if (c == '/') c = '_';
    fs::path d = fs::path(::testing::TempDir()) / ("zerorun-" + name + "-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A DeepSpeed config for a stage with the test's small buckets, in fp32 or bf16, with gradient
// accumulation `ga`. The buckets are small so each step has several flushes; stage 1 uses
// round-robin partitions and overlap_comm, stage 2 the per-rank reduce path, stage 3 persistent
// parameters, prefetch and a short reuse distance.
std::string write_config(const std::string& dir, int stage, const std::string& dtype, int ga) {
    json c = json::parse(read_text(fixture("configs/z" + std::to_string(stage) + ".json")));
    c["gradient_accumulation_steps"] = ga;
    if (dtype == "bf16") c["bf16"] = {{"enabled", true}};
    if (dtype == "fp16") c["fp16"] = {{"enabled", true}};
    std::string path = dir + "/ds_z" + std::to_string(stage) + "_" + dtype + "_ga" + std::to_string(ga) + ".json";
    std::ofstream(path) << c.dump(1);
    return path;
}

zerosim::Schedule schedule_for(const std::string& cfg_path, int world, int steps) {
    auto cfg = zerosim::load_ds_config(cfg_path);
    EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().what());
    auto model = zerosim::load_model(fixture("tiny_model.json"));
    EXPECT_TRUE(model.ok());
    zerosim::ScheduleOptions o;
    o.world = world;
    o.steps = steps;
    auto s = zerosim::build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok());
    return s.value();
}

// Every op of every rank in the JSON log: none failed its check, collectives were checked.
void expect_all_checks_pass(const std::string& json_path, const zerosim::Schedule& s, int world) {
    json j = json::parse(read_text(json_path));
    ASSERT_EQ(j.at("format"), "zerorun-log");
    ASSERT_EQ(j.at("ranks").size(), static_cast<size_t>(world));
    EXPECT_EQ(j.at("wrong").get<int64_t>(), 0);
    for (const auto& r : j.at("ranks")) {
        const auto& ops = r.at("ops");
        ASSERT_EQ(ops.size(), s.ops.size());
        int64_t checked = 0, collectives_checked = 0, collectives = 0;
        for (size_t i = 0; i < ops.size(); ++i) {
            const auto& o = ops[i];
            EXPECT_NE(o.at("check"), "wrong") << "rank " << r.at("rank") << " op " << i;
            EXPECT_GE(o.at("end_us").get<double>(), o.at("start_us").get<double>());
            checked += o.at("checked").get<int64_t>();
            if (s.ops[i].kind != zerosim::OpKind::Compute && s.ops[i].kind != zerosim::OpKind::Barrier) {
                ++collectives;
                if (o.at("check") == "ok") {
                    ++collectives_checked;
                }
                else  // only a reduce's non-root ranks have no result to check
                    EXPECT_TRUE(o.at("check") == "none" && s.ops[i].kind == zerosim::OpKind::Reduce)
                        << "rank " << r.at("rank") << " op " << i << " check " << o.at("check");
            }
        }
        EXPECT_GT(checked, 0);
        EXPECT_GT(collectives_checked, 0);
        EXPECT_LE(collectives_checked, collectives);
    }
}

// Rank 0's comms_logger lines, parsed as the validator parses real DeepSpeed logs, against the
// schedule IR: same ops, same order, same callers, same printed sizes, step by step.
// A comms_logger file's verbose lines, parsed; `summary` tells whether a log_summary table follows.
std::vector<zerosim::ParsedLogLine> read_comms_lines(const std::string& log_path, bool* summary = nullptr) {
    std::ifstream f(log_path);
    EXPECT_TRUE(f) << log_path;
    std::vector<zerosim::ParsedLogLine> lines;
    std::string line;
    while (std::getline(f, line)) {
        if (line.find("comm op:") != std::string::npos) {
            auto p = zerosim::parse_ds_verbose_line(line);
            EXPECT_TRUE(p.has_value()) << line;
            if (p) lines.push_back(*p);
        }
        if (summary && line.find("Comm. Op") != std::string::npos) *summary = true;
    }
    return lines;
}

void expect_log_matches_ir(const std::string& log_path, const zerosim::Schedule& s) {
    bool summary = false;
    std::vector<zerosim::ParsedLogLine> lines = read_comms_lines(log_path, &summary);
    EXPECT_TRUE(summary) << "no log_summary table";
    std::vector<const zerosim::Op*> ir;
    for (const auto& op : s.ops)
        if (op.kind != zerosim::OpKind::Compute) ir.push_back(&op);
    ASSERT_EQ(lines.size(), ir.size());
    for (size_t i = 0; i < ir.size(); ++i) {
        const auto& op = *ir[i];
        SCOPED_TRACE("IR op " + std::to_string(op.id) + " (step " + std::to_string(op.step) + ")");
        EXPECT_EQ(lines[i].op.record, zerosim::op_record_name(op.kind));
        EXPECT_EQ(lines[i].op.caller, op.caller);
        EXPECT_EQ(lines[i].op.size_text, zerosim::ds_size_string(op.bytes()));
        EXPECT_GE(lines[i].op.time_ms, 0.0);
        if (::testing::Test::HasFailure()) return;   // one mismatch says enough
    }
}

struct WeightDiff {
    int64_t elements = 0, unequal = 0;
    double max_rel = 0;
    int64_t over_2e5 = 0;   // elements further apart than 2e-5 relative
};

WeightDiff compare(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    WeightDiff d;
    for (size_t p = 0; p < a.size(); ++p)
        for (size_t i = 0; i < a[p].size(); ++i) {
            ++d.elements;
            float x = a[p][i], y = b[p][i];
            if (std::memcmp(&x, &y, 4) != 0) ++d.unequal;
            double rel = std::fabs(static_cast<double>(x) - y) / std::max(1.0, std::fabs(static_cast<double>(y)));
            if (std::isnan(rel)) rel = INFINITY;
            d.max_rel = std::max(d.max_rel, rel);
            if (rel > 2e-5) ++d.over_2e5;
        }
    return d;
}

// The independent computation: one process, full vectors, the same loss and Adam.
std::vector<std::vector<float>> reference_weights(const zerosim::Schedule& s, int steps) {
    zerorun::LossSpec spec;
    spec.seed = 1;
    spec.world = static_cast<int>(s.meta.world);
    spec.grad_accum = s.meta.grad_accum;
    spec.model_dtype = s.meta.model_dtype;
    spec.comm_dtype = s.meta.comm_dtype;
    spec.lr = 1e-3f;
    zerorun::Reference ref(s.params, spec);
    for (int st = 0; st < steps; ++st) ref.step(st);
    return ref.master();
}

struct StageCase {
    int world;
    std::string dtype;
    int ga;
};
void PrintTo(const StageCase& c, std::ostream* os) { *os << c.world << " ranks, " << c.dtype << ", grad_accum " << c.ga; }

std::string case_name(const ::testing::TestParamInfo<StageCase>& i) {
    return "w" + std::to_string(i.param.world) + "_" + i.param.dtype + "_ga" + std::to_string(i.param.ga);
}

class StagesAgree : public ::testing::TestWithParam<StageCase> {};

// Stages 0-3 on the same data end with the same weights, equal to the reference. Where every
// reduction adds the same numbers in the same order (2 ranks: a + b is commutative; one
// micro-step) that is bitwise; elsewhere the summation order differs between MPI algorithms and
// between stages (stage 2/3 reduce each micro-step, stage 0/1 at the boundary), so it is within
// a tolerance: 1e-6 relative for fp32. bf16 gradients carry 8 bits, and where a stage rounds
// them at other points (each micro-step) an element whose true gradient is below that rounding
// can flip sign, which moves Adam by up to 2*lr per step: there all elements must be within that
// bound and 99% within 2e-5.
TEST_P(StagesAgree, FinalWeightsMatchReference) {
    const StageCase c = GetParam();
    const int steps = 3;
    const std::string dir = workdir();
    const bool bitwise = c.world == 2 && c.ga == 1;
    const double tol = c.dtype == "fp32" ? 1e-6 : c.ga == 1 ? 2e-5 : 2 * 1e-3 * steps;
    std::vector<std::vector<float>> stage0;
    for (int stage = 0; stage <= 3; ++stage) {
        SCOPED_TRACE("stage " + std::to_string(stage));
        std::string cfg = write_config(dir, stage, c.dtype, c.ga);
        std::string base = dir + "/z" + std::to_string(stage);
        RunResult r = mpirun(c.world, "--deepspeed 0.14.2 --ds-config " + cfg + " --model " + fixture("tiny_model.json") + " --steps " +
                                          std::to_string(steps) + " --compute-scale 0 --timeout 20 --quiet -o " + base +
                                          ".log --json " + base + ".json --dump-weights " + base + ".w");
        ASSERT_EQ(r.code, 0) << r.out;
        zerosim::Schedule s = schedule_for(cfg, c.world, steps);
        expect_all_checks_pass(base + ".json", s, c.world);
        expect_log_matches_ir(base + ".log", s);
        auto w = zerorun::read_weight_dumps(base + ".w", c.world, s.params);
        ASSERT_TRUE(w.ok());
        auto ref = reference_weights(s, steps);
        WeightDiff d = compare(w.value(), ref);
        EXPECT_EQ(d.elements, s.meta.total_params);
        if (bitwise) {
            EXPECT_EQ(d.unequal, 0) << "max rel " << d.max_rel;
        }
        EXPECT_LE(d.max_rel, tol) << d.unequal << " of " << d.elements << " differ";
        EXPECT_LE(d.over_2e5, d.elements / 100) << "max rel " << d.max_rel;
        // The weights moved: a run that skipped every update would not match the reference.
        zerorun::LossSpec spec;
        spec.model_dtype = s.meta.model_dtype;
        zerorun::Reference start(s.params, spec);
        EXPECT_GT(compare(w.value(), start.master()).max_rel, 1e-4);
        if (stage == 0) {
            stage0 = w.value();
        } else {
            WeightDiff d0 = compare(w.value(), stage0);
            if (bitwise) {
                EXPECT_EQ(d0.unequal, 0);
            }
            EXPECT_LE(d0.max_rel, 2 * tol);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Runtime, StagesAgree,
                         ::testing::Values(StageCase{2, "fp32", 1}, StageCase{2, "bf16", 1}, StageCase{4, "fp32", 1},
                                           StageCase{4, "bf16", 1}, StageCase{2, "fp32", 2}, StageCase{4, "bf16", 2}),
                         case_name);

// The IR can come from a file (zerosim schedule --format json); the run is the same.
TEST(Runtime, RunsScheduleFromJsonFile) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 3, "fp32", 1);
    zerosim::Schedule s = schedule_for(cfg, 4, 2);
    std::string sched = dir + "/schedule.json";
    {
        std::ofstream f(sched);
        zerosim::write_schedule_json(f, s);
    }
    RunResult r = mpirun(4, "--schedule " + sched + " --compute-scale 0 --timeout 20 --quiet -o " + dir + "/m.log --json " +
                                dir + "/m.json");
    ASSERT_EQ(r.code, 0) << r.out;
    expect_all_checks_pass(dir + "/m.json", s, 4);
    expect_log_matches_ir(dir + "/m.log", s);
}

// Compute segments run real GEMMs on their own thread while collectives progress on the
// communication thread: with overlap_comm (stage 2) and stage 3's prefetch some collective runs
// while a compute segment runs. With --sync-each-op nothing overlaps.
TEST(Runtime, ComputeOverlapsCommunicationUnlessSyncEachOp) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 3, "fp32", 1);
    auto overlap_ms = [&](const std::string& extra) {
        RunResult r = mpirun(2, "--ds-config " + cfg + " --model " + fixture("tiny_model.json") +
                                    " --steps 2 --compute-scale 0.05 --timeout 30 --quiet -o " + dir + "/o.log --json " + dir +
                                    "/o.json " + extra);
        EXPECT_EQ(r.code, 0) << r.out;
        json j = json::parse(read_text(dir + "/o.json"));
        double flops = 0, overlap = 0;
        for (const auto& rk : j.at("ranks")) {
            std::vector<std::pair<double, double>> comp, comm;
            for (size_t i = 0; i < j.at("ops").size(); ++i) {
                const auto& o = rk.at("ops")[i];
                auto iv = std::make_pair(o.at("start_us").get<double>(), o.at("end_us").get<double>());
                if (j.at("ops")[i].at("kind") == "compute") {
                    comp.push_back(iv);
                    flops += o.at("flops_run").get<double>();
                } else {
                    comm.push_back(iv);
                }
            }
            for (auto [a0, a1] : comp)
                for (auto [b0, b1] : comm) overlap += std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
        }
        EXPECT_GT(flops, 0);
        return overlap / 1000.0;
    };
    EXPECT_GT(overlap_ms(""), 0.0);
    EXPECT_EQ(overlap_ms("--sync-each-op"), 0.0);
}

// ZeRO's point, measured: optimizer state per rank shrinks with the world from stage 1 on,
// gradients from stage 2 on; the report prints one row per rank.
TEST(Runtime, MemoryReportShowsPartitionedState) {
    const std::string dir = workdir();
    auto peak = [&](int stage, const char* cat) {
        std::string cfg = write_config(dir, stage, "fp32", 1);
        RunResult r = mpirun(4, "--ds-config " + cfg + " --model " + fixture("tiny_model.json") +
                                    " --steps 1 --compute-scale 0 --timeout 20 -o " + dir + "/m.log --json " + dir + "/m.json");
        EXPECT_EQ(r.code, 0) << r.out;
        EXPECT_NE(r.out.find("zerorun memory per rank: stage " + std::to_string(stage)), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("peak_rss"), std::string::npos);
        json j = json::parse(read_text(dir + "/m.json"));
        return j.at("ranks")[1].at("memory").at(cat).at("peak").get<int64_t>();
    };
    int64_t total = 0;
    auto model = zerosim::load_model(fixture("tiny_model.json"));
    ASSERT_TRUE(model.ok());
    for (const auto& p : model->params) total += p.numel;
    EXPECT_EQ(peak(0, "optimizer_states"), 12 * total);   // fp32 master, m, v of everything
    for (int stage = 1; stage <= 3; ++stage) {
        int64_t opt = peak(stage, "optimizer_states");
        EXPECT_LE(opt, 12 * (total / 4 + 40)) << "stage " << stage;   // a quarter, plus padding
        EXPECT_GE(opt, 12 * (total / 4));
    }
    EXPECT_LT(peak(2, "gradients"), peak(0, "gradients"));
}

// A rank that leaves mid-run: the others say so and exit non-zero, well within the timeout.
TEST(Runtime, DeadRankStopsEveryRank) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 2, "fp32", 1);
    RunResult r = mpirun(4, "--ds-config " + cfg + " --model " + fixture("tiny_model.json") +
                                " --steps 2 --compute-scale 0 --timeout 10 --test-fail-rank 2 --test-fail-op 30");
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_LT(r.seconds, 30.0) << r.out;
    EXPECT_NE(r.out.find("rank 2: --test-fail-op: exiting"), std::string::npos) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("zerorun: error: rank [013]: "))) << r.out;
}

// A rank that stops answering without dying: only the watchdog can tell. Every rank must stop
// within the timeout (plus start-up), naming the op it waited in.
TEST(Runtime, HungRankIsCaughtByWatchdog) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 3, "fp32", 1);
    RunResult r = mpirun(4, "--ds-config " + cfg + " --model " + fixture("tiny_model.json") +
                                " --steps 2 --compute-scale 0 --timeout 3 --test-fail-rank 1 --test-fail-op 40 "
                                "--test-fail-mode hang");
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_LT(r.seconds, 25.0) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("zerorun: error: rank [023]: no op finished for [0-9.]+ s"))) << r.out;
}

// A rank that arrives late at one collective (400 ms, without --sync-each-op to absorb it at a
// fence): rank 0 waits for it inside the call, so its own time (--op-time rank, DeepSpeed's view)
// holds the wait; the skew-free time (shortest call over ranks) is the collective's own and does
// not. The DeepSpeed lines print the same time as the JSON log.
TEST(Runtime, SkewFreeOpTimeLeavesOutTheWaitForALateRank) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 2, "fp32", 1);
    const zerosim::Schedule sched = schedule_for(cfg, 2, 1);
    int64_t late = -1;   // the first all_reduce after the start-up phase
    for (const auto& op : sched.ops)
        if (op.kind == zerosim::OpKind::AllReduce && op.step >= 0) {
            late = op.id;
            break;
        }
    ASSERT_GE(late, 0);
    auto time_ms = [&](const std::string& mode, double& ds_line_ms) {
        RunResult r = mpirun(2, "--ds-config " + cfg + " --model " + fixture("tiny_model.json") +
                                    " --steps 1 --compute-scale 0 --timeout 30 --quiet --test-fail-rank 1 --test-fail-op " +
                                    std::to_string(late) + " --test-fail-mode delay --op-time " + mode + " -o " + dir + "/" +
                                    mode + ".log --json " + dir + "/" + mode + ".json");
        EXPECT_EQ(r.code, 0) << r.out;
        json j = json::parse(read_text(dir + "/" + mode + ".json"));
        EXPECT_EQ(j.at("op_time"), mode);
        // The late op's line: collectives are logged in IR order.
        int nth = 0;
        for (const auto& op : sched.ops)
            if (op.kind != zerosim::OpKind::Compute && op.id < late) ++nth;
        auto lines = read_comms_lines(dir + "/" + mode + ".log");
        ds_line_ms = static_cast<size_t>(nth) < lines.size() ? lines[static_cast<size_t>(nth)].op.time_ms : -1;
        return j.at("ops").at(static_cast<size_t>(late)).at("time_ms").get<double>();
    };
    double rank_line = 0, free_line = 0;
    double rank_ms = time_ms("rank", rank_line);
    double free_ms = time_ms("skew-free", free_line);
    EXPECT_GT(rank_ms, 300.0);
    EXPECT_LT(free_ms, 100.0);
    EXPECT_NEAR(rank_line, rank_ms, 0.006);
    EXPECT_NEAR(free_line, free_ms, 0.006);
}

// The validator reads zerorun's JSON log (full-precision times) beside zerosim's predicted JSON:
// the run is the schedule, op for op.
TEST(Runtime, ValidatorReadsTheJsonLog) {
    const std::string dir = workdir();
    std::string cfg = write_config(dir, 3, "fp32", 1);
    const std::string model = fixture("tiny_model.json");
    RunResult run = mpirun(2, "--ds-config " + cfg + " --model " + model +
                                  " --steps 2 --compute-scale 0 --sync-each-op --op-time skew-free --quiet -o " + dir +
                                  "/m.log --json " + dir + "/m.json");
    ASSERT_EQ(run.code, 0) << run.out;
    RunResult pred = shell(std::string(ZEROSIM_BINARY) + " predict --ds-config " + cfg + " --model " + model +
                           " --topology " + ZERORUN_FIXTURES_DIR + "/../../topologies/localhost.json --world 2 --steps 2"
                           " --format json -o " + dir + "/p.json");
    ASSERT_EQ(pred.code, 0) << pred.out;
    RunResult v = shell(std::string(ZEROSIM_BINARY) + " validate " + dir + "/p.json " + dir + "/m.json --what ops");
    EXPECT_EQ(v.code, 0) << v.out;
    EXPECT_NE(v.out.find("0 missing, 0 extra, 0 resized, 0 swapped"), std::string::npos) << v.out;
    EXPECT_NE(v.out.find("zerosim/zerorun JSON"), std::string::npos) << v.out;
}

TEST(Runtime, BadInputsGiveOneLineAndExitTwo) {
    const std::string dir = workdir();
    std::string bad = dir + "/bad.json";
    std::ofstream(bad) << R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 7}})";
    RunResult r = mpirun(2, "--deepspeed 0.19.5 --ds-config " + bad + " --model " + fixture("tiny_model.json"));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: " + bad + ": field 'zero_optimization.stage': "), std::string::npos) << r.out;
    // One line from zerorun (mpirun adds its own banner about the non-zero exit).
    EXPECT_EQ(count_lines_starting(r.out, "zerorun:"), 1) << r.out;

    r = mpirun(2, "--deepspeed 0.19.5 --ds-config " + fixture("configs/z0.json") + " --model " + fixture("tiny_model.json") + " --op-time fastest");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: field '--op-time': expected rank or skew-free, found 'fastest'"), std::string::npos)
        << r.out;

    r = mpirun(2, "--deepspeed 0.19.5 --ds-config " + fixture("configs/z0.json") + " --model " + dir + "/missing.json");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: " + dir + "/missing.json"), std::string::npos) << r.out;

    // A schedule made for another world size.
    zerosim::Schedule s = schedule_for(fixture("configs/z1.json"), 8, 1);
    std::string sched = dir + "/s8.json";
    {
        std::ofstream f(sched);
        zerosim::write_schedule_json(f, s);
    }
    r = mpirun(2, "--schedule " + sched);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: " + sched + ": field 'meta.world': the schedule is for 8 ranks"), std::string::npos)
        << r.out;

    // A schedule whose op does not fit its own parameter list.
    zerosim::Schedule t = schedule_for(fixture("configs/z3.json"), 2, 1);
    for (auto& op : t.ops)
        if (op.kind == zerosim::OpKind::AllGather && !op.params.empty()) {
            op.elements += 1;
            break;
        }
    std::string broken = dir + "/broken.json";
    {
        std::ofstream f(broken);
        zerosim::write_schedule_json(f, t);
    }
    r = mpirun(2, "--schedule " + broken);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("zerorun: error: .*broken.json: field 'ops\\[[0-9]+\\]': shards hold")))
        << r.out;
}

}  // namespace
