// --zero-init: a model built under deepspeed.zero.Init. The real run
// ../shared/reference/deepspeed-v0.14.2-cpu-variants/z3_zeroinit_w4 (model_built_under_zero_init)
// logs no _broadcast_model and no _zero_init_param broadcast: its parameters were broadcast and
// partitioned as they were built, before the comms logger existed. Reproduced op for op, with the
// phase of each; the construction's broadcasts are timed apart, as start-up.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/comms_log.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "inline_inputs.hpp"
#include "schedule/schedule.hpp"
#include "reference_log_ops.hpp"
#include "test_helpers.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

const std::string kRun = "deepspeed-v0.14.2-cpu-variants/z3_zeroinit_w4";

Schedule zero_init_schedule(bool zero_init) {
    auto run = nlohmann::json::parse(test::read_file(test::reference(kRun + "/run.json")));
    auto cfg = load_ds_config(test::reference(kRun + "/ds_config.json"));
    EXPECT_TRUE(cfg.ok());
    auto model = load_model(test::reference("deepspeed-v0.14.2-cpu-variants/model.json"));
    EXPECT_TRUE(model.ok());
    ScheduleOptions o;
    o.world = run.at("world_size").get<int64_t>();
    o.steps = run.at("steps").get<int>();
    o.zero_init = zero_init;
    auto s = build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

TEST(ZeroInit, ReferenceRunOpForOp) {
    ASSERT_TRUE(nlohmann::json::parse(test::read_file(test::reference(kRun + "/run.json"))).at("model_built_under_zero_init"));
    Schedule s = zero_init_schedule(true);
    EXPECT_TRUE(s.meta.zero_init);
    // The real log's comm op lines and the phase marker in force for each.
    std::vector<std::pair<std::string, std::string>> real;   // (record key + size, phase)
    for (const auto& op : test::real_ops(test::read_file(test::reference(kRun + "/rank0.log"))))
        real.push_back({op.key + " " + op.size, op.phase});
    auto ours = logged_ops(s);
    ASSERT_EQ(ours.size(), real.size());
    for (size_t i = 0; i < real.size(); ++i) {
        SCOPED_TRACE("op " + std::to_string(i));
        EXPECT_EQ(ours[i].record_key() + " " + ours[i].size_text, real[i].first);
        EXPECT_EQ(ours[i].phase, real[i].second);
    }
    // The first logged op is the optimizer set-up's barrier: nothing broadcast at engine start.
    EXPECT_EQ(real.front().first.rfind("barrier | [Caller Func: _create_fp16_partitions_with_defragmentation]", 0), 0u);
}

TEST(ZeroInit, OnlyTheEngineStartBroadcastsGo) {
    Schedule outside = zero_init_schedule(false), inside = zero_init_schedule(true);
    size_t broadcasts = 0;
    for (const auto& op : outside.ops)
        broadcasts += op.rule == RuleId::InitBroadcastModel || op.rule == RuleId::Stage3InitZeroInitParam;
    EXPECT_EQ(broadcasts, 2 * outside.params.size());  // _broadcast_model and Init(module=...), each parameter
    EXPECT_EQ(inside.ops.size() + broadcasts, outside.ops.size());
    for (size_t i = 0; i < inside.ops.size(); ++i) EXPECT_EQ(inside.ops[i].rule, outside.ops[i + broadcasts].rule) << i;
}

TEST(ZeroInit, RefusedBelowStage3) {
    auto m = test::param_list(R"({"parameters": [{"name": "l1.weight", "shape": [8]}]})");
    ScheduleOptions o;
    o.world = 2;
    o.zero_init = true;
    auto s = build_schedule(m, test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})"), o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.error().what()).find("--zero-init"), std::string::npos) << s.error().what();
}

// Construction: one broadcast per parameter from rank 0, one after the other, timed as `bench`
// times a broadcast alone; not part of the engine start or of any step.
TEST(ZeroInit, ConstructionIsTimedApart) {
    Schedule s = zero_init_schedule(true);
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json");
    ASSERT_TRUE(t.ok());
    double want = 0;
    for (const auto& p : s.params)
        want += simulate_single_collective(t.value(), OpKind::Broadcast, static_cast<double>(p.numel * 4), s.meta.world);
    auto pred = simulate(s, t.value(), TimingMode::Overlapped);
    ASSERT_TRUE(pred.ok());
    EXPECT_GT(want, 0);
    EXPECT_NEAR(pred->zero_init_construction_s, want, want * 1e-9);
    auto outside = simulate(zero_init_schedule(false), t.value(), TimingMode::Overlapped);
    EXPECT_LT(outside->zero_init_construction_s, 0);
    EXPECT_LT(pred->init_s, outside->init_s);  // the engine start lost its broadcasts
}

}  // namespace
