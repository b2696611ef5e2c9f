// Fabric mode (timing/fabric.hpp, docs/fabric.md): asymmetric cases derived by hand, and the
// what-ifs' errors. The agreement with the representative mode is test_fabric_agreement.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/topology.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

Topology cluster(int64_t nodes, int64_t gpus, int nics, const std::string& network) {
    std::string json = R"({"name": "fabric-test", "nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": )" +
                       std::to_string(gpus) + R"(,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 100},
      "nics": {"per_node": )" + std::to_string(nics) + R"(, "bandwidth_gbs": 10},
      "network": )" + network + "}";
    auto t = parse_topology("fabric-test.json", json);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

std::vector<std::vector<int>> everyone(int n) {
    std::vector<int> r(static_cast<size_t>(n));
    std::iota(r.begin(), r.end(), 0);
    return {r};
}

std::shared_ptr<FabricModel> model(const Topology& t, int64_t world, const FabricOptions& o = {}) {
    auto m = FabricModel::build(t, world, o);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

FabricOptions degrade(const std::string& text) {
    FabricOptions o;
    o.degrade.push_back(parse_fabric_what_if(text, "--degrade").value());
    return o;
}

}  // namespace

TEST(Fabric, RingThroughOneNicAtHalfSpeedDoublesTheBandwidthTerm) {
    // 2 nodes x 2 GPUs, 2 NICs each (one per GPU). A ring channel per NIC: node0.nic0 -> node1.nic0
    // and back, node0.nic1 -> node1.nic1 and back, each NIC port carrying one flow each way. With
    // node1.nic0 at half speed the two flows through it take twice as long; the ring runs at its
    // slowest link, so the network factor is 2 and NVLink's stays 1.
    Topology t = cluster(2, 2, 2, R"({"kind": "fat_tree"})");
    auto m = model(t, 4, degrade("node1.nic0=0.5"));
    FabricFactors f = m->factors(FlowPattern::Ring, everyone(4));
    EXPECT_NEAR(f.inter, 2.0, 1e-6);
    EXPECT_NEAR(f.intra, 1.0, 1e-6);
    // The plan: a 1 GB ring all_reduce; the network term (inter bytes / rate) doubles, latency stays.
    ScheduleMeta meta;
    meta.world = 4;
    EngineAdjust a = m->engine_adjust(meta);
    CollectivePlan plan = plan_collective_with(m->ideal_topology(), OpKind::AllReduce, 1e9, 4, Algorithm::Ring, Protocol::Simple);
    CollectivePlan slowed = plan;
    Op op;
    op.kind = OpKind::AllReduce;
    a.collective(op, slowed);
    ASSERT_GT(plan.inter_bytes, 0);
    EXPECT_NEAR(slowed.inter_bytes / slowed.inter_rate, 2.0 * plan.inter_bytes / plan.inter_rate, 1e-12);
    EXPECT_DOUBLE_EQ(slowed.latency_s, plan.latency_s);
    EXPECT_DOUBLE_EQ(slowed.intra_rate, plan.intra_rate);
    // One flow simulation per kind of link (2 above, 2 for the hook), cached for the next all_reduce.
    EXPECT_EQ(m->flow_simulations(), 4);
    a.collective(op, slowed);
    EXPECT_EQ(m->flow_simulations(), 4);
}

TEST(Fabric, OneNvlinkPortAtAQuarterSlowsTheNodesRing) {
    // 1 node x 4 GPUs: the ring 0->1->2->3->0, one flow out of and into each port; GPU 2's port at
    // 1/4 makes its two flows 4 times as long.
    Topology t = cluster(1, 4, 1, R"({"kind": "fat_tree"})");
    auto m = model(t, 4, degrade("node0.gpu2.nvlink=0.25"));
    FabricFactors f = m->factors(FlowPattern::Ring, everyone(4));
    EXPECT_NEAR(f.intra, 4.0, 1e-6);
    EXPECT_NEAR(f.inter, 1.0, 1e-12);
}

TEST(Fabric, FourToOneSpineRingTreeAllToAll) {
    // 16 nodes of 1 GPU and 1 NIC (B = 10 GB/s), 4 nodes per leaf switch, 4 leaves, 4:1: a leaf's
    // 4 ports share 4 / 4 = 1 spine uplink of B (each direction).
    Topology t = cluster(16, 1, 1, R"({"kind": "fat_tree", "nodes_per_leaf": 4, "oversubscription": 4})");
    auto m = model(t, 16);
    // Ring in node order: each NIC sends one flow (ideal time w/B). Only 3->4, 7->8, 11->12 and
    // 15->0 cross a leaf: one flow up and one down per leaf, alone on its uplink: x1.
    EXPECT_NEAR(m->factors(FlowPattern::Ring, everyone(16)).inter, 1.0, 1e-6);
    // Double binary tree: tree 1's parents (clear the lowest set bit, set the next) give the edges
    // 1-2 3-2 2-4 5-6 7-6 6-4 4-8 9-10 11-10 10-12 13-14 15-14 14-12 12-8 8-0; the second tree is
    // it mirrored (r <-> 15-r). Both run on the single rail, each edge a flow each way. A node
    // sends one flow per edge it has in both trees: even nodes 2..14 have 3 in tree 1 and 1 as
    // their mirror (odd, a leaf of tree 1), so at most 4 flows per NIC (ideal 4w/B). Leaf 1 (nodes
    // 4-7) is crossed by 2-4 and 4-8 in tree 1 and by the mirrors of leaf 2's crossing edges 4-8,
    // 8-0, 10-12, 12-8 (11-7, 7-15, 5-3, 3-7) in tree 2: 6 flows up one uplink of B, so 6w/B:
    // x 6/4 = 1.5.
    EXPECT_NEAR(m->factors(FlowPattern::Tree, everyone(16)).inter, 1.5, 1e-6);
    // all_to_all: each NIC sends 15 flows (ideal 15w/B); 12 go to other leaves, so a leaf's
    // uplink carries 4 x 12 = 48 flows: 48w/B, x 48/15 = 3.2.
    EXPECT_NEAR(m->factors(FlowPattern::AllToAll, everyone(16)).inter, 3.2, 1e-6);
    // Non-blocking (1:1, 4 spines), the same three run at their endpoints' speed.
    Topology flat = cluster(16, 1, 1, R"({"kind": "fat_tree", "nodes_per_leaf": 4})");
    auto f = model(flat, 16);
    for (FlowPattern p : {FlowPattern::Ring, FlowPattern::Tree, FlowPattern::AllToAll})
        EXPECT_NEAR(f->factors(p, everyone(16)).inter, 1.0, 0.02) << static_cast<int>(p);
    // The representative model's scalar divides every collective's network share by 4 instead.
    EXPECT_NEAR(link_capacities(t, 16).fabric, link_capacities(t, 16).nic / 4, 1e-6);
}

TEST(Fabric, BackgroundLoadOnTheSpine) {
    // The 4:1 case with half of every spine link taken by another job: the ring's lone crossing
    // flow per leaf gets B/2, twice its ideal time.
    Topology t = cluster(16, 1, 1, R"({"kind": "fat_tree", "nodes_per_leaf": 4, "oversubscription": 4,
                                       "background_spine_load": 0.5})");
    EXPECT_NEAR(model(t, 16)->factors(FlowPattern::Ring, everyone(16)).inter, 2.0, 1e-6);
    // A leaf uplink at a quarter: the same ring through leaf 2's uplink, x4.
    Topology u = cluster(16, 1, 1, R"({"kind": "fat_tree", "nodes_per_leaf": 4, "oversubscription": 4})");
    EXPECT_NEAR(model(u, 16, degrade("leaf2.uplink=0.25"))->factors(FlowPattern::Ring, everyone(16)).inter, 4.0, 1e-6);
}

TEST(Fabric, PlacementAcrossLeaves) {
    // 8 nodes of 1 GPU and 1 NIC, 4 per leaf at 4:1 (one uplink of B per leaf). Placed in order
    // (0 0 0 0 1 1 1 1) the ring crosses the leaves twice (3->4, 7->0): one flow per uplink, x1.
    // Interleaved (0 1 0 1 ...) every hop crosses: each leaf's 4 nodes send 4 flows up its one
    // uplink, 4w/B against w/B: x4.
    const std::string net = R"({"kind": "fat_tree", "nodes_per_leaf": 4, "oversubscription": 4, "placement": )";
    Topology in_order = cluster(8, 1, 1, net + "[0, 0, 0, 0, 1, 1, 1, 1]}");
    Topology interleaved = cluster(8, 1, 1, net + "[0, 1, 0, 1, 0, 1, 0, 1]}");
    EXPECT_NEAR(model(in_order, 8)->factors(FlowPattern::Ring, everyone(8)).inter, 1.0, 1e-6);
    EXPECT_NEAR(model(interleaved, 8)->factors(FlowPattern::Ring, everyone(8)).inter, 4.0, 1e-6);
    // A placement must name every node's leaf, and no leaf may take more than nodes_per_leaf.
    auto short_list = FabricModel::build(cluster(8, 1, 1, net + "[0, 1]}"), 8, {});
    ASSERT_FALSE(short_list.ok());
    EXPECT_EQ(short_list.error().field, "network.placement");
    auto crowded = FabricModel::build(cluster(8, 1, 1, net + "[0, 0, 0, 0, 0, 1, 1, 1]}"), 8, {});
    ASSERT_FALSE(crowded.ok());
    EXPECT_NE(crowded.error().message.find("5 nodes under leaf 0"), std::string::npos);
}

TEST(Fabric, StragglerSetsTheComputePace) {
    // Every collective synchronises the ranks: the step's compute runs at the slowest rank's speed.
    Topology t = cluster(2, 2, 2, R"({"kind": "fat_tree"})");
    FabricOptions o;
    o.straggler.push_back(parse_fabric_what_if("rank3=0.8", "--straggler").value());
    o.straggler.push_back(parse_fabric_what_if("rank1=0.9", "--straggler").value());
    auto m = model(t, 4, o);
    EXPECT_NEAR(m->compute_slowdown(), 1.25, 1e-12);
    ScheduleMeta meta;
    meta.world = 4;
    EXPECT_NEAR(m->engine_adjust(meta).compute_slowdown, 1.25, 1e-12);
}

TEST(Fabric, WhatIfErrorsNameTheFlagAndWhatWasExpected) {
    auto no_eq = parse_fabric_what_if("node3.nic2", "--degrade");
    ASSERT_FALSE(no_eq.ok());
    EXPECT_EQ(no_eq.error().field, "--degrade");
    EXPECT_NE(no_eq.error().message.find("expected TARGET=SHARE"), std::string::npos);
    auto share = parse_fabric_what_if("node3.nic2=1.5", "--degrade");
    ASSERT_FALSE(share.ok());
    EXPECT_NE(share.error().message.find("(0, 1]"), std::string::npos);
    EXPECT_FALSE(parse_fabric_what_if("rank1=abc", "--straggler").ok());
    EXPECT_FALSE(parse_fabric_what_if("rank1=0", "--straggler").ok());

    Topology t = cluster(4, 2, 2, R"({"kind": "fat_tree"})");
    auto expect_error = [&](const std::string& flag, const std::string& text, const std::string& says) {
        FabricOptions o;
        (flag == "--degrade" ? o.degrade : o.straggler).push_back(parse_fabric_what_if(text, flag).value());
        auto m = FabricModel::build(t, 8, o);
        ASSERT_FALSE(m.ok()) << text;
        EXPECT_EQ(m.error().field, flag);
        EXPECT_NE(m.error().message.find(says), std::string::npos) << m.error().message;
    };
    expect_error("--degrade", "node9.nic0=0.5", "node 9 is not in the cluster, which has 4 (node0 to node3)");
    expect_error("--degrade", "node1.nic2=0.5", "node 1 has 2 NICs on the network (nic0 to nic1)");
    expect_error("--degrade", "node0.nix0=0.5", "expected node<N>.nic<J>, node<N>.gpu<G>.nvlink or leaf<L>.uplink");
    expect_error("--degrade", "node0.gpu7.nvlink=0.5", "gpu 7 is not in the cluster");
    expect_error("--degrade", "leaf0.uplink=0.5", "under one leaf switch");
    expect_error("--straggler", "rank8=0.5", "rank 8 is not in the cluster, which has 8");
    expect_error("--straggler", "node1=0.5", "expected rank<R>");
}

TEST(Fabric, TopologyWhatIfBlockIsChecked) {
    const std::string base = R"({"name": "w", "nodes": 2, "gpus_per_node": 2,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100},
      "nics": {"per_node": 2, "bandwidth_gbs": 10}, "network": {"kind": "fat_tree"}, )";
    auto ok = parse_topology("w.json", base + R"("whatif": {"degrade": {"node1.nic0": 0.5}, "straggler": {"rank3": 0.8}}})");
    ASSERT_TRUE(ok.ok()) << ok.error().what();
    ASSERT_EQ(ok->whatif_degrade.size(), 1u);
    EXPECT_EQ(ok->whatif_degrade[0].first, "node1.nic0");
    EXPECT_EQ(ok->whatif_straggler[0].second, 0.8);
    auto bad = parse_topology("w.json", base + R"("whatif": {"degrade": {"node1.nic0": 2}}})");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().file, "w.json");
    EXPECT_EQ(bad.error().field, "whatif.degrade.node1.nic0");
    auto typo = parse_topology("w.json", base + R"("whatif": {"degraded": {}}})");
    ASSERT_FALSE(typo.ok());
    EXPECT_NE(typo.error().message.find("did you mean 'degrade'"), std::string::npos);
}

TEST(Fabric, SampledAllToAllOnOneSwitchIsUnslowed) {
    // 128 one-GPU nodes under one switch: all_to_all's 127 shifts are sampled (64); every NIC still
    // sends and receives as many flows as every other, and only the ports limit: x1.
    Topology t = cluster(128, 1, 1, R"({"kind": "fat_tree"})");
    EXPECT_NEAR(model(t, 128)->factors(FlowPattern::AllToAll, everyone(128)).inter, 1.0, 0.02);
}
