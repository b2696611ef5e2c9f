// Fabric mode's mixed node designs (docs/fabric.md "Mixed node designs"): a node with fewer NICs
// or NICs of another speed, from the topology's "whatif": {"nodes": {...}} block. Derived by hand.
#include <gtest/gtest.h>

#include <numeric>

#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

// 4 nodes x 8 GPUs x 8 NICs of B = 10 GB/s, every NIC under one switch, with `whatif` as given.
Result<Topology> cluster(const std::string& whatif) {
    std::string json = R"({"name": "mixed", "nodes": 4, "gpus_per_node": 8,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 100},
      "nics": {"per_node": 8, "bandwidth_gbs": 10}, "network": {"kind": "fat_tree"})";
    if (!whatif.empty()) json += R"(, "whatif": )" + whatif;
    return parse_topology("mixed.json", json + "}");
}

std::vector<std::vector<int>> everyone(int n) {
    std::vector<int> r(static_cast<size_t>(n));
    std::iota(r.begin(), r.end(), 0);
    return {r};
}

std::shared_ptr<FabricModel> model(const std::string& whatif, const FabricOptions& o = {}) {
    auto t = cluster(whatif);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    auto m = FabricModel::build(t.value(), 32, o);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

// A 1 GB ring all_reduce over the 32 ranks: the network term with the model's factors over the
// term on the node design.
double network_term_ratio(FabricModel& m) {
    ScheduleMeta meta;
    meta.world = 32;
    EngineAdjust a = m.engine_adjust(meta);
    CollectivePlan plan = plan_collective_with(m.ideal_topology(), OpKind::AllReduce, 1e9, 32, Algorithm::Ring, Protocol::Simple);
    CollectivePlan slowed = plan;
    Op op;
    op.kind = OpKind::AllReduce;
    a.collective(op, slowed);
    EXPECT_GT(plan.inter_bytes, 0);
    EXPECT_DOUBLE_EQ(slowed.latency_s, plan.latency_s);
    EXPECT_DOUBLE_EQ(slowed.intra_rate, plan.intra_rate);
    return (slowed.inter_bytes / slowed.inter_rate) / (plan.inter_bytes / plan.inter_rate);
}

}  // namespace

TEST(FabricMixed, NodeWithHalfItsNicsDoublesTheRingsNetworkTerm) {
    // The design: a ring channel per rail j = 0..7, NIC j of node i -> NIC j of node i+1 (mod 4),
    // one flow out of and one into each NIC port: ideal time w/B. Node 2 keeps NICs 0-3: rail j
    // leaves and enters it by NIC j mod 4, so each of its NICs sends two flows (rails j and j+4, to
    // node 3's NICs j and j+4) and receives two (from node 1's). Two flows share a port of B: each
    // gets B/2 and ends at 2w/B (the flows feeding node 2 are held to B/2 at its port too, and no
    // other port carries more than one): network x2, NVLink x1.
    auto m = model(R"({"nodes": {"2": {"nics": 4}}})");
    FabricFactors f = m->factors(FlowPattern::Ring, everyone(32));
    EXPECT_NEAR(f.inter, 2.0, 1e-6);
    EXPECT_NEAR(f.intra, 1.0, 1e-6);
    EXPECT_NEAR(network_term_ratio(*model(R"({"nodes": {"2": {"nics": 4}}})")), 2.0, 1e-6);
    // One NIC left on node 2: all 8 rails through it, 8 flows each way on one port: x8.
    EXPECT_NEAR(model(R"({"nodes": {"2": {"nics": 1}}})")->factors(FlowPattern::Ring, everyone(32)).inter, 8.0, 1e-6);
}

TEST(FabricMixed, NodeWithNicsAtHalfSpeedDoublesTheRingsNetworkTerm) {
    // Node 2's eight NICs at 5 GB/s (another node design): each still carries one flow each way,
    // at B/2, ending at 2w/B against the design's w/B: x2. The ring runs at its slowest link.
    auto m = model(R"({"nodes": {"2": {"nic_bandwidth_gbs": 5}}})");
    EXPECT_NEAR(m->factors(FlowPattern::Ring, everyone(32)).inter, 2.0, 1e-6);
    EXPECT_NEAR(network_term_ratio(*model(R"({"nodes": {"2": {"nic_bandwidth_gbs": 5}}})")), 2.0, 1e-6);
    // Both on one node: 4 NICs at B/2, two flows each: each flow at B/4, x4.
    EXPECT_NEAR(model(R"({"nodes": {"2": {"nics": 4, "nic_bandwidth_gbs": 5}}})")->factors(FlowPattern::Ring, everyone(32)).inter,
                4.0, 1e-6);
}

TEST(FabricMixed, EveryNodeAsTheDesignIsUnslowed) {
    // A node "overridden" with the design's own figures, and no override at all: x1 for each pattern.
    for (const std::string& w : {std::string(R"({"nodes": {"2": {"nics": 8, "nic_bandwidth_gbs": 10}}})"), std::string()}) {
        auto m = model(w);
        for (FlowPattern p : {FlowPattern::Ring, FlowPattern::Tree, FlowPattern::AllToAll})
            EXPECT_NEAR(m->factors(p, everyone(32)).inter, 1.0, 1e-6) << w << " " << static_cast<int>(p);
        EXPECT_NEAR(network_term_ratio(*m), 1.0, 1e-9) << w;
    }
}

TEST(FabricMixed, NodeDesignErrorsNameTheFieldAndWhatWasExpected) {
    auto too_many = cluster(R"({"nodes": {"1": {"nics": 12}}})");
    ASSERT_FALSE(too_many.ok());
    EXPECT_EQ(too_many.error().file, "mixed.json");
    EXPECT_EQ(too_many.error().field, "whatif.nodes.1.nics");
    EXPECT_NE(too_many.error().message.find("expected 1 to 8 NICs (nics.per_node: the node design's), found 12"),
              std::string::npos)
        << too_many.error().message;
    auto not_a_node = cluster(R"({"nodes": {"node1": {"nics": 4}}})");
    ASSERT_FALSE(not_a_node.ok());
    EXPECT_NE(not_a_node.error().message.find("expected a node number"), std::string::npos);
    auto typo = cluster(R"({"nodes": {"1": {"nic": 4}}})");
    ASSERT_FALSE(typo.ok());
    EXPECT_NE(typo.error().message.find("did you mean 'nics'"), std::string::npos) << typo.error().message;
    EXPECT_FALSE(cluster(R"({"nodes": {"1": {"nic_bandwidth_gbs": 0}}})").ok());
    // The node number is checked against the cluster (as --nodes scales it) when the fabric is built.
    auto far = FabricModel::build(cluster(R"({"nodes": {"9": {"nics": 4}}})").value(), 32, {});
    ASSERT_FALSE(far.ok());
    EXPECT_EQ(far.error().file, "mixed.json");
    EXPECT_EQ(far.error().field, "whatif.nodes.9");
    EXPECT_NE(far.error().message.find("node 9 is not in the cluster, which has 4 (node0 to node3)"), std::string::npos);
    // --degrade names only NICs the node has.
    FabricOptions o;
    o.degrade.push_back(parse_fabric_what_if("node2.nic5=0.5", "--degrade").value());
    auto gone = FabricModel::build(cluster(R"({"nodes": {"2": {"nics": 4}}})").value(), 32, o);
    ASSERT_FALSE(gone.ok());
    EXPECT_NE(gone.error().message.find("node 2 has 4 NICs on the network (nic0 to nic3)"), std::string::npos)
        << gone.error().message;
}
