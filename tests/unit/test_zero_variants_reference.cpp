// ZeRO++ (hpZ, qwZ, qgZ), MiCS and stage-3 offload against the real DeepSpeed v0.14.2 runs of
// ../shared/reference/deepspeed-v0.14.2-cpu-variants: every comms-logger line of rank 0, op for op
// (record, caller, size as printed) and in the phase the run's markers put it, as
// test_stage3_zero_init.cpp compares z3_zeroinit_w4. Each run's run.json gives the world, the
// steps and the ranks per node DeepSpeed saw (qgZ's node groups).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/comms_log.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/check.hpp"
#include "schedule/schedule.hpp"
#include "reference_log_ops.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

const std::string kDir = "deepspeed-v0.14.2-cpu-variants/";

Schedule reference_schedule(const std::string& run_name) {
    auto run = nlohmann::json::parse(test::read_file(test::reference(kDir + run_name + "/run.json")));
    auto cfg = load_ds_config(test::reference(kDir + run_name + "/ds_config.json"));
    EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().what());
    auto model = load_model(test::reference(kDir + "model.json"));
    EXPECT_TRUE(model.ok());
    ScheduleOptions o;
    o.world = run.at("world_size").get<int64_t>();
    o.steps = run.at("steps").get<int>();
    o.gpus_per_node = run.at("gpus_per_node_as_deepspeed_sees_it").get<int64_t>();
    o.zero_init = run.value("model_built_under_zero_init", false);
    auto s = build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

// The real log's comm-op lines (record key + printed size) with the phase marker in force.
std::vector<std::pair<std::string, std::string>> real_ops(const std::string& run_name) {
    std::vector<std::pair<std::string, std::string>> real;
    for (const auto& op : test::real_ops(test::read_file(test::reference(kDir + run_name + "/rank0.log"))))
        real.push_back({op.key + " " + op.size, op.phase});
    return real;
}

void expect_matches_run(const std::string& run_name) {
    Schedule s = reference_schedule(run_name);
    EXPECT_FALSE(check_schedule(s, run_name)) << check_schedule(s, run_name)->what();
    auto real = real_ops(run_name);
    auto ours = logged_ops(s);
    ASSERT_FALSE(real.empty());
    ASSERT_EQ(ours.size(), real.size()) << run_name;
    for (size_t i = 0; i < real.size(); ++i) {
        SCOPED_TRACE(run_name + " op " + std::to_string(i));
        EXPECT_EQ(ours[i].record_key() + " " + ours[i].size_text, real[i].first);
        EXPECT_EQ(ours[i].phase, real[i].second);
    }
}

TEST(ZeroVariantsReference, HpzOpForOp) { expect_matches_run("hpz2_r0p0_w4"); }
TEST(ZeroVariantsReference, QwzOpForOp) { expect_matches_run("qwz_w4"); }
TEST(ZeroVariantsReference, QgzOpForOp) { expect_matches_run("qgz_l2_w4"); }
TEST(ZeroVariantsReference, MicsOpForOp) { expect_matches_run("mics2_w4"); }
TEST(ZeroVariantsReference, OffloadOptimizerOpForOp) { expect_matches_run("z3_offload_opt_w4"); }
TEST(ZeroVariantsReference, ZeroInitOpForOp) { expect_matches_run("z3_zeroinit_w4"); }

// The IR keeps what the log leaves out: MiCS's parameter gathers, on the shard group.
TEST(ZeroVariantsReference, MicsFetchesAreInTheIrButNotLogged) {
    Schedule s = reference_schedule("mics2_w4");
    size_t unlogged = 0;
    for (const auto& op : s.ops) {
        if (op.logged) continue;
        ++unlogged;
        EXPECT_EQ(op.kind, OpKind::AllGather);
        EXPECT_EQ(op.group, GroupKind::MicsShard);
        EXPECT_TRUE(op.rule == RuleId::Stage3Fetch || op.rule == RuleId::Stage3Prefetch) << op.rule;
    }
    EXPECT_GT(unlogged, 0u);
    ASSERT_EQ(s.meta.group_size(GroupKind::MicsShard), 2);
    EXPECT_EQ(s.meta.groups[0].members, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
    EXPECT_EQ(s.meta.groups[1].members, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
}

// The IR survives its JSON form with groups and the not-logged mark.
TEST(ZeroVariantsReference, JsonRoundTripKeepsGroups) {
    for (const char* run : {"mics2_w4", "qgz_l2_w4", "hpz2_r0p0_w4", "qwz_w4"}) {
        Schedule s = reference_schedule(run);
        std::ostringstream out;
        write_schedule_json(out, s);
        auto back = parse_schedule_json(out.str(), run);
        ASSERT_TRUE(back.ok()) << back.error().what();
        ASSERT_EQ(back->ops.size(), s.ops.size());
        for (size_t i = 0; i < s.ops.size(); ++i) {
            EXPECT_EQ(back->ops[i].group, s.ops[i].group);
            EXPECT_EQ(back->ops[i].logged, s.ops[i].logged);
            EXPECT_EQ(back->ops[i].kind, s.ops[i].kind);
        }
        EXPECT_EQ(back->meta.groups.size(), s.meta.groups.size());
    }
}

}  // namespace
