// MoE under expert parallelism against the real DeepSpeed v0.14.2 run moe_ep2_w4_z2_top1 (world 4,
// ep 2, ZeRO-2, top-1 with token dropping): every rank op for op, and the process group of each op in
// the IR (the log does not print it).
#include <gtest/gtest.h>

#include "reference_3d.hpp"

using namespace zerosim;

namespace {

const std::string kRun = "moe_ep2_w4_z2_top1";

Schedule reference_rank(int64_t rank) {
    auto s = test::reference_3d_schedule(kRun, "moe", rank);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.ok() ? s.value() : Schedule{};
}

// (elements, group) of every op of `rule` in the first step.
std::vector<std::pair<int64_t, GroupKind>> first_step(const Schedule& s, RuleId rule) {
    std::vector<std::pair<int64_t, GroupKind>> out;
    for (const auto& op : s.ops)
        if (op.rule == rule && op.step <= 0) out.push_back({op.elements, op.group});
    return out;
}

}  // namespace

TEST(Moe3dReference, Ep2Zero2Top1EveryRankOpForOp) { test::expect_3d_run_matches(kRun, "moe"); }

// Each expert parameter broadcasts over its expert-data group, every other one over the data group
// (engine.py 1068-1077): 3 dense, 8 expert (two local experts of 4), 2 dense.
TEST(Moe3dReference, BroadcastsExpertsOverTheExpertDataGroup) {
    Schedule s = reference_rank(1);
    auto b = first_step(s, RuleId::InitBroadcastModel);
    ASSERT_EQ(b.size(), 13u);
    for (size_t i = 0; i < b.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(b[i].second, i >= 3 && i < 11 ? GroupKind::ExpertData : GroupKind::Dp);
    }
    EXPECT_EQ(s.meta.num_groups, 2);
}

// Per step: 4 all_to_all over the expert group; the dense bucket (fc_in 4160 + gate 256 + head 650
// = 5066 elements) over the data group, then the experts' (2 x 16576) over the expert-data group;
// two grad norms over the data group and the expert average over the expert-data group; the
// partitions gathered, 5072 / 4 over the data group and 33152 / 2 over the expert-data group.
TEST(Moe3dReference, EachOpRunsOverItsGroup) {
    Schedule s = reference_rank(2);
    using P = std::vector<std::pair<int64_t, GroupKind>>;
    EXPECT_EQ(first_step(s, RuleId::MoeAllToAll), P(4, {4 * 8 * 64, GroupKind::Expert}));
    EXPECT_EQ(first_step(s, RuleId::Stage12FlushMultiRankAllreduce), (P{{5066, GroupKind::Dp}, {33152, GroupKind::ExpertData}}));
    EXPECT_EQ(first_step(s, RuleId::Stage12StepGradNorm), (P{{1, GroupKind::Dp}, {1, GroupKind::Dp}}));
    EXPECT_EQ(first_step(s, RuleId::MoeExpertGradNorm), (P{{1, GroupKind::ExpertData}}));
    EXPECT_EQ(first_step(s, RuleId::Stage12StepAllgatherPartitions), (P{{1268, GroupKind::Dp}, {16576, GroupKind::ExpertData}}));
    EXPECT_TRUE(first_step(s, RuleId::MoeCapacityAllreduce).empty());   // drop_tokens: no capacity all_reduce
}
