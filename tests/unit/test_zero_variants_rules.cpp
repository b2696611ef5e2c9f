// One hand-derived test per rule of ../shared/docs/zero-variants.md (DeepSpeed v0.14.2): the
// numbers below are worked out from the rule's formula, not read back from zerosim.
#include <gtest/gtest.h>

#include "inline_inputs.hpp"
#include "schedule/bounds.hpp"
#include "schedule/check.hpp"
#include "schedule/schedule.hpp"

using namespace zerosim;

namespace {

Result<Schedule> try_build(const Model& m, const std::string& zero, int64_t world, int steps = 1, int64_t gpn = 0,
                           int64_t accum = 1) {
    auto c = parse_ds_config("inline-ds.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": )" +
                                                   std::to_string(accum) + R"(, "zero_optimization": {"stage": 3, )" + zero + "}}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    ScheduleOptions o;
    o.world = world;
    o.steps = steps;
    o.gpus_per_node = gpn;
    return build_schedule(m, c.value(), o);
}

std::vector<const Op*> ops_where(const Schedule& s, const std::function<bool(const Op&)>& f) {
    std::vector<const Op*> out;
    for (const auto& op : s.ops)
        if (f(op)) out.push_back(&op);
    return out;
}

bool is_fetch(const Op& op) { return op.rule == RuleId::Stage3Fetch || op.rule == RuleId::Stage3Prefetch; }

// §1.2: S = ceil(m/n)·n/k, not ceil(m/k). n = 4, k = 2, m = 250: P = 63, S = 126.
TEST(ZeroVariantsRules, HpzSecondaryPartitionIsThePaddedPrimaryCutInK) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [250]}]})");
    auto s = try_build(m, R"("zero_hpz_partition_size": 2, "stage3_param_persistence_threshold": 0)", 4, 2);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto fetches = ops_where(s.value(), is_fetch);
    ASSERT_GE(fetches.size(), 2u);
    // Step 0: the copy made at conversion, on the hpZ group; step 1's forward: dropped by _post_step.
    EXPECT_EQ(fetches.front()->elements, 126);
    EXPECT_EQ(fetches.front()->group, GroupKind::Hpz);
    const Op* step1 = ops_where(s.value(), [](const Op& o) { return is_fetch(o) && o.step == 1 && o.phase == Phase::Forward; }).at(0);
    EXPECT_EQ(step1->elements, 63);
    EXPECT_EQ(step1->group, GroupKind::Dp);
    EXPECT_FALSE(check_schedule(s.value(), "hpz"));
    EXPECT_EQ(s->meta.groups.at(0).members, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
}

// §1.1: the hpZ size must divide the world (groups.py assertion).
TEST(ZeroVariantsRules, HpzSizeNotDividingTheWorldIsRefused) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [64]}]})");
    auto s = try_build(m, R"("zero_hpz_partition_size": 3)", 4);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().what().find("zero_hpz_partition_size"), std::string::npos) << s.error().what();
}

// §2.2: g(N) = ceil(N/8000) raised until 8g divides N: g(40256) = 8 (5.03 -> 6, 7 do not divide
// 40256/8 = 5032; 8 does), so scales are 32 B; data is N bytes. n = 2, m = 2N.
TEST(ZeroVariantsRules, QwzSendsInt8DataThenFp32Scales) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [80512]}]})");
    auto s = try_build(m, R"("zero_quantized_weights": true, "stage3_param_persistence_threshold": 0)", 2);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto fetch = ops_where(s.value(), [](const Op& o) { return o.phase == Phase::Forward && is_collective(o.kind); });
    ASSERT_EQ(fetch.size(), 2u);
    EXPECT_EQ(fetch[0]->bytes(), 40256);
    EXPECT_EQ(fetch[0]->rule, RuleId::QwzFetch);   // stage3.fetch's gather, with its own rule's payload
    EXPECT_EQ(fetch[0]->payload, Payload::QuantizedShards);
    EXPECT_EQ(fetch[1]->rule, RuleId::QwzFetchScales);
    EXPECT_EQ(fetch[1]->payload, Payload::QuantScales);
    EXPECT_EQ(fetch[1]->bytes(), 32);
    EXPECT_FALSE(check_schedule(s.value(), "qwz"));
}

// §2.2: a gather of a partition that is not a multiple of 8 fails DeepSpeed's assertion (#4309).
TEST(ZeroVariantsRules, QwzMultipleOfEightIsRefused) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [1000]}]})");
    auto s = try_build(m, R"("zero_quantized_weights": true, "stage3_param_persistence_threshold": 0)", 4);  // 250
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().what().find("multiple of 8"), std::string::npos) << s.error().what();
}

// §3.3: W = 8, L = 4 (two nodes): a 64x256 weight (m = 16384, m % 16 = 0, G = 256) sends
// 8192 B, 1024 B intra then 2048 B, 256 B inter; its 256-wide bias falls back to one reduce_scatter
// of 256 elements (fp32: 1024 B); a 2-D 3x5 weight (15 % 16 != 0) falls back too (16 elements).
TEST(ZeroVariantsRules, QgzFourAllToAllsPerTwoDimensionalGradient) {
    Model m = test::param_list(R"({"parameters": [{"name": "a.weight", "shape": [64, 256]}, {"name": "a.bias", "shape": [256]},
                                                   {"name": "b.weight", "shape": [3, 5]}]})");
    auto s = try_build(m, R"("zero_quantized_gradients": true)", 8, 1, 4);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto grads = ops_where(s.value(), [](const Op& o) { return o.phase == Phase::Backward && is_collective(o.kind) && !is_fetch(o) &&
                                                                    o.kind != OpKind::Broadcast; });
    std::vector<std::string> got;
    for (const Op* o : grads) got.push_back(std::string(op_record_name(o->kind)) + " " + std::to_string(o->bytes()) + " " + group_name(o->group));
    EXPECT_EQ(got, (std::vector<std::string>{"all_to_all_single 8192 qgz_intra", "all_to_all_single 1024 qgz_intra",
                                             "all_to_all_single 2048 qgz_inter", "all_to_all_single 256 qgz_inter",
                                             "reduce_scatter_tensor 1024 dp", "reduce_scatter_tensor 64 dp"}));
    EXPECT_EQ(s->meta.group_size(GroupKind::QgzInter), 2);
    EXPECT_FALSE(check_schedule(s.value(), "qgz"));
}

// §3.1: one node (W = L): the plain reduce-scatter, op for op stage 3's schedule.
TEST(ZeroVariantsRules, QgzOnOneNodeChangesNothing) {
    Model m = test::param_list(R"({"parameters": [{"name": "a.weight", "shape": [64, 256]}]})");
    auto q = try_build(m, R"("zero_quantized_gradients": true)", 4, 2, 4);
    auto plain = try_build(m, R"("reduce_scatter": true)", 4, 2, 4);
    ASSERT_TRUE(q.ok() && plain.ok());
    ASSERT_EQ(q->ops.size(), plain->ops.size());
    for (size_t i = 0; i < q->ops.size(); ++i) EXPECT_EQ(q->ops[i].rule, plain->ops[i].rule);
    EXPECT_FALSE(try_build(m, R"("zero_quantized_gradients": true)", 4).ok());  // no --gpus-per-node
    EXPECT_FALSE(try_build(m, R"("zero_quantized_gradients": true, "reduce_scatter": false)", 8, 1, 4).ok());
}

// §4: s = 2 of W = 4, accumulation 2: every flush reduce-scatters ceil(m/2)·2 on the shard group;
// only the boundary micro-step adds the replication all_reduce of ceil(m/2) elements. m = 250:
// 125 elements, 500 B.
TEST(ZeroVariantsRules, MicsReplicationAllReduceOnTheBoundaryOnly) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [250]}]})");
    auto s = try_build(m, R"("mics_shard_size": 2, "stage3_param_persistence_threshold": 0)", 4, 1, 0, 2);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto rs = ops_where(s.value(), [](const Op& o) { return o.kind == OpKind::ReduceScatter; });
    ASSERT_EQ(rs.size(), 2u);
    EXPECT_EQ(rs[0]->elements, 250);
    EXPECT_EQ(rs[0]->group, GroupKind::MicsShard);
    auto ar = ops_where(s.value(), [](const Op& o) { return o.rule == RuleId::MicsAllreduceShardGrads; });
    ASSERT_EQ(ar.size(), 1u);
    EXPECT_EQ(ar[0]->micro, 1);
    EXPECT_EQ(ar[0]->bytes(), 500);
    EXPECT_EQ(ar[0]->group, GroupKind::MicsReplica);
    for (const Op* f : ops_where(s.value(), is_fetch)) EXPECT_FALSE(f->logged);
    EXPECT_FALSE(check_schedule(s.value(), "mics"));
    // s = W: every replication group is one rank, no all_reduce; s not dividing W: refused.
    auto whole = try_build(m, R"("mics_shard_size": 4)", 4);
    ASSERT_TRUE(whole.ok());
    EXPECT_TRUE(ops_where(whole.value(), [](const Op& o) { return o.rule == RuleId::MicsAllreduceShardGrads; }).empty());
    EXPECT_FALSE(try_build(m, R"("mics_shard_size": 3)", 4).ok());
}

}  // namespace

namespace {

// §4.2 / §4.4: MiCS refuses a model built under zero.Init (mics.py assertion) and CPU-offloaded
// gradients with more than one shard group (allreduce_mics_shard_grads' RuntimeError).
TEST(ZeroVariantsRules, MicsRefusesZeroInitAndOffload) {
    Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [64]}]})");
    auto c = parse_ds_config("inline-ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "mics_shard_size": 2}})");
    ASSERT_TRUE(c.ok());
    ScheduleOptions o;
    o.world = 4;
    o.zero_init = true;
    auto s = build_schedule(m, c.value(), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "--zero-init");
    auto off = try_build(m, R"("mics_shard_size": 2, "offload_optimizer": {"device": "cpu"})", 4);
    ASSERT_FALSE(off.ok());
    EXPECT_NE(off.error().what().find("Local sharding has no support for CPU offloading"), std::string::npos);
    EXPECT_TRUE(try_build(m, R"("mics_shard_size": 4, "offload_optimizer": {"device": "cpu"})", 4).ok());
}

// bounds.hpp: the size estimate stays an upper bound with the variants' extra ops.
TEST(ZeroVariantsRules, SizeEstimateBoundsVariantSchedules) {
    Model m = test::param_list(R"({"parameters": [{"name": "a.weight", "shape": [64, 256]}, {"name": "a.bias", "shape": [256]},
                                                   {"name": "b.weight", "shape": [256, 64]}]})");
    for (const char* zero : {R"("zero_hpz_partition_size": 2, "zero_quantized_weights": true, "zero_quantized_gradients": true,
                               "stage3_max_reuse_distance": 0, "stage3_prefetch_bucket_size": 0, "reduce_bucket_size": 1)",
                             R"("mics_shard_size": 2, "reduce_bucket_size": 1)"}) {
        auto s = try_build(m, zero, 8, 3, 4);
        ASSERT_TRUE(s.ok()) << s.error().what();
        auto c = parse_ds_config("x.json", std::string(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, )") + zero + "}}");
        ScheduleOptions o;
        o.world = 8;
        o.steps = 3;
        o.gpus_per_node = 4;
        EXPECT_GE(estimate_schedule_size(m, c.value(), o, 1).ops, static_cast<int64_t>(s->ops.size())) << zero;
    }
}

}  // namespace
