// DeepSpeed's pipeline engine under ZeRO 0/1 (sim/schedule/pipeline.cpp): every rank of the real
// DeepSpeed v0.14.2 runs pp2_dp2_z1 and pp4_dp1_z0 op for op, the 1F1B instruction order worked
// out by hand from runtime/pipe/schedule.py TrainSchedule, the stage cuts of partition_method
// "parameters" and "uniform" on hand-made layer lists, and the sizes and groups of the engine's own
// collectives (docs/zero-comm.md, "The pipeline engine").
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <utility>

#include "reference_3d.hpp"
#include "schedule/pipe_schedule.hpp"

using namespace zerosim;

namespace {

// Micro batches of 2 samples; `extra` adds top-level keys, `zero_extra` keys of zero_optimization.
DsConfig pipe_config(int stage, const std::string& extra = "", int accumulation = 4, const std::string& zero_extra = "") {
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": )" +
                                            std::to_string(accumulation) + R"(, "zero_optimization": {"stage": )" +
                                            std::to_string(stage) + zero_extra + "}" + extra + "}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

Model parse_model(const std::string& text) {
    auto m = model_from_param_list_json("hand.json", text);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

Result<Schedule> pipe_schedule(const Model& m, const DsConfig& c, int64_t world, int64_t pp, int64_t rank,
                               PipePartition how = PipePartition::Parameters) {
    ScheduleOptions o;
    o.world = world;
    o.steps = 1;
    o.layout.pipe = pp;
    o.rank = rank;
    o.pp_partition = how;
    auto s = build_schedule(m, c, o);
    if (s.ok()) {   // every schedule built here is one the runtime accepts
        auto bad = check_schedule(s.value(), "pipe");
        EXPECT_FALSE(bad) << bad->what();
    }
    return s;
}

using test::ops_of;

// "Send(m0) Recv(m1) ..." for the instructions of one stage that move data between stages, and
// "F0 B0" for its passes, step by step ("|" between steps).
std::string stage_program(int64_t micro_batches, int64_t stages, int64_t stage) {
    std::string out;
    bool first = true;
    for (const auto& cmds : pipe_train_schedule(micro_batches, stages, stage)) {
        if (!std::exchange(first, false)) out += " |";
        for (const auto& c : cmds) {
            std::string m = c.micro >= 0 ? std::to_string(c.micro) : "";
            switch (c.instr) {
                case PipeInstr::SendActivation: out += " SA" + m; break;
                case PipeInstr::RecvActivation: out += " RA" + m; break;
                case PipeInstr::SendGrad: out += " SG" + m; break;
                case PipeInstr::RecvGrad: out += " RG" + m; break;
                case PipeInstr::ForwardPass: out += " F" + m; break;
                case PipeInstr::BackwardPass: out += " B" + m; break;
                case PipeInstr::LoadMicroBatch: out += " L" + m; break;
                default: out += std::string(" ") + pipe_instr_name(c.instr);
            }
        }
    }
    return out;
}

}  // namespace

TEST(Pipe3dReference, Pp2Dp2Zero1EveryRankOpForOp) { test::expect_3d_run_matches("pp2_dp2_z1", "pipe"); }
TEST(Pipe3dReference, Pp4Dp1Zero0EveryRankOpForOp) { test::expect_3d_run_matches("pp4_dp1_z0", "pipe"); }

// Two stages, four micro batches, from schedule.py 197-298 by hand. Stage 0 (even) runs forwards on
// even steps (micro batch step/2) and backwards on odd steps (micro batch (step-1)/2 - 1); stage 1
// (odd) forwards on odd steps ((step-1)/2) and backwards on even steps (step/2 - 1). A forward step
// first sends the previous backward's gradient back and receives its input; a backward step first
// receives its gradient and sends the previous forward's output on. 10 steps = 2 * (4 + 2 - 1).
TEST(PipeSchedule, TwoStagesFourMicroBatchesByHand) {
    EXPECT_EQ(stage_program(4, 2, 0),
              " L0 F0 | SA0 | L1 F1 | RG0 SA1 B0 | L2 F2 | RG1 SA2 B1 | L3 F3 | RG2 SA3 B2 | | RG3 B3 ReduceTiedGrads "
              "ReduceGrads OptimizerStep");
    EXPECT_EQ(stage_program(4, 2, 1),
              " | RA0 L0 F0 | B0 | SG0 RA1 L1 F1 | B1 | SG1 RA2 L2 F2 | B2 | SG2 RA3 L3 F3 | B3 | SG3 ReduceTiedGrads "
              "ReduceGrads OptimizerStep");
}

// Four stages: the first stage fills the pipeline with three forwards before its first backward
// (the order pp4_dp1_z0's rank 0 logs: send, send, send, recv, send, recv, recv, recv).
TEST(PipeSchedule, FourStagesFirstStageWarmsUpWithThreeForwards) {
    std::string p2p;
    for (const auto& cmds : pipe_train_schedule(4, 4, 0))
        for (const auto& c : cmds)
            if (c.instr == PipeInstr::SendActivation || c.instr == PipeInstr::RecvGrad)
                p2p += c.instr == PipeInstr::SendActivation ? "S" : "R";
    EXPECT_EQ(p2p, "SSSRSRRR");
}

// Whatever the stages, data-parallel ranks and micro batches, every rank's sends to a peer are that
// peer's receives from it, in the same order and of the same size: the programs cannot deadlock.
TEST(PipeSchedule, EverySendMeetsItsReceive) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    const std::vector<std::tuple<int64_t, int64_t, int>> layouts{{2, 1, 1}, {2, 2, 3}, {4, 1, 2}, {4, 2, 7}, {4, 1, 4}};
    for (auto [pp, dp, micro] : layouts) {
        SCOPED_TRACE("pp " + std::to_string(pp) + " dp " + std::to_string(dp) + " micro batches " + std::to_string(micro));
        std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> sent, received;   // (from, to) -> bytes
        for (int64_t r = 0; r < pp * dp; ++r) {
            auto s = pipe_schedule(m, pipe_config(1, "", micro), pp * dp, pp, r);
            ASSERT_TRUE(s.ok()) << s.error().what();
            for (const auto& op : s.value().ops) {
                if (op.kind == OpKind::Send) sent[{r, op.peer}].push_back(op.bytes());
                if (op.kind == OpKind::Recv) received[{op.peer, r}].push_back(op.bytes());
            }
        }
        EXPECT_EQ(sent, received);
        EXPECT_EQ(sent.size(), static_cast<size_t>(2 * (pp - 1) * dp));
    }
}

// The engine's own collectives on pp 2 x dp 2 (ranks 0, 1 stage 0; 2, 3 stage 1): the parameter
// counts (2 int64) over the model-parallel group, the 4-byte fp32 warm-up to the same data index one
// stage over, the loss averaged over the last stage's data group (one fp32) and broadcast as two
// fp32 from the last stage (group rank 1) over the pipe group.
TEST(PipeEngine, StartUpAndLossCollectives) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    for (int64_t r : {1, 3}) {
        auto s = pipe_schedule(m, pipe_config(1), 4, 2, r);
        ASSERT_TRUE(s.ok()) << s.error().what();
        auto init = ops_of(s.value(), RuleId::PipeInitParamCount);
        ASSERT_EQ(init.size(), 1u);
        EXPECT_EQ(init[0]->bytes(), 16);
        EXPECT_EQ(init[0]->group, GroupKind::ModelParallel);
        auto warm = ops_of(s.value(), r == 1 ? RuleId::PipeWarmupSend : RuleId::PipeWarmupRecv);
        ASSERT_EQ(warm.size(), 1u);
        EXPECT_EQ(warm[0]->bytes(), 4);
        EXPECT_EQ(warm[0]->peer, r == 1 ? 3 : 1);
        auto avg = ops_of(s.value(), RuleId::PipeLossAllreduce);
        ASSERT_EQ(avg.size(), r == 3 ? 1u : 0u);
        if (r == 3) {
            EXPECT_EQ(avg[0]->group, GroupKind::Dp);
        }
        auto bcast = ops_of(s.value(), RuleId::PipeLossBroadcast);
        ASSERT_EQ(bcast.size(), 1u);
        EXPECT_EQ(bcast[0]->bytes(), 8);
        EXPECT_EQ(bcast[0]->group, GroupKind::Pipe);
        EXPECT_EQ(bcast[0]->root, 1);
    }
}

// bf16 without ZeRO runs DeepSpeed's BF16 optimizer: activations and the averaged loss in bf16,
// the warm-up scalar and the broadcast losses still fp32, and the optimizer's step sums the norm
// over the model-parallel group because the engine hands it the grid as mpu (utils.py
// get_global_norm_of_tensors 888). Stage 1 receives [2, 256] per micro batch: 1 KB in bf16.
TEST(PipeEngine, Bf16OptimizerUnderThePipeline) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    auto s = pipe_schedule(m, pipe_config(0, R"(, "bf16": {"enabled": true})"), 4, 2, 3);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto recv = ops_of(s.value(), RuleId::PipeActivationRecv);
    ASSERT_EQ(recv.size(), 4u);
    EXPECT_EQ(recv[0]->bytes(), 1024);
    EXPECT_EQ(ops_of(s.value(), RuleId::PipeWarmupRecv)[0]->bytes(), 4);
    auto norm = ops_of(s.value(), RuleId::MpuNormAllreduce);
    ASSERT_EQ(norm.size(), 1u);
    EXPECT_EQ(norm[0]->caller, "get_global_norm_of_tensors");
    EXPECT_EQ(norm[0]->group, GroupKind::ModelParallel);
    EXPECT_EQ(ops_of(s.value(), RuleId::PipeLossAllreduce)[0]->bytes(), 2);
    EXPECT_EQ(ops_of(s.value(), RuleId::PipeLossBroadcast)[0]->bytes(), 8);
}

// ZeRO-1 under a PipelineModule never overlaps its reduction (engine.py 1512-1515): overlap_comm
// true gives the same ops as false, one bucket all_reduce at ReduceGrads.
TEST(PipeEngine, OverlapCommIsOffUnderThePipeline) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    auto with = pipe_schedule(m, pipe_config(1, "", 4, R"(, "overlap_comm": true)"), 4, 2, 0);
    auto without = pipe_schedule(m, pipe_config(1), 4, 2, 0);
    ASSERT_TRUE(with.ok()) << with.error().what();
    ASSERT_TRUE(without.ok());
    auto a = logged_ops(with.value()), b = logged_ops(without.value());
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].record_key() + a[i].size_text, b[i].record_key() + b[i].size_text);
    EXPECT_EQ(ops_of(with.value(), RuleId::Stage12FlushMultiRankAllreduce).size(), 1u);
}

// fp16 without ZeRO: its optimizer's model-parallel checks are not modelled, so it is refused
// rather than answered without them; fp16 with ZeRO-1 adds has_overflow and its model-parallel twin.
TEST(PipeEngine, Fp16WithoutZeroRefusedWithZeroOneChecksOverflow) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    auto z0 = pipe_schedule(m, pipe_config(0, R"(, "fp16": {"enabled": true})"), 4, 2, 0);
    ASSERT_FALSE(z0.ok());
    EXPECT_EQ(z0.error().field, "fp16.enabled");
    auto z1 = pipe_schedule(m, pipe_config(1, R"(, "fp16": {"enabled": true})"), 4, 2, 0);
    ASSERT_TRUE(z1.ok()) << z1.error().what();
    EXPECT_EQ(ops_of(z1.value(), RuleId::StepOverflowCheck).size(), 1u);
    EXPECT_EQ(ops_of(z1.value(), RuleId::ZeroModelParallelAllreduce).size(), 2u);   // the flag and the norm
}

// pipe/engine.py 74-75: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
TEST(PipeEngine, RefusesZeroStagesTwoAndThree) {
    const Model m = parse_model(test::read_file(test::reference_3d_model("pipe")));
    for (int stage : {2, 3}) {
        auto s = pipe_schedule(m, pipe_config(stage), 4, 2, 0);
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.error().field, "zero_optimization.stage");
    }
}

// partition_method "parameters" (runtime/utils.py partition_balanced) minimises the difference
// between the heaviest and the lightest stage and, among equal cuts, takes the later one (`>=`,
// 608); "uniform" cuts layer counts. Layers [l0: 2 parameters, act1: 0, act2: 0, l3: 2] on two
// stages: every cut after l0 costs 0, the last one wins, [0, 3, 4]; uniform gives [0, 2, 4]. The
// first stage sends its last layer's output: act2's [4] or act1's [8] per sample, 2 samples.
TEST(PipePartition, ParametersTakeTheLaterOfEqualCutsUniformCountsLayers) {
    const Model m = parse_model(R"({"name": "cuts", "parameters": [
        {"name": "l0.weight", "shape": [2]}, {"name": "l3.weight", "shape": [2]}],
        "pipeline": {"layers": [{"name": "l0", "output": [8]}, {"name": "act1", "output": [8]},
                                {"name": "act2", "output": [4]}, {"name": "l3", "output": [3]}]}})");
    for (auto [how, floats] : {std::pair{PipePartition::Parameters, 4}, std::pair{PipePartition::Uniform, 8}}) {
        auto first = pipe_schedule(m, pipe_config(0), 2, 2, 0, how);
        ASSERT_TRUE(first.ok()) << first.error().what();
        auto sends = ops_of(first.value(), RuleId::PipeActivationSend);
        ASSERT_EQ(sends.size(), 4u);
        EXPECT_EQ(sends[0]->bytes(), 2 * floats * 4);
        EXPECT_EQ(sends[0]->peer, 1);
        ASSERT_EQ(first.value().params.size(), 1u);
        EXPECT_EQ(first.value().params[0].name, "l0.weight");
    }
}

// Weights [8, 1, 1, 1, 1] on two stages: cutting after the first layer leaves 8 against 4 (cost 4),
// every later cut costs more, so "parameters" gives [0, 1, 5]; "uniform" gives the first stage
// three layers, [0, 3, 5].
TEST(PipePartition, ParametersBalanceTheStagesUniformDoesNot) {
    const Model m = parse_model(R"({"name": "heavy", "parameters": [
        {"name": "a.weight", "shape": [8]}, {"name": "b.weight", "shape": [1]}, {"name": "c.weight", "shape": [1]},
        {"name": "d.weight", "shape": [1]}, {"name": "e.weight", "shape": [1]}],
        "pipeline": {"layers": [{"name": "a", "output": [1]}, {"name": "b", "output": [1]}, {"name": "c", "output": [1]},
                                {"name": "d", "output": [1]}, {"name": "e", "output": [1]}]}})");
    using Names = std::vector<std::string>;
    for (auto [how, want] : {std::pair{PipePartition::Parameters, Names{"a.weight"}},
                             std::pair{PipePartition::Uniform, Names{"a.weight", "b.weight", "c.weight"}}}) {
        auto s = pipe_schedule(m, pipe_config(0), 2, 2, 0, how);
        ASSERT_TRUE(s.ok()) << s.error().what();
        Names got;
        for (const auto& p : s.value().params) got.push_back(p.name);
        EXPECT_EQ(got, want);
    }
}

// A TiedLayerSpec's module is named tied_modules.<key> (module.py 237): at ReduceTiedGrads, after
// the last backward and before ReduceGrads, the stage holding it all_reduces the tied weight's
// gradient (engine.py _exec_reduce_tied_grads 266-281), logged even when the tie spans one stage.
// Layers [tied_modules.embed: 40 parameters, fc: 16] cut [0, 1, 2]: stage 0 holds the tie.
TEST(PipeEngine, TiedWeightGradientAllReducedBeforeTheReduction) {
    const Model m = parse_model(R"({"name": "tied", "parameters": [
        {"name": "tied_modules.embed.weight", "shape": [10, 4]}, {"name": "fc.weight", "shape": [4, 4]}],
        "pipeline": {"layers": [{"name": "tied_modules.embed", "output": [4]}, {"name": "fc", "output": [4]}]}})");
    for (int64_t r : {0, 1}) {
        auto s = pipe_schedule(m, pipe_config(0), 2, 2, r);
        ASSERT_TRUE(s.ok()) << s.error().what();
        auto tied = ops_of(s.value(), RuleId::PipeTiedGradAllreduce);
        ASSERT_EQ(tied.size(), r == 0 ? 1u : 0u);
        if (r != 0) continue;
        EXPECT_EQ(tied[0]->bytes(), 40 * 4);
        EXPECT_EQ(tied[0]->caller, "_exec_reduce_tied_grads");
        auto bucket = ops_of(s.value(), RuleId::Stage0BucketAllreduce);
        ASSERT_EQ(bucket.size(), 1u);
        EXPECT_LT(tied[0]->id, bucket[0]->id);
        EXPECT_GT(tied[0]->id, ops_of(s.value(), RuleId::PipeGradRecv).back()->id);
    }
}

// A TiedLayerSpec used at both ends (runtime/pipe/module.py 233-246): weights [80, 64, 80] cut
// [0, 2, 3], so both stages hold tied_modules.embed.weight (10 x 8 fp32) and each all_reduces its
// 320-byte gradient at ReduceTiedGrads.
TEST(PipeEngine, TiedLayerOnTwoStagesReducesOnBoth) {
    const Model m = parse_model(R"({"name": "tied2", "parameters": [
        {"name": "tied_modules.embed.weight", "shape": [10, 8]}, {"name": "fc.weight", "shape": [8, 8]}],
        "pipeline": {"layers": [{"name": "tied_modules.embed", "output": [8]}, {"name": "fc", "output": [8]},
                                {"name": "tied_modules.embed", "output": [10]}]}})");
    for (int64_t r : {0, 1}) {
        auto s = pipe_schedule(m, pipe_config(1), 2, 2, r);
        ASSERT_TRUE(s.ok()) << s.error().what();
        auto tied = ops_of(s.value(), RuleId::PipeTiedGradAllreduce);
        ASSERT_EQ(tied.size(), 1u) << "rank " << r;
        EXPECT_EQ(tied[0]->bytes(), 320);
    }
}
