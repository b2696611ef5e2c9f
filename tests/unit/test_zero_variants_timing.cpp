// ZeRO++ / MiCS collectives timed on the links their process group uses (timing/group_plan.hpp):
// ranks sit on nodes in order, so on dgx-h100 (8 GPUs a node) an hpZ group of 8 consecutive ranks
// is one node and never reaches a NIC, qgZ's inter-node group is one rank per node and goes only
// through NICs, and MiCS's replication group {i, i+8} crosses nodes.
#include <gtest/gtest.h>

#include "inline_inputs.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/group_plan.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

Topology h100(int64_t nodes) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json", nodes);
    EXPECT_TRUE(t.ok());
    return t.value();
}

Schedule variant_schedule(const std::string& zero, int64_t world, int64_t gpn) {
    Model m = test::param_list(R"({"parameters": [{"name": "a.weight", "shape": [4096, 4096]}, {"name": "a.bias", "shape": [4096]}]})");
    auto c = parse_ds_config("inline-ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, )" + zero + "}}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    ScheduleOptions o;
    o.world = world;
    o.steps = 2;
    o.gpus_per_node = gpn;
    auto s = build_schedule(m, c.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

const Op& first(const Schedule& s, GroupKind group, OpKind kind) {
    for (const auto& op : s.ops)
        if (op.group == group && op.kind == kind) return op;
    ADD_FAILURE() << "no " << op_record_name(kind) << " on " << group;
    return s.ops.front();
}

TEST(ZeroVariantsTiming, HpzGroupOfOneNodeNeverTouchesANic) {
    Topology t = h100(4);
    Schedule s = variant_schedule(R"("zero_hpz_partition_size": 8)", 32, 8);
    const Op& hpz = first(s, GroupKind::Hpz, OpKind::AllGather);
    CollectivePlan p = plan_for_group(t, hpz, s.meta);
    EXPECT_EQ(p.inter_bytes, 0.0);
    EXPECT_GT(p.intra_bytes, 0.0);
    // The same bytes over the whole world cross nodes.
    Op dp = hpz;
    dp.group = GroupKind::Dp;
    EXPECT_GT(plan_for_group(t, dp, s.meta).inter_bytes, 0.0);
}

TEST(ZeroVariantsTiming, QgzInterNodeAllToAllGoesThroughNicsOnly) {
    Topology t = h100(4);
    Schedule s = variant_schedule(R"("zero_quantized_gradients": true)", 32, 8);
    CollectivePlan intra = plan_for_group(t, first(s, GroupKind::QgzIntra, OpKind::AllToAll), s.meta);
    CollectivePlan inter = plan_for_group(t, first(s, GroupKind::QgzInter, OpKind::AllToAll), s.meta);
    EXPECT_EQ(intra.inter_bytes, 0.0);
    EXPECT_GT(intra.intra_bytes, 0.0);
    EXPECT_EQ(inter.intra_bytes, 0.0);
    EXPECT_GT(inter.inter_bytes, 0.0);
}

TEST(ZeroVariantsTiming, MicsReplicationAllReduceCrossesNodes) {
    Topology t = h100(2);
    Schedule s = variant_schedule(R"("mics_shard_size": 8)", 16, 0);
    CollectivePlan shard = plan_for_group(t, first(s, GroupKind::MicsShard, OpKind::ReduceScatter), s.meta);
    CollectivePlan repl = plan_for_group(t, first(s, GroupKind::MicsReplica, OpKind::AllReduce), s.meta);
    EXPECT_EQ(shard.inter_bytes, 0.0);
    EXPECT_GT(repl.inter_bytes, 0.0);
}

// A plain op is planned exactly as before; a variant schedule simulates end to end.
TEST(ZeroVariantsTiming, WorldOpsUnchangedAndVariantsSimulate) {
    Topology t = h100(2);
    Schedule s = variant_schedule(R"("zero_hpz_partition_size": 8, "zero_quantized_weights": true)", 16, 8);
    const Op& rs = first(s, GroupKind::Dp, OpKind::ReduceScatter);
    CollectivePlan a = plan_for_group(t, rs, s.meta), b = plan_collective(t, rs.kind, static_cast<double>(rs.bytes()), 16);
    EXPECT_EQ(a.latency_s, b.latency_s);
    EXPECT_EQ(a.inter_bytes, b.inter_bytes);
    // qwZ's quantize/dequantize kernels: memory-bound time before the int8 gather, none elsewhere.
    // Gather of N = 4096·4097/16 int8 elements on 8 ranks, fp32 model: N·(4 + 1) + 3·8·N bytes.
    const Op& q = first(s, GroupKind::Hpz, OpKind::AllGather);
    const double N = static_cast<double>(q.elements);
    EXPECT_NEAR(quantization_seconds(t, q, s.meta), N * 29 / (t.mem_bandwidth_gbs * 1e9 * t.mem_efficiency), 1e-12);
    EXPECT_EQ(quantization_seconds(t, rs, s.meta), 0.0);
    auto pred = simulate(s, t, TimingMode::Overlapped);
    ASSERT_TRUE(pred.ok()) << pred.error().what();
    EXPECT_GT(pred->steps.back().step_s(), 0.0);
}

}  // namespace
