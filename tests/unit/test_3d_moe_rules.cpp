// MoE rules worked out by hand (docs/zero-comm.md "MoE"; ../notes' derivation from DeepSpeed v0.14.2's
// moe/sharded_moe.py): the capacity and all_to_all sizes of top-1 and top-2 gating with and without
// token dropping, the groups of stage 0 and of one-rank expert-data groups, the optimizer groups
// DeepSpeed cuts the experts into, and DeepSpeed's refusals.
#include <gtest/gtest.h>

#include "inline_inputs.hpp"
#include "reference_3d.hpp"
#include "schedule/schedule.hpp"

using namespace zerosim;

namespace {

struct MoeCase {
    int64_t experts = 4, top_k = 1, min_capacity = 4, seq_len = 16, micro = 2, stage = 2, ep = 2, world = 4;
    std::string capacity_factor = "1.0", drop = "true", extra_zero = "", precision = "";
};

// fc_in -> MoE(hidden 64, experts Linear(64,128)-ReLU-Linear(128,64)) -> head, as the reference run.
Model moe_model(const MoeCase& c) {
    std::string params = R"({"name": "fc_in.weight", "shape": [64, 64]}, {"name": "fc_in.bias", "shape": [64]},
        {"name": "moe.deepspeed_moe.gate.wg.weight", "shape": [)" + std::to_string(c.experts) + ", 64]}";
    for (int64_t e = 0; e < c.experts; ++e) {
        const std::string x = "moe.deepspeed_moe.experts.deepspeed_experts." + std::to_string(e);
        params += R"(, {"name": ")" + x + R"(.0.weight", "shape": [128, 64]}, {"name": ")" + x + R"(.0.bias", "shape": [128]},
            {"name": ")" + x + R"(.2.weight", "shape": [64, 128]}, {"name": ")" + x + R"(.2.bias", "shape": [64]})";
    }
    params += R"(, {"name": "head.weight", "shape": [10, 64]}, {"name": "head.bias", "shape": [10]})";
    return test::param_list(R"({"name": "hand-moe", "seq_len": )" + std::to_string(c.seq_len) + R"(, "parameters": [)" + params +
                            R"(], "moe": [{"module": "moe", "experts": "moe.deepspeed_moe.experts.deepspeed_experts",
        "num_local_experts": )" + std::to_string(c.experts) + R"(, "num_experts_per_tok": )" + std::to_string(c.top_k) +
                            R"(, "drop_tokens": )" + c.drop + R"(, "capacity_factor": )" + c.capacity_factor +
                            R"(, "min_capacity": )" + std::to_string(c.min_capacity) + R"(, "hidden": 64}]})");
}

Result<Schedule> try_build(const MoeCase& c, int64_t rank = 0) {
    DsConfig cfg = test::ds(R"({"train_micro_batch_size_per_gpu": )" + std::to_string(c.micro) + c.precision +
                            R"(, "zero_optimization": {"stage": )" + std::to_string(c.stage) + c.extra_zero + "}}");
    ScheduleOptions o;
    o.world = c.world;
    o.steps = 1;
    o.layout.expert = c.ep;
    o.rank = rank;
    return build_schedule(moe_model(c), cfg, o);
}

Schedule build(const MoeCase& c, int64_t rank = 0) {
    auto s = try_build(c, rank);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.ok() ? s.value() : Schedule{};
}

using test::ops_of;

// Elements of each all_to_all, after checking there are four of equal size on the expert group.
int64_t all_to_all_elements(const MoeCase& c) {
    const Schedule s = build(c);   // the ops point into it
    auto a2a = ops_of(s, RuleId::MoeAllToAll);
    EXPECT_EQ(a2a.size(), 4u);
    if (a2a.empty()) return -1;
    for (const Op* op : a2a) {
        EXPECT_EQ(op->elements, a2a[0]->elements);
        EXPECT_EQ(op->group, GroupKind::Expert);
        EXPECT_EQ(op->caller, "forward");
    }
    return a2a[0]->elements;
}

std::string refusal_field(const MoeCase& c) {
    auto s = try_build(c);
    EXPECT_FALSE(s.ok());
    return s.ok() ? "" : s.error().field;
}

}  // namespace

// Tokens S = micro 2 x seq 16 = 32; C = max(ceil(32 / 4 x 1.0), 4) = 8; [4 experts, 8, 64] fp32 =
// 2048 elements, 8192 bytes ("8.0 KB", the reference run's size).
TEST(MoeRules, Top1CapacityFromTokensAndFactor) { EXPECT_EQ(all_to_all_elements(MoeCase{}), 4 * 8 * 64); }

// top2gating doubles the factor: C = max(ceil(8 x 2.0), 4) = 16 -> 4 x 16 x 64.
TEST(MoeRules, Top2DoublesTheCapacity) {
    MoeCase c;
    c.top_k = 2;
    EXPECT_EQ(all_to_all_elements(c), 4 * 16 * 64);
}

// S = 1 x 8 = 8: ceil(8 / 4 x 1.0) = 2 is below min_capacity 4, so C = 4 -> 4 x 4 x 64.
TEST(MoeRules, MinCapacityRaisesASmallCapacity) {
    MoeCase c;
    c.micro = 1;
    c.seq_len = 8;
    EXPECT_EQ(all_to_all_elements(c), 4 * 4 * 64);
}

// S = 2 x 15 = 30: 30 / 4 = 7.5, x 1.25 = 9.375, ceil 10 -> 4 x 10 x 64.
TEST(MoeRules, FractionalCapacityRoundsUp) {
    MoeCase c;
    c.seq_len = 15;
    c.capacity_factor = "1.25";
    EXPECT_EQ(all_to_all_elements(c), 4 * 10 * 64);
}

// S = 2 x 25 = 50, 50 / 4 = 12.5, factor 1.2 as torch's float32: 1.2f = 1.20000005, 12.5 x 1.2f =
// 15.0000006, which rounds to the float 15.00000095 (a float step at 15 is 9.5e-7): C = 16. In double
// arithmetic 12.5 x 1.2 is 15.0 and C would be 15.
TEST(MoeRules, CapacityIsComputedInFloat32) {
    MoeCase c;
    c.seq_len = 25;
    c.capacity_factor = "1.2";
    EXPECT_EQ(all_to_all_elements(c), 4 * 16 * 64);
}

// bf16 activations: the same elements, 2 bytes each (dispatch_mask.type_as(input)).
TEST(MoeRules, AllToAllTakesTheActivationsDtype) {
    MoeCase c;
    c.precision = R"(, "bf16": {"enabled": true})";
    Schedule s = build(c);
    auto a2a = ops_of(s, RuleId::MoeAllToAll);
    ASSERT_EQ(a2a.size(), 4u);
    EXPECT_EQ(a2a[0]->dtype, DType::BF16);
    EXPECT_EQ(a2a[0]->elements, 4 * 8 * 64);
}

// Without token dropping each forward first all_reduces (MAX) the int64 capacity over the expert
// group, logged by top1gating / top2gating (8 bytes); the capacity is the data's, modelled by its
// bound, all S = 32 tokens: [4, 32, 64].
TEST(MoeRules, NoDropAllReducesTheCapacityFirst) {
    for (int64_t k : {1, 2}) {
        SCOPED_TRACE(k);
        MoeCase c;
        c.top_k = k;
        c.drop = "false";
        Schedule s = build(c);
        auto cap = ops_of(s, RuleId::MoeCapacityAllreduce);
        ASSERT_EQ(cap.size(), 1u);
        EXPECT_EQ(cap[0]->caller, k == 1 ? "top1gating" : "top2gating");
        EXPECT_EQ(cap[0]->dtype, DType::INT64);
        EXPECT_EQ(cap[0]->elements, 1);
        EXPECT_EQ(cap[0]->redop, ReduceOp::Max);
        EXPECT_EQ(cap[0]->group, GroupKind::Expert);
        auto a2a = ops_of(s, RuleId::MoeAllToAll);
        ASSERT_EQ(a2a.size(), 4u);
        EXPECT_LT(cap[0]->id, a2a[0]->id);
        EXPECT_EQ(a2a[0]->elements, 4 * 32 * 64);
    }
}

// Stage 0 (engine.py buffered_allreduce_fallback): the dense gradients (4160 + 256 + 650 = 5066)
// over the data group, then the two local experts' (2 x 16576) over the expert-data group; no norm,
// no gather. The broadcasts of the experts go over the expert-data group too.
TEST(MoeRules, Stage0ReducesDenseThenExpertGradients) {
    MoeCase c;
    c.stage = 0;
    Schedule s = build(c);
    auto red = ops_of(s, RuleId::Stage0BucketAllreduce);
    ASSERT_EQ(red.size(), 2u);
    EXPECT_EQ(red[0]->elements, 5066);
    EXPECT_EQ(red[0]->group, GroupKind::Dp);
    EXPECT_EQ(red[1]->elements, 2 * 16576);
    EXPECT_EQ(red[1]->group, GroupKind::ExpertData);
    EXPECT_TRUE(ops_of(s, RuleId::MoeExpertGradNorm).empty());
    EXPECT_TRUE(ops_of(s, RuleId::Stage12StepAllgatherPartitions).empty());
}

// ep 4 on world 4: one expert per rank and one-rank expert-data groups. DeepSpeed still logs the
// experts' broadcasts, their bucket all_reduce (16576 elements) and the expert norm average on that
// group, but all_gather_into_tensor_dp_groups skips a one-rank group: only the dense gather is left.
TEST(MoeRules, OneRankExpertDataGroupSkipsOnlyTheGather) {
    MoeCase c;
    c.ep = 4;
    Schedule s = build(c, 3);
    auto red = ops_of(s, RuleId::Stage12FlushMultiRankAllreduce);
    ASSERT_EQ(red.size(), 2u);
    EXPECT_EQ(red[1]->elements, 16576);
    EXPECT_EQ(red[1]->group, GroupKind::ExpertData);
    EXPECT_EQ(ops_of(s, RuleId::MoeExpertGradNorm).size(), 1u);
    auto gathers = ops_of(s, RuleId::Stage12StepAllgatherPartitions);
    ASSERT_EQ(gathers.size(), 1u);
    EXPECT_EQ(gathers[0]->group, GroupKind::Dp);
    size_t expert_broadcasts = 0;
    for (const Op* op : ops_of(s, RuleId::InitBroadcastModel)) expert_broadcasts += op->group == GroupKind::ExpertData;
    EXPECT_EQ(expert_broadcasts, 4u);
}

// split_params_into_different_moe_groups_for_optimizer cuts an expert group where it would pass
// 178956971 elements: a 16384 x 16384 expert weight (268435456) fills one group alone and its bias
// starts the next, so 3 groups (dense, weight, bias): 3 norms over the data group, 2 averages.
TEST(MoeRules, ExpertGroupsAreCutAtMaxGroupSize) {
    Model m = test::param_list(R"({"name": "big", "seq_len": 8, "parameters": [
        {"name": "fc.weight", "shape": [64, 64]},
        {"name": "moe.deepspeed_moe.gate.wg.weight", "shape": [2, 64]},
        {"name": "moe.deepspeed_moe.experts.deepspeed_experts.0.0.weight", "shape": [16384, 16384]},
        {"name": "moe.deepspeed_moe.experts.deepspeed_experts.0.0.bias", "shape": [16384]},
        {"name": "moe.deepspeed_moe.experts.deepspeed_experts.1.0.weight", "shape": [16384, 16384]},
        {"name": "moe.deepspeed_moe.experts.deepspeed_experts.1.0.bias", "shape": [16384]}],
        "moe": [{"module": "moe", "experts": "moe.deepspeed_moe.experts.deepspeed_experts", "num_local_experts": 2,
                 "hidden": 64}]})");
    ScheduleOptions o;
    o.world = 4;
    o.steps = 1;
    o.layout.expert = 2;
    auto s = build_schedule(m, test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}})"), o);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_EQ(s.value().meta.num_groups, 3);
    EXPECT_EQ(ops_of(s.value(), RuleId::Stage12StepGradNorm).size(), 3u);
    EXPECT_EQ(ops_of(s.value(), RuleId::MoeExpertGradNorm).size(), 2u);
}

// DeepSpeed's own assertions, one line naming the key or flag.
TEST(MoeRules, RefusesWhatDeepSpeedAsserts) {
    MoeCase stage3;
    stage3.stage = 3;   // engine.py 1548: "MoE not supported with Stage 3"
    EXPECT_EQ(refusal_field(stage3), "zero_optimization.stage");
    MoeCase no_rs;
    no_rs.extra_zero = R"(, "reduce_scatter": false)";   // stage_1_and_2.py 613
    EXPECT_EQ(refusal_field(no_rs), "zero_optimization.reduce_scatter");
    MoeCase no_contiguous;
    no_contiguous.extra_zero = R"(, "contiguous_gradients": false)";   // stage_1_and_2.py 607-608
    EXPECT_EQ(refusal_field(no_contiguous), "zero_optimization.contiguous_gradients");
    MoeCase few_tokens;
    few_tokens.micro = 1;
    few_tokens.seq_len = 3;   // 3 tokens < min_capacity 4: top1gating asserts
    EXPECT_EQ(refusal_field(few_tokens), "moe.moe.min_capacity");
    MoeCase big_factor;
    big_factor.capacity_factor = "8.0";   // C = ceil(8 x 8) = 64 > 32 tokens: torch.topk fails
    EXPECT_EQ(refusal_field(big_factor), "moe.moe.capacity_factor");
    MoeCase uneven;
    uneven.ep = 4;
    uneven.experts = 6;   // layer.py 59: num_experts % ep_size == 0
    EXPECT_EQ(refusal_field(uneven), "moe.moe.num_local_experts");
}
