// `zerosim need` (prediction/need.hpp): the bisection against an answer derived by hand. One
// 8192 x 8192 bf16 weight at stage 2 on two nodes of one GPU each: its gradient's all_reduce
// and the all_gather of the updated parameters cross the network with nothing to hide behind, so
// the step is a + c / B in the per-GPU bandwidth B (c: the bytes the ring sends over the NIC at line rate and
// efficiency). Two predictions give a and c; the step target a + c / 5 then has the answer
// B = 5 GB/s exactly, which the bisection must find to its tolerance.
#include <gtest/gtest.h>

#include "inline_inputs.hpp"
#include "prediction/need.hpp"

namespace zerosim {
namespace {

const char* kTwoNodes = R"({"name": "two-single-gpu-nodes", "nodes": 2, "gpus_per_node": 1,
  "gpu": {"name": "test", "peak_tflops": {"bf16": 1000, "fp32": 60}, "memory_bandwidth_gbs": 3000, "memory_gb": 80},
  "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 450, "nccl_channels": 18, "nccl_channel_bandwidth_gbs": 20},
  "nics": {"per_node": 1, "bandwidth_gbs": 50, "latency_us": 2},
  "network": {"kind": "fat_tree", "levels": 1}})";

NeedProblem one_weight_problem() {
    NeedProblem p;
    p.model = test::param_list(R"({"name": "one-weight", "parameters": [{"name": "w.weight", "shape": [8192, 8192]}]})");
    p.cfg = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})");
    auto t = parse_topology("two-nodes.json", kTwoNodes);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    p.topology = t.value();
    p.seq_len = 128;
    p.quantity = NeedQuantity::InterNodeBandwidth;
    p.target = NeedTarget::StepMs;
    return p;
}

TEST(Need, BandwidthForAStepTargetDerivedByHand) {
    NeedProblem p = one_weight_problem();
    auto at2 = need_evaluate(p, 2), at8 = need_evaluate(p, 8), at4 = need_evaluate(p, 4);
    ASSERT_TRUE(at2.ok() && at8.ok() && at4.ok());
    const double c = (at2->step_ms - at8->step_ms) / (1.0 / 2 - 1.0 / 8);   // ms x GB/s
    const double a = at2->step_ms - c / 2;
    // Linear in 1/B: the third point on the line to 0.1%.
    EXPECT_NEAR(at4->step_ms, a + c / 4, 1e-3 * at4->step_ms);
    // c by hand: the ring all_reduce of the 134.2 MB gradient (8192^2 x 2 bytes) sends 2(n-1)/n = 1
    // times it over the NIC, the all_gather of the updated halves after the step (n-1)/n = 1/2:
    // 1.5 x 134.2 MB at B GB/s is 201.3 / B ms (line rate: the file gives no NIC efficiency).
    const double gradient_mb = 8192.0 * 8192.0 * 2 / 1e6;
    EXPECT_NEAR(c, 1.5 * gradient_mb, 0.01 * gradient_mb);
    EXPECT_EQ(at2->binding, "all_reduce");
    p.target_value = a + c / 5;
    p.lo = 1, p.hi = 50;
    p.tolerance = 0.001;
    auto ans = solve_need(p);
    ASSERT_TRUE(ans.ok()) << ans.error().what();
    EXPECT_EQ(ans->outcome, NeedOutcome::Boundary);
    EXPECT_TRUE(ans->met_above);
    EXPECT_GE(ans->answer, 5 * (1 - 1e-6));
    EXPECT_LE(ans->answer, 5 * 1.001 * (1 + 1e-6));
    EXPECT_TRUE(ans->monotone);
}

TEST(Need, UnreachableAndMetEverywhereAreSaid) {
    NeedProblem p = one_weight_problem();
    p.target_value = 0.001;   // no bandwidth makes the step 1 microsecond
    p.lo = 1, p.hi = 50;
    auto none = solve_need(p);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().what().find("cannot be reached in 1..50 GB/s"), std::string::npos) << none.error().what();
    p.target_value = 1e9;
    auto all = solve_need(p);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->outcome, NeedOutcome::MetEverywhere);
    EXPECT_EQ(all->answer, 1);
}

TEST(Need, NodesAreExact) {
    NeedProblem p = one_weight_problem();
    p.quantity = NeedQuantity::Nodes;
    p.target = NeedTarget::StepMs;
    p.lo = 1, p.hi = 64;
    // The step grows with the ring's latency steps: the largest node count within a target set
    // between the 8- and 9-node steps is 8.
    auto at8 = need_evaluate(p, 8), at9 = need_evaluate(p, 9);
    ASSERT_TRUE(at8.ok() && at9.ok());
    ASSERT_LT(at8->step_ms, at9->step_ms);
    p.target_value = (at8->step_ms + at9->step_ms) / 2;
    auto ans = solve_need(p);
    ASSERT_TRUE(ans.ok()) << ans.error().what();
    EXPECT_FALSE(ans->met_above);
    EXPECT_EQ(ans->answer, 8);
}

// A config that fixes train_batch_size allows only the worlds that divide it: with 24 samples of
// micro batch 1 on one-GPU nodes, 2, 3, 4, 6, 8, 12 and 24 nodes (the divisors of 24, worked out
// by hand; from 2 nodes up, where the network starts). The search probes those alone (it died on the first count that does not divide the
// batch). More nodes mean fewer accumulation steps (24 / world micro batches per rank), so the step
// shrinks: a target set between the 8- and 12-node steps is met from 12 nodes on, with no allowed
// count between them.
TEST(Need, NodesUnderAFixedBatchProbeOnlyTheWorldsItAllows) {
    NeedProblem p = one_weight_problem();
    p.cfg = test::ds(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                         "zero_optimization": {"stage": 2}})");
    p.quantity = NeedQuantity::Nodes;
    p.target = NeedTarget::StepMs;
    p.lo = 2, p.hi = 30;
    auto at8 = need_evaluate(p, 8), at12 = need_evaluate(p, 12);
    ASSERT_TRUE(at8.ok() && at12.ok());
    ASSERT_GT(at8->step_ms, at12->step_ms);
    p.target_value = (at8->step_ms + at12->step_ms) / 2;
    auto ans = solve_need(p);
    ASSERT_TRUE(ans.ok()) << ans.error().what();
    EXPECT_EQ(ans->allowed_nodes, (std::vector<double>{2, 3, 4, 6, 8, 12, 24}));
    EXPECT_TRUE(ans->met_above);
    EXPECT_EQ(ans->answer, 12);
    for (const NeedPoint& c : ans->curve) EXPECT_EQ(24 % c.world, 0) << c.world << " ranks";
    // A range with no allowed count is one error naming the batch.
    p.lo = 13, p.hi = 23;
    auto none = solve_need(p);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.error().field, "train_batch_size");
}

}  // namespace
}  // namespace zerosim
