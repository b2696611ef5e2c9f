// The collective cost model and the SimGrid engine: hand-computed alpha-beta times on small
// topologies, flow sharing between concurrent collectives and the engine's ordering. The shipped
// topologies against real nccl-tests tables are in test_nccl_tests_tables.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

// One node of `gpus` GPUs on an NVSwitch whose NCCL ring reaches 100 GB/s (1 channel x 100), and,
// for several nodes, 2 NICs of 10 GB/s per node.
Topology small_topology(int64_t nodes, int64_t gpus) {
    std::string json = R"({"name": "test", "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": )" +
                       std::to_string(gpus) + R"(,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 100},
      "nics": {"per_node": 2, "bandwidth_gbs": 10},
      "network": {"kind": "fat_tree"}})";
    auto t = parse_topology("test-topology.json", json);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

TEST(AlphaBeta, RingAllReduceOnTwoRanks) {
    // 2 ranks, Simple: each rank sends 2(n-1)/n S = S = 1e8 B at 100 GB/s = 1 ms; latency
    // 8.4 us base + 2 steps x 3.4 us (NVLink, Simple) = 15.2 us.
    Topology t = small_topology(1, 2);
    auto plan = plan_collective_with(t, OpKind::AllReduce, 1e8, 2, Algorithm::Ring, Protocol::Simple);
    EXPECT_NEAR(plan.latency_s, 15.2e-6, 1e-12);
    EXPECT_NEAR(plan.time_alone_s(), 1.0152e-3, 1e-12);
    // LL halves the bandwidth (2 ms) and has 6.6 + 2 x 0.6 = 7.8 us of latency.
    auto ll = plan_collective_with(t, OpKind::AllReduce, 1e8, 2, Algorithm::Ring, Protocol::LL);
    EXPECT_NEAR(ll.time_alone_s(), 2.0078e-3, 1e-12);
    // The tuner takes the faster: Simple here, LL for 8 bytes (7.8 us against 15.2 us).
    EXPECT_EQ(plan_collective(t, OpKind::AllReduce, 1e8, 2).nccl()->protocol, Protocol::Simple);
    EXPECT_EQ(plan_collective(t, OpKind::AllReduce, 8, 2).nccl()->protocol, Protocol::LL);
}

TEST(AlphaBeta, SmallCollectivesRunOnFewerChannels) {
    // NCCL runs twice its search channels (here 2 x 1, each 50 GB/s) and drops channels while
    // bytes < channels x 512 threads x threshold; ring LL's threshold is 8 B x 2 ranks = 16 B, so a
    // channel needs 8 KiB. 4096 B keeps 1 of 2 channels: LL at 0.5 x 100 x 1/2 = 25 GB/s moves
    // 2(n-1)/n x 4096 = 4096 B in 0.16384 us, after 6.6 + 2 x 0.6 = 7.8 us.
    Topology t = small_topology(1, 2);
    auto ll = plan_collective_with(t, OpKind::AllReduce, 4096, 2, Algorithm::Ring, Protocol::LL);
    EXPECT_NEAR(ll.intra_rate, 25e9, 1e-3);
    EXPECT_NEAR(ll.time_alone_s(), 7.96384e-6, 1e-12);
    // From 16 KiB both channels run: the alpha-beta rate is back.
    EXPECT_NEAR(plan_collective_with(t, OpKind::AllReduce, 16384, 2, Algorithm::Ring, Protocol::LL).intra_rate, 50e9, 1e-3);
    // The tuner chooses on the full-channel estimate, as NCCL does: LL here.
    EXPECT_EQ(plan_collective(t, OpKind::AllReduce, 4096, 2).nccl()->protocol, Protocol::LL);
}

TEST(AlphaBeta, TheEngineReproducesTheFormula) {
    // The same collective through SimGrid: one flow of 1e8 B on a 100 GB/s link after the latency.
    Topology t = small_topology(1, 2);
    EXPECT_NEAR(simulate_single_collective(t, OpKind::AllReduce, 1e8, 2), 1.0152e-3, 1e-9);
}

TEST(AlphaBeta, RingAcrossTwoNodes) {
    // 4 ranks on 2 nodes of 2: ring all_reduce of S = 8e7 B moves 2 x 3/4 x S = 1.2e8 B per rank;
    // 2 of the ring's 4 edges cross nodes, so 6e7 B go over NVLink (0.6 ms at 100 GB/s) and 6e7 B
    // over the rank's NIC (one 10 GB/s NIC per GPU: 6 ms). Latency: 4 intra steps x 3.4 + 2 inter
    // steps x 14 + 8.4 = 50 us, x 1.4 for multi-node Ring/Simple all_reduce = 70 us.
    Topology t = small_topology(2, 2);
    auto plan = plan_collective_with(t, OpKind::AllReduce, 8e7, 4, Algorithm::Ring, Protocol::Simple);
    EXPECT_NEAR(plan.intra_bytes, 6e7, 1e-3);
    EXPECT_NEAR(plan.inter_bytes, 6e7, 1e-3);
    EXPECT_NEAR(plan.latency_s, 70e-6, 1e-12);
    EXPECT_NEAR(plan.time_alone_s(), 6.07e-3, 1e-12);
    // (The tuner takes the tree here since a two-node tree sends S per node, not 2S: issue 16;
    // AlphaBeta.TreeAllReduceAcrossTwoNodes. The engine is checked on the ring it is given.)
    EXPECT_NEAR(simulate_single_collective(t, OpKind::AllReduce, 8e7, 4, nullptr, TunerChoice{Algorithm::Ring, {}}),
                plan.time_alone_s(), 1e-9);
}

TEST(AlphaBeta, AllGatherCountsTheWholeBuffer) {
    // DeepSpeed logs an all_gather's shard (2.5e7 B on 4 ranks = 1e8 B buffer); a ring moves
    // (n-1)/n of the buffer per rank: 7.5e7 B at 100 GB/s = 0.75 ms, plus 8.4 + 3 x 3.4 us.
    Topology t = small_topology(1, 4);
    auto plan = plan_collective_with(t, OpKind::AllGather, 2.5e7, 4, Algorithm::Ring, Protocol::Simple);
    EXPECT_NEAR(plan.time_alone_s(), 0.75e-3 + 18.6e-6, 1e-12);
}

TEST(AlphaBeta, TreeAllReduceAcrossTwoNodes) {
    // 4 ranks on 2 nodes of 2, Simple, S = 8e7 B: every rank of a chain moves 2S = 1.6e8 B over
    // NVLink. Across two nodes each of the double tree's two trees is one edge that half the
    // buffer crosses once each way, so a node's NICs carry S (issue 16: two-node tables reach
    // busbw above the NIC line rate, which 2S could not): S/2 = 4e7 B per rank's 10 GB/s NIC
    // share. NCCL rates a tree at 0.92 of the bus and, for 8e7 B = 1.25e6 x 64 B (log2 floor 20),
    // Simple at 0.8 of that: the NIC share runs at 10 x 0.736 = 7.36 GB/s, 4e7 B take 5.4348 ms.
    // Latency: 8.4 us base + 2 x (1 intra step x 4.0 + log2(2 nodes) x 14 network) = 44.4 us.
    Topology t = small_topology(2, 2);
    auto tree = plan_collective_with(t, OpKind::AllReduce, 8e7, 4, Algorithm::Tree, Protocol::Simple);
    EXPECT_NEAR(tree.intra_bytes, 1.6e8, 1e-3);
    EXPECT_NEAR(tree.inter_bytes, 4e7, 1e-3);
    EXPECT_NEAR(tree.inter_rate, 7.36e9, 1e-3);
    EXPECT_NEAR(tree.latency_s, 44.4e-6, 1e-12);
    EXPECT_NEAR(tree.time_alone_s(), 44.4e-6 + 4e7 / 7.36e9, 1e-12);
    // The ring of AlphaBeta.RingAcrossTwoNodes takes 6.07 ms: the tuner takes the tree.
    EXPECT_EQ(plan_collective(t, OpKind::AllReduce, 8e7, 4).nccl()->algorithm, Algorithm::Tree);
    // NCCL_ALGO=Tree leaves the tree's protocols. LL128 across nodes: 0.92 x 120/128 x 0.9 (its
    // correction at 20) = 0.77625 of 10 GB/s, 5.1530 ms, after 14.0 + 2 x (1.25 + 8.5) = 33.5 us:
    // faster than Simple's 5.4792 ms, so the tuner takes it.
    TunerChoice only_tree;
    only_tree.algorithm = Algorithm::Tree;
    CollectivePlan picked;
    double ll128 = simulate_single_collective(t, OpKind::AllReduce, 8e7, 4, &picked, only_tree);
    EXPECT_EQ(picked.nccl()->algorithm, Algorithm::Tree);
    EXPECT_EQ(picked.nccl()->protocol, Protocol::LL128);
    EXPECT_NEAR(ll128, 33.5e-6 + 4e7 / 7.7625e9, 1e-9);
    // NCCL_ALGO=Tree NCCL_PROTO=Simple: the plan above, through the engine.
    only_tree.protocol = Protocol::Simple;
    EXPECT_NEAR(simulate_single_collective(t, OpKind::AllReduce, 8e7, 4, nullptr, only_tree), tree.time_alone_s(), 1e-9);
}

TEST(AlphaBeta, TreeInsideOneNodeIsAChain) {
    // One node of 4, LL128, S = 1 MiB = 16384 x 64 B (log2 14): 0.92 x 7/9 (LL128 inside a node)
    // x 0.6 (the correction at 14) of 100 GB/s = 42.9333 GB/s for 2S = 2 MiB: 48.8466 us; latency
    // 14.0 + 2 x 3 steps x 1.25 = 21.5 us.
    Topology t = small_topology(1, 4);
    auto tree = plan_collective_with(t, OpKind::AllReduce, 1048576, 4, Algorithm::Tree, Protocol::LL128);
    EXPECT_NEAR(tree.time_alone_s(), 21.5e-6 + 2097152 / (100e9 * 0.92 * 7.0 / 9.0 * 0.6), 1e-12);
    EXPECT_NEAR(tree.time_alone_s(), 70.3467e-6, 1e-10);
    // NCCL weighs it on one node too, and only for all_reduce.
    auto has_tree = [&](OpKind k) {
        auto c = tuner_candidates(t, k, 4);
        return std::any_of(c.begin(), c.end(), [](const TunerCandidate& x) { return x.algorithm == Algorithm::Tree; });
    };
    EXPECT_TRUE(has_tree(OpKind::AllReduce));
    EXPECT_FALSE(has_tree(OpKind::AllGather));
}

TEST(AlphaBeta, NvlsAllReduceSendsEachShareThroughTheSwitch) {
    // In-switch reduction on n GPUs: the switch reads every GPU's whole buffer (S up each link),
    // returns each rank's reduced 1/n (S/n down), takes it back once (S/n up) and writes it to
    // every GPU (S down): S(1 + 1/n) each way. At 0.8 NVLS efficiency of 100 GB/s = 80 GB/s, after
    // NCCL's 25 us NVLS latency. S = 1e8 B.
    auto nvls_topology = [](int64_t gpus) {
        Topology t = small_topology(1, gpus);
        t.nvls = true;
        t.nvls_efficiency = 0.8;
        return t;
    };
    // 8 GPUs: 1.125e8 B at 80 GB/s = 1.40625 ms, + 25 us = 1.43125 ms; the ring moves
    // 2(n-1)/n S = 1.75e8 B at 100 GB/s after 8.4 + 14 x 3.4 us: 1.8060 ms. The tuner takes NVLS.
    Topology eight = nvls_topology(8);
    EXPECT_NEAR(plan_collective_with(eight, OpKind::AllReduce, 1e8, 8, Algorithm::NVLS, Protocol::Simple).time_alone_s(),
                1.43125e-3, 1e-12);
    EXPECT_NEAR(simulate_single_collective(eight, OpKind::AllReduce, 1e8, 8), 1.43125e-3, 1e-9);
    // 4 GPUs: NVLS 1.25e8 B, 1.5625 ms + 25 us = 1.5875 ms; the ring 1.5e8 B, 1.5 ms + 8.4 +
    // 6 x 3.4 us = 1.5288 ms: the ring wins by a little.
    Topology four = nvls_topology(4);
    EXPECT_NEAR(plan_collective_with(four, OpKind::AllReduce, 1e8, 4, Algorithm::NVLS, Protocol::Simple).time_alone_s(),
                1.5875e-3, 1e-12);
    EXPECT_NEAR(simulate_single_collective(four, OpKind::AllReduce, 1e8, 4), 1.5288e-3, 1e-9);
    // 2 GPUs: NVLS moves 1.5e8 B (1.9 ms in all), the ring S (1.0152 ms): the ring wins.
    Topology two = nvls_topology(2);
    EXPECT_NEAR(plan_collective_with(two, OpKind::AllReduce, 1e8, 2, Algorithm::NVLS, Protocol::Simple).time_alone_s(),
                1.9e-3, 1e-12);
    EXPECT_EQ(plan_collective(two, OpKind::AllReduce, 1e8, 2).nccl()->algorithm, Algorithm::Ring);
}

// A topology file under topologies/, loaded (also in test_nccl_tests_tables.cpp).
Topology shipped(const std::string& name) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/" + name + ".json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

// A two-op schedule for the engine: all_reduces of `a` and `b` bytes on two different streams.
Schedule two_collectives(double a, double b) {
    Schedule s;
    s.meta.world = 2;
    Op x;
    x.kind = OpKind::AllReduce;
    x.step = 0;
    x.micro = 0;
    x.phase = Phase::Backward;
    x.stream = Stream::Reduce;
    x.elements = static_cast<int64_t>(a / 4);
    x.rule = RuleId::Stage12FlushMultiRankAllreduce;
    s.add(x);
    Op y = x;
    y.stream = Stream::Fetch;
    y.elements = static_cast<int64_t>(b / 4);
    s.add(y);
    return s;
}

TEST(Contention, TwoCollectivesShareTheLink) {
    // Each alone: 15.2 us + 1 ms. Together on one 100 GB/s link each gets half until done:
    // both end at 15.2 us + 2 ms.
    Topology t = small_topology(1, 2);
    auto p = simulate(two_collectives(1e8, 1e8), t, TimingMode::Overlapped);
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p->ops[0].end_s, 2.0152e-3, 1e-8);
    EXPECT_NEAR(p->ops[1].end_s, 2.0152e-3, 1e-8);
    // Unequal: 1e8 and 3e8 bytes. Both at 50 GB/s until the first is done (2 ms), then the second
    // alone at 100 GB/s for its last 2e8 bytes (2 ms): it ends at 4 ms instead of 3 ms alone.
    auto q = simulate(two_collectives(1e8, 3e8), t, TimingMode::Overlapped);
    ASSERT_TRUE(q.ok());
    EXPECT_NEAR(q->ops[0].end_s, 2.0152e-3, 1e-8);
    EXPECT_NEAR(q->ops[1].end_s, 4.0152e-3, 1e-8);
}

TEST(Contention, TheLoggerModeRunsOpsOneAfterAnother) {
    // Synchronised after every op, as the comms logger measures: no sharing, 1.0152 ms each.
    Topology t = small_topology(1, 2);
    auto p = simulate(two_collectives(1e8, 1e8), t, TimingMode::Synchronized);
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p->ops[0].duration(), 1.0152e-3, 1e-8);
    EXPECT_NEAR(p->ops[1].duration(), 1.0152e-3, 1e-8);
    EXPECT_NEAR(p->ops[1].end_s, 2.0304e-3, 1e-8);
}

TEST(Engine, RefusesMoreRanksThanGpus) {
    Topology t = small_topology(1, 2);
    Schedule s = two_collectives(8, 8);
    s.meta.world = 4;
    auto p = simulate(s, t, TimingMode::Overlapped);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().what().find("more GPUs"), std::string::npos);
}

TEST(Engine, OverlappedTimelineRespectsDeepSpeedsOrdering) {
    // Stage 3 on the reference model, 4 ranks on dgx-a100: training starts after initialize;
    // a module's compute starts after the gather that brought its parameters; the step's ops start
    // after every gradient reduction before them.
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    auto c = load_ds_config(test::reference("deepspeed-v0.14.2-cpu/z3_default_w4/ds_config.json"));
    ScheduleOptions o;
    o.world = 4;
    o.steps = 2;
    auto s = build_schedule(m.value(), c.value(), o);
    ASSERT_TRUE(s.ok());
    auto p = simulate(s.value(), shipped("dgx-a100"), TimingMode::Overlapped);
    ASSERT_TRUE(p.ok());
    double init_end = 0;
    for (size_t i = 0; i < s->ops.size(); ++i)
        if (s->ops[i].step < 0) init_end = std::max(init_end, p->ops[i].end_s);
    std::map<int, double> gathered_at;
    double last_reduce_end = 0;
    for (size_t i = 0; i < s->ops.size(); ++i) {
        const Op& op = s->ops[i];
        const OpTiming& t = p->ops[i];
        if (op.step < 0) continue;
        EXPECT_GE(t.start_s, init_end - 1e-12) << "op " << i;
        if (op.stream == Stream::Fetch)
            for (int q : op.params) gathered_at[q] = t.end_s;
        if (op.kind == OpKind::Compute && op.module >= 0)
            for (int q : op.params) {
                if (gathered_at.count(q)) {
                    EXPECT_GE(t.start_s, gathered_at[q] - 1e-12) << "op " << i;
                }
            }
        if (op.stream == Stream::Reduce) last_reduce_end = std::max(last_reduce_end, t.end_s);
        if (op.phase == Phase::Step) {
            EXPECT_GE(t.start_s, last_reduce_end - 1e-12) << "op " << i;
        }
    }
    // Overlap can only help: each step is no longer than the same ops one after another.
    auto serial = simulate(s.value(), shipped("dgx-a100"), TimingMode::Synchronized);
    ASSERT_TRUE(serial.ok());
    for (size_t k = 0; k < p->steps.size(); ++k) EXPECT_LE(p->steps[k].step_s(), serial->steps[k].step_s() + 1e-12);
}

}  // namespace
