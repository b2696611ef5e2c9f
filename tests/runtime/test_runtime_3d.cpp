// zerorun on 3D layouts (issue 29 part 4): 4 ranks under mpirun, each running its own rank's
// program (pipeline stages, tensor shards, Ulysses sequence ranks, MoE expert groups) on real MPI
// sub-communicators and point-to-point messages. For each reference model of
// configs/models/reference-3d with the DeepSpeed config of the matching real run
// (../shared/reference/deepspeed-v0.14.2-cpu-3d), 3 steps:
//  - zerorun exits 0 and its JSON log says "wrong": 0; every send/recv and collective that has an
//    output on a rank was checked ("ok") there: messages element by element against what the sender
//    must have sent, sub-group sums against the members' contributions recomputed locally, ZeRO's
//    gathers against the single-process reference;
//  - each rank's comms_logger lines (--rank-logs DIR/rankR.log) equal `zerosim schedule --rank R`'s
//    op for op (record, caller, printed size), and `zerosim validate` passes every rank;
//  - each rank's final fp32 master weights (--dump-weights) equal the single-process Reference of
//    that rank's parameters over its data-parallel group, MoE experts over their expert-data group
//    (1e-6 relative);
//  - stage 3 under Ulysses (parameters and gradients cut over different groups) is refused with
//    exit 2 and one line naming the key.
// Ulysses runs at stage 1 (sp4_dp1_z1's config at --sp 2: sp 2 x dp 2); the stage-3 run's config
// (sp2_dp2_z3) is the refusal case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "executor/executor.hpp"
#include "executor/loss.hpp"
#include "formats/comms_log.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "nlohmann/json.hpp"
#include "runtime_test_helpers.hpp"
#include "schedule/schedule.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zerorun_test::RunResult;

struct Case3d {
    std::string name, flag, model, run;   // run: the reference run's folder (its ds_config.json)
    int pp = 1, tp = 1, sp = 1, ep = 1;
    std::string extra;   // more zerorun flags
};

std::string dir_for(const std::string& tag) {
    fs::path d = fs::path(::testing::TempDir()) / ("zerorun-3d-" + tag + "-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

std::string config_of(const Case3d& c) { return std::string(ZEROSIM_REFERENCE_DIR) + "/deepspeed-v0.14.2-cpu-3d/" + c.run + "/ds_config.json"; }
std::string model_of(const Case3d& c) { return std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/" + c.model; }

// Rank r's program as zerosim builds it (the schedule --rank R the run must equal).
zerosim::Schedule rank_schedule(const Case3d& c, int rank) {
    auto release = zerosim::parse_release("0.14.2", "--deepspeed");
    auto cfg = zerosim::load_ds_config(config_of(c), release.value());
    auto m = zerosim::load_model(model_of(c));
    EXPECT_TRUE(cfg.ok() && m.ok());
    zerosim::ScheduleOptions o;
    o.world = 4;
    o.steps = 3;
    o.layout.world = 4;
    o.layout.pipe = c.pp;
    o.layout.tensor = c.tp;
    o.layout.sequence = c.sp;
    o.layout.expert = c.ep;
    o.rank = rank;
    auto s = zerosim::build_schedule(m.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

std::vector<zerosim::ParsedLogLine> comms_lines(const std::string& path) {
    std::ifstream f(path);
    EXPECT_TRUE(f) << path;
    std::vector<zerosim::ParsedLogLine> lines;
    std::string line;
    while (std::getline(f, line))
        if (line.find("comm op:") != std::string::npos) {
            auto p = zerosim::parse_ds_verbose_line(line);
            EXPECT_TRUE(p.has_value()) << line;
            if (p) lines.push_back(*p);
        }
    return lines;
}

// The run's log of rank r against zerosim's prediction of rank r, line by line.
void expect_same_ops(const std::string& measured, const std::string& predicted, int rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    auto m = comms_lines(measured), p = comms_lines(predicted);
    ASSERT_FALSE(p.empty());
    ASSERT_EQ(m.size(), p.size());
    for (size_t i = 0; i < m.size(); ++i) {
        SCOPED_TRACE("line " + std::to_string(i));
        EXPECT_EQ(m[i].op.record, p[i].op.record);
        EXPECT_EQ(m[i].op.caller, p[i].op.caller);
        EXPECT_EQ(m[i].op.size_text, p[i].op.size_text);
        if (::testing::Test::HasFailure()) return;
    }
}

// A rank's weight dump: {int32 param, int64 offset, int64 count, float[count]} records.
std::map<std::pair<int, int64_t>, float> read_dump(const std::string& path) {
    std::map<std::pair<int, int64_t>, float> w;
    std::ifstream f(path, std::ios::binary);
    int32_t p = 0;
    int64_t off = 0, n = 0;
    while (f.read(reinterpret_cast<char*>(&p), 4) && f.read(reinterpret_cast<char*>(&off), 8) && f.read(reinterpret_cast<char*>(&n), 8)) {
        std::vector<float> v(static_cast<size_t>(n));
        f.read(reinterpret_cast<char*>(v.data()), n * 4);
        for (int64_t i = 0; i < n; ++i) w[{p, off + i}] = v[i];
    }
    return w;
}

// The single-process computation of rank r's parameters: its data group's `world` ranks, the same
// loss and Adam (zerorun::Reference), 3 steps.
void expect_reference_weights(const zerosim::Schedule& s, const std::string& dump) {
    zerorun::LossSpec spec;
    spec.seed = 1;
    spec.world = static_cast<int>(s.meta.world);
    spec.grad_accum = s.meta.grad_accum;
    spec.model_dtype = s.meta.model_dtype;
    spec.comm_dtype = s.meta.comm_dtype;
    spec.lr = 1e-3f;
    zerorun::Reference ref(s.params, spec);
    // MoE experts are cut over, and averaged over, their expert-data group (hand-set from the
    // partition layout the schedule states).
    for (const auto& G : s.meta.partition.groups)
        if (G.over == zerosim::GroupKind::ExpertData)
            for (int p : G.order) ref.set_world(p, static_cast<int>(s.meta.group_size(zerosim::GroupKind::ExpertData)));
    for (int st = 0; st < 3; ++st) ref.step(st);
    auto w = read_dump(dump);
    int64_t over = 0;
    for (const auto& [key, got] : w) {
        const float want = ref.master()[key.first][key.second];
        over += !(std::fabs(got - want) <= 1e-6 * std::max(1.0f, std::fabs(want)));
    }
    EXPECT_GT(w.size(), 0u) << dump;
    EXPECT_EQ(over, 0) << dump << ": " << over << " of " << w.size() << " weights off the reference";
}

void run_case(const Case3d& c) {
    const std::string dir = dir_for(c.name);
    RunResult pred = zerorun_test::shell(std::string(ZEROSIM_BINARY) + " schedule --deepspeed 0.14.2 --ds-config " + config_of(c) +
                                         " --model " + model_of(c) + " --world 4 " + c.flag + " --steps 3 --rank all --format deepspeed -o " +
                                         dir + "/pred/");
    ASSERT_EQ(pred.code, 0) << pred.out;
    RunResult run = zerorun_test::mpirun_program(4, ZERORUN_BINARY,
                                                 "--deepspeed 0.14.2 --ds-config " + config_of(c) + " --model " + model_of(c) + " " + c.flag +
                                                     " --steps 3 --compute-scale 0 --timeout 60 --quiet " + c.extra + " -o " + dir + "/m.log --json " + dir +
                                                     "/m.json --rank-logs " + dir + "/meas --dump-weights " + dir + "/w");
    ASSERT_EQ(run.code, 0) << run.out;
    json j = json::parse(std::ifstream(dir + "/m.json"));
    EXPECT_EQ(j.at("wrong").get<int64_t>(), 0);
    for (int r = 0; r < 4; ++r) {
        const zerosim::Schedule s = rank_schedule(c, r);
        const json& ops = j.at("ranks").at(r).at("ops");
        ASSERT_EQ(ops.size(), s.ops.size()) << "rank " << r;
        int64_t p2p = 0;
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const auto& op = s.ops[i];
            if (op.kind == zerosim::OpKind::Compute || op.elements == 0) continue;
            const std::string check = ops.at(i).at("check").get<std::string>();
            const bool output = !(op.kind == zerosim::OpKind::Send || (op.kind == zerosim::OpKind::Reduce && check == "none"));
            if (output) EXPECT_EQ(check, "ok") << "rank " << r << " op " << i << " " << zerosim::rule_name(op.rule);
            p2p += op.kind == zerosim::OpKind::Recv;
        }
        if (c.pp > 1) EXPECT_GT(p2p, 0) << "rank " << r << " received no message";
        expect_same_ops(dir + "/meas/rank" + std::to_string(r) + ".log", dir + "/pred/rank" + std::to_string(r) + ".log", r);
        expect_reference_weights(s, zerorun::dump_path(dir + "/w", r));
    }
    RunResult v = zerorun_test::shell(std::string(ZEROSIM_BINARY) + " validate " + dir + "/pred " + dir + "/meas --what ops");
    EXPECT_EQ(v.code, 0) << v.out;
    EXPECT_NE(v.out.find("verdict: PASS (4 of 4 ranks pass)"), std::string::npos) << v.out;
}

TEST(Runtime3d, PipelineTwoStages) { run_case({"pp", "--pp 2", "pipe.json", "pp2_dp2_z1", 2, 1, 1, 1}); }
TEST(Runtime3d, TensorParallelTwo) { run_case({"tp", "--tp 2", "tensor.json", "tp2_dp2_z1", 1, 2, 1, 1}); }
TEST(Runtime3d, UlyssesTwo) { run_case({"sp", "--sp 2", "ulysses.json", "sp4_dp1_z1", 1, 1, 2, 1}); }
// The checks can fail: one element put wrong on purpose by one rank (hidden --test-fail-mode
// corrupt) is counted by exactly the ranks that receive it, and the run exits 1.
int64_t first_op(const zerosim::Schedule& s, zerosim::RuleId rule) {
    for (const auto& op : s.ops)
        if (op.rule == rule) return op.id;
    return -1;
}

int64_t corrupted_run_wrong(const Case3d& c, int rank, int64_t op, std::vector<int64_t>& per_rank) {
    const std::string dir = dir_for(c.name + "-corrupt");
    RunResult run = zerorun_test::mpirun_program(
        4, ZERORUN_BINARY,
        "--deepspeed 0.14.2 --ds-config " + config_of(c) + " --model " + model_of(c) + " " + c.flag +
            " --steps 1 --compute-scale 0 --quiet -o " + dir + "/m.log --json " + dir + "/m.json --test-fail-rank " +
            std::to_string(rank) + " --test-fail-op " + std::to_string(op) + " --test-fail-mode corrupt");
    EXPECT_EQ(run.code, 1) << run.out;
    json j = json::parse(std::ifstream(dir + "/m.json"));
    for (const auto& r : j.at("ranks")) per_rank.push_back(r.at("wrong").get<int64_t>());
    return j.at("wrong").get<int64_t>();
}

TEST(Runtime3d, WrongDataIsCounted) {
    // Rank 0's first activation sent to stage 1: rank 2 (its pipe peer) alone sees it.
    Case3d pp{"pp", "--pp 2", "pipe.json", "pp2_dp2_z1", 2, 1, 1, 1};
    std::vector<int64_t> w;
    EXPECT_EQ(corrupted_run_wrong(pp, 0, first_op(rank_schedule(pp, 0), zerosim::RuleId::PipeActivationSend), w), 1);
    EXPECT_EQ(w, (std::vector<int64_t>{0, 0, 1, 0}));
    // Rank 1's partial sum in the first tensor-parallel all_reduce: both members of its tensor
    // group {0, 1} get one wrong element, the other group none.
    Case3d tp{"tp", "--tp 2", "tensor.json", "tp2_dp2_z1", 1, 2, 1, 1};
    w.clear();
    EXPECT_EQ(corrupted_run_wrong(tp, 1, first_op(rank_schedule(tp, 1), zerosim::RuleId::TpForwardAllreduce), w), 2);
    EXPECT_EQ(w, (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(Runtime3d, UlyssesStage3IsRefused) {
    Case3d c{"sp3", "--sp 2", "ulysses.json", "sp2_dp2_z3", 1, 1, 2, 1};
    RunResult r = zerorun_test::mpirun_program(4, ZERORUN_BINARY, "--deepspeed 0.14.2 --ds-config " + config_of(c) + " --model " +
                                                                     model_of(c) + " --sp 2 --steps 3 --compute-scale 0 --quiet");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: " + config_of(c) + ": field 'zero_optimization.stage': stage 3 under Ulysses"), std::string::npos)
        << r.out;
    EXPECT_EQ(zerorun_test::count_lines_starting(r.out, "zerorun:"), 1) << r.out;
}

// Beyond the four: four pipeline stages of one rank each at stage 0 (pp4_dp1_z0), and tensor
// parallelism at stage 3 (tp2_dp2_z3: stage 3's gathers and reduce-scatters over each data group).
TEST(Runtime3d, PipelineFourStagesStage0) { run_case({"pp4", "--pp 4", "pipe.json", "pp4_dp1_z0", 4, 1, 1, 1}); }
// --sync-each-op fences every collective on its group; the middle stages hold twice the messages
// of the end ones, so a world fence before each message would deadlock: messages are not fenced.
TEST(Runtime3d, PipelineFourStagesSyncEachOp) {
    run_case({"pp4s", "--pp 4", "pipe.json", "pp4_dp1_z0", 4, 1, 1, 1, "--sync-each-op --op-time skew-free"});
}
TEST(Runtime3d, TensorParallelStage3) { run_case({"tp3", "--tp 2", "tensor.json", "tp2_dp2_z3", 1, 2, 1, 1}); }

// Every rank's schedule from a directory (zerosim schedule --rank all --format json -o DIR/): each
// rank reads DIR/rank<R>.json and the run is the same; one rank's file given to every rank is
// refused by the others, the lowest of them saying why in one line.
TEST(Runtime3d, SchedulesFromADirectory) {
    Case3d c{"dir", "--pp 2", "pipe.json", "pp2_dp2_z1", 2, 1, 1, 1};
    const std::string dir = dir_for(c.name);
    RunResult w = zerorun_test::shell(std::string(ZEROSIM_BINARY) + " schedule --deepspeed 0.14.2 --ds-config " + config_of(c) + " --model " +
                                      model_of(c) + " --world 4 --pp 2 --steps 3 --rank all --format json -o " + dir + "/s/");
    ASSERT_EQ(w.code, 0) << w.out;
    RunResult run = zerorun_test::mpirun_program(4, ZERORUN_BINARY, "--schedule " + dir + "/s --compute-scale 0 --quiet -o " + dir + "/m.log --json " +
                                                                         dir + "/m.json --rank-logs " + dir + "/meas");
    ASSERT_EQ(run.code, 0) << run.out;
    EXPECT_EQ(json::parse(std::ifstream(dir + "/m.json")).at("wrong").get<int64_t>(), 0);
    RunResult pred = zerorun_test::shell(std::string(ZEROSIM_BINARY) + " schedule --deepspeed 0.14.2 --ds-config " + config_of(c) + " --model " +
                                         model_of(c) + " --world 4 --pp 2 --steps 3 --rank all --format deepspeed -o " + dir + "/pred/");
    ASSERT_EQ(pred.code, 0) << pred.out;
    for (int r = 0; r < 4; ++r)
        expect_same_ops(dir + "/meas/rank" + std::to_string(r) + ".log", dir + "/pred/rank" + std::to_string(r) + ".log", r);

    RunResult one = zerorun_test::mpirun_program(4, ZERORUN_BINARY, "--schedule " + dir + "/s/rank2.json --compute-scale 0 --quiet");
    EXPECT_EQ(one.code, 2) << one.out;
    EXPECT_NE(one.out.find("zerorun: error: " + dir + "/s/rank2.json: field 'meta.rank': the schedule is rank 2's program; this is rank 0"),
              std::string::npos)
        << one.out;
    EXPECT_EQ(zerorun_test::count_lines_starting(one.out, "zerorun:"), 1) << one.out;
}

TEST(Runtime3d, ExpertParallelTwo) { run_case({"ep", "--ep 2", "moe.json", "moe_ep2_w4_z2_top1", 1, 1, 1, 2}); }

}  // namespace
