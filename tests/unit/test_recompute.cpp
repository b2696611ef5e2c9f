// Activation checkpointing's recomputed forward (schedule/recompute.cpp, docs/zero-comm.md §10a):
// against the two real DeepSpeed v0.14.2 runs of ../shared/reference/deepspeed-v0.14.2-cpu-ckpt/
// (every rank's log, op for op), and in compute, against FLOPs counted by hand for a model of equal
// layers: forward 2·tokens·h² per layer, backward twice that, the recompute once more.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/schedule_outputs.hpp"
#include "inline_inputs.hpp"
#include "reference_log_ops.hpp"
#include "schedule/check.hpp"
#include "test_helpers.hpp"
#include "timing/engine.hpp"

using namespace zerosim;

namespace {

const std::string kCkpt = "deepspeed-v0.14.2-cpu-ckpt/";

Result<Schedule> reference_schedule(const std::string& run, const Model& m) {
    auto cfg = load_ds_config(test::reference(kCkpt + run + "/ds_config.json"));
    if (!cfg) return cfg.error();
    ScheduleOptions o;
    o.world = 4;
    o.steps = 3;
    return build_schedule(m, cfg.value(), o);
}

Model blocks_model() {
    auto m = load_model(test::config("models/reference-ckpt/blocks.json"));
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

// Every rank's real log against the prediction (on one data-parallel group every rank logs the same ops).
void expect_run_matches(const std::string& run, const Model& m) {
    auto s = reference_schedule(run, m);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_FALSE(check_schedule(s.value(), run));
    const auto ours = logged_ops(s.value());
    for (int r = 0; r < 4; ++r) {
        SCOPED_TRACE(run + " rank " + std::to_string(r));
        auto real = test::real_ops(test::read_file(test::reference(kCkpt + run + "/rank" + std::to_string(r) + ".log")));
        ASSERT_FALSE(real.empty());
        ASSERT_EQ(ours.size(), real.size());
        for (size_t i = 0; i < real.size(); ++i)
            EXPECT_EQ(ours[i].record_key() + " " + ours[i].size_text, real[i].key + " " + real[i].size) << "op " << i;
    }
}

}  // namespace

TEST(RecomputeReference, TorchCheckpointAtStage3MatchesEveryRank) { expect_run_matches("z3_torchckpt", blocks_model()); }

TEST(RecomputeReference, DeepSpeedCheckpointAtStage1MatchesEveryRank) { expect_run_matches("z1_dsckpt", blocks_model()); }

// The same model with nothing checkpointed misses the recompute's stage-3 fetches: the first
// step's backward gathers each block's two Linears once, not twice (8 all_gathers fewer), and
// the trace it checks is shorter.
TEST(RecomputeReference, WithoutTheCheckpointedListTheRecomputeFetchesAreMissing) {
    Model plain = blocks_model();
    plain.checkpointed.clear();
    auto with = reference_schedule("z3_torchckpt", blocks_model());
    auto without = reference_schedule("z3_torchckpt", plain);
    ASSERT_TRUE(with.ok() && without.ok());
    auto count = [](const Schedule& s, RuleId rule, Phase ph) {
        int n = 0;
        for (const Op& op : s.ops) n += op.rule == rule && op.phase == ph && op.step == 0;
        return n;
    };
    EXPECT_EQ(count(with.value(), RuleId::Stage3Fetch, Phase::Backward), 18);    // inp, head, 4 x (fc1, fc2) twice
    EXPECT_EQ(count(without.value(), RuleId::Stage3Fetch, Phase::Backward), 10);
    EXPECT_EQ(count(with.value(), RuleId::ComputeRecompute, Phase::Backward), 8);
    EXPECT_EQ(count(without.value(), RuleId::ComputeRecompute, Phase::Backward), 0);
}

namespace {

// L equal layers of one h x h weight each: with `checkpointed` (or the flag) each layer is a call.
Model equal_layers(int layers, int64_t h, bool listed) {
    std::string params, names;
    for (int k = 0; k < layers; ++k) {
        params += std::string(k ? "," : "") + R"({"name": "layers.)" + std::to_string(k) + R"(.fc.weight", "shape": [)" +
                  std::to_string(h) + "," + std::to_string(h) + "]}";
        names += std::string(k ? "," : "") + "\"layers." + std::to_string(k) + "\"";
    }
    return test::param_list(R"({"seq_len": 1024, "parameters": [)" + params + "]" +
                            (listed ? R"(, "checkpointed": [)" + names + "]" : std::string()) + "}");
}

double step_flops(const Schedule& s, int step) {
    double f = 0;
    for (const Op& op : s.ops)
        if (op.kind == OpKind::Compute && op.compute != ComputeKind::OptimizerStep && op.step == step) f += op.flops;
    return f;
}

}  // namespace

// By hand: tokens = micro batch 4 x 1024; one layer's forward is 2·tokens·h² FLOPs. Without
// checkpointing a step is forward + backward = 3 forwards; with it the backward carries one more.
TEST(RecomputeCompute, CheckpointedLayersCostFourForwardsPerStepAgainstThree) {
    const int layers = 6;
    const int64_t h = 4096;
    const double forward = layers * 2.0 * 4 * 1024 * static_cast<double>(h * h);
    for (int stage : {0, 1, 2, 3}) {
        SCOPED_TRACE("stage " + std::to_string(stage));
        const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
                                        "zero_optimization": {"stage": )" + std::to_string(stage) + "}}");
        const Schedule plain = test::build(equal_layers(layers, h, false), c, 8);
        const Schedule listed = test::build(equal_layers(layers, h, true), c, 8);
        EXPECT_NEAR(step_flops(plain, 0), 3 * forward, 0.01 * 3 * forward);
        EXPECT_NEAR(step_flops(listed, 0), 4 * forward, 0.01 * 4 * forward);
        // The flag checkpoints each transformer block ("layers.k") the same way.
        ScheduleOptions o;
        o.world = 8;
        o.activation_checkpointing = true;
        auto flagged = build_schedule(equal_layers(layers, h, false), c, o);
        ASSERT_TRUE(flagged.ok()) << flagged.error().what();
        EXPECT_NEAR(step_flops(flagged.value(), 0), 4 * forward, 0.01 * 4 * forward);
    }
}

// In time: the compute stream's busy time per step, simulated on dgx-h100, grows by 4/3.
TEST(RecomputeCompute, SimulatedComputeTimeGrowsByAThird) {
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})");
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json", 1);
    ASSERT_TRUE(t.ok()) << t.error().what();
    auto compute_of = [&](bool listed) {
        const Schedule s = test::build(equal_layers(6, 4096, listed), c, 8);
        auto p = simulate(s, t.value(), TimingMode::Overlapped);
        EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().what());
        double busy = 0;   // forward, backward and recompute segments of step 0 (the optimizer step apart)
        for (size_t i = 0; i < s.ops.size(); ++i)
            if (s.ops[i].kind == OpKind::Compute && s.ops[i].compute != ComputeKind::OptimizerStep && s.ops[i].step == 0)
                busy += p->ops[i].duration();
        return busy;
    };
    const double plain = compute_of(false), checkpointed = compute_of(true);
    ASSERT_GT(plain, 0);
    EXPECT_NEAR(checkpointed / plain, 4.0 / 3.0, 0.01 * 4.0 / 3.0);
}

// The backward order at stages 0-2: each layer's recompute right before its own backward.
TEST(RecomputeCompute, EachLayerIsRecomputedRightBeforeItsBackward) {
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}})");
    const Schedule s = test::build(equal_layers(3, 64, true), c, 2);
    std::vector<std::string> seq;
    for (const Op& op : s.ops)
        if (op.kind == OpKind::Compute && op.phase == Phase::Backward)
            seq.push_back(std::string(op.rule == RuleId::ComputeRecompute ? "R " : "B ") + op.module_name);
    const std::vector<std::string> want = {"R layers.2.fc", "B layers.2.fc", "R layers.1.fc", "B layers.1.fc",
                                           "R layers.0.fc", "B layers.0.fc"};
    EXPECT_EQ(seq, want);
}

// A parameter list's "checkpointed" and "parameterless" are checked against its modules.
TEST(RecomputeInputs, UnknownOrMisplacedNamesAreRefused) {
    const std::string params = R"("parameters": [{"name": "a.fc.weight", "shape": [4, 4]}, {"name": "b.weight", "shape": [4, 4]}])";
    auto err = [&](const std::string& extra) {
        auto m = model_from_param_list_json("m.json", "{" + params + "," + extra + "}");
        return m.ok() ? std::string("accepted") : std::string(m.error().what());
    };
    EXPECT_NE(err(R"("checkpointed": ["c"])").find("checkpointed[0]"), std::string::npos) << err(R"("checkpointed": ["c"])");
    EXPECT_NE(err(R"("checkpointed": ["a", "a"])").find("listed twice"), std::string::npos);
    EXPECT_NE(err(R"("parameterless": ["act"])").find("not in forward_order"), std::string::npos);
    EXPECT_NE(err(R"("parameterless": ["a"], "forward_order": ["a.fc", "a", "b"])").find("holds parameters"), std::string::npos);
    EXPECT_EQ(err(R"("parameterless": ["a.act"], "forward_order": ["a.fc", "a.act", "b"], "checkpointed": ["a", "a.act"])"),
              "accepted");
}

// Under tensor parallelism the recompute runs a row-parallel layer's forward all_reduce again
// (Megatron's recompute re-enters the layer's forward, communication and all): the tensor model of
// the 3D reference runs, fc2 (row-parallel) checkpointed, at stages 1 and 3.
TEST(RecomputeCompute, TensorParallelForwardAllReduceRunsAgain) {
    auto whole = load_model(test::config("models/reference-3d/tensor.json"));
    ASSERT_TRUE(whole.ok()) << whole.error().what();
    for (int stage : {1, 3}) {
        SCOPED_TRACE("stage " + std::to_string(stage));
        const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": )" +
                                    std::to_string(stage) + "}}");
        ScheduleOptions o;
        o.world = 4;
        o.layout.tensor = 2;
        auto count = [&](const Model& m, Phase ph) {
            auto s = build_schedule(m, c, o);
            EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
            int n = 0;
            for (const Op& op : s->ops) n += op.rule == RuleId::TpForwardAllreduce && op.phase == ph && op.step == 0;
            return n;
        };
        Model checkpointed = whole.value();
        checkpointed.checkpointed = {"fc2"};
        EXPECT_EQ(count(whole.value(), Phase::Forward), 1);
        EXPECT_EQ(count(whole.value(), Phase::Backward), 0);
        EXPECT_EQ(count(checkpointed, Phase::Forward), 1);
        EXPECT_EQ(count(checkpointed, Phase::Backward), 1);
    }
}

// deepspeed.checkpointing's partition_activations sends nothing on one tensor rank (the run
// z1_dsckpt has the section) and all_gathers over the tensor group otherwise: refused by key there.
TEST(RecomputeInputs, PartitionedActivationsUnderTensorParallelismAreRefusedByKey) {
    auto whole = load_model(test::config("models/reference-3d/tensor.json"));
    ASSERT_TRUE(whole.ok());
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1},
                                    "activation_checkpointing": {"partition_activations": true, "number_checkpoints": 4}})");
    EXPECT_TRUE(c.partition_activations);
    ScheduleOptions o;
    o.world = 4;
    EXPECT_TRUE(build_schedule(whole.value(), c, o).ok());
    o.layout.tensor = 2;
    auto refused = build_schedule(whole.value(), c, o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().field, "activation_checkpointing.partition_activations");
    const DsConfig typo = test::ds(R"({"activation_checkpointing": {"partition_activation": true}})");
    ASSERT_EQ(typo.warnings.size(), 1u);
    EXPECT_NE(typo.warnings[0].find("partition_activation:"), std::string::npos) << typo.warnings[0];
}
