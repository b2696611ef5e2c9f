// NVLSTree, CollNet and the release and fabric gates across nodes (issue 16), by hand on a small
// topology: 2 nodes of 4 Hopper-class GPUs, NVSwitch at 100 GB/s (one 100 GB/s channel), NVLS at
// 0.5, 4 NICs of 10 GB/s per node (one per GPU), no NIC latency, no launch overhead.
#include <gtest/gtest.h>

#include <algorithm>

#include "timing/collectives.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

Topology hopper_pair(const std::string& nics_extra = "", const std::string& nccl = "") {
    std::string json = R"({"name": "test", "nodes": 2, "gpus_per_node": 4,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000, "compute_capability": 90},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 100,
                     "nvls": true, "nvls_efficiency": 0.5},
      "nics": {"per_node": 4, "bandwidth_gbs": 10)" + nics_extra + R"(},
      "network": {"kind": "fat_tree"})" + nccl + "}";
    auto t = parse_topology("test-topology.json", json);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

bool weighs(const Topology& t, OpKind k, int64_t world, Algorithm a) {
    auto c = tuner_candidates(t, k, world);
    return std::any_of(c.begin(), c.end(), [&](const TunerCandidate& x) { return x.algorithm == a; });
}

}  // namespace

TEST(AcrossNodes, NvlsTreeMovesTheNodesShareOnceEachWay) {
    // S = 8e8 B on 8 ranks: NVLS inside moves S(1 + 1/4) = 1e9 B over NVLink at 100 x 0.5 =
    // 50 GB/s (20 ms); across two nodes a node sends S, S/4 = 2e8 B per GPU at its 10 GB/s NIC
    // (20 ms). NCCL's ceiling (4 heads x 57.7 GB/s bus, Hopper, 2 nodes) would allow 1.4e9 B of
    // bus bytes in 6.07 ms: not reached. Latency 25 + 2 x log2(2) x 20.9 = 66.8 us.
    Topology t = hopper_pair();
    auto p = plan_collective_with(t, OpKind::AllReduce, 8e8, 8, Algorithm::NVLSTree, Protocol::Simple);
    EXPECT_NEAR(p.intra_bytes, 1e9, 1e-3);
    EXPECT_NEAR(p.inter_bytes, 2e8, 1e-3);
    EXPECT_NEAR(p.intra_rate, 50e9, 1e-3);
    EXPECT_NEAR(p.inter_rate, 10e9, 1e-3);
    EXPECT_NEAR(p.latency_s, 66.8e-6, 1e-12);
    EXPECT_NEAR(p.time_alone_s(), 20e-3 + 66.8e-6, 1e-12);
}

TEST(AcrossNodes, NvlsTreeCappedByNcclsPerChannelCeiling) {
    // With 100 GB/s NICs (2e8 B per GPU in 2 ms) and 1000 GB/s NVLink at 0.5 (1e9 B in 2 ms),
    // NCCL's ceiling binds: 4 heads x 57.7 = 230.8 GB/s of bus bandwidth for 2 x 7/8 x S =
    // 1.4e9 B, 6.0659 ms; the plan is slowed to it.
    std::string json = R"({"name": "test", "nodes": 2, "gpus_per_node": 4,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000, "compute_capability": 90},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 1000, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 1000,
                     "nvls": true, "nvls_efficiency": 0.5},
      "nics": {"per_node": 4, "bandwidth_gbs": 100}, "network": {"kind": "fat_tree"}})";
    Topology t = parse_topology("t.json", json).value();
    auto p = plan_collective_with(t, OpKind::AllReduce, 8e8, 8, Algorithm::NVLSTree, Protocol::Simple);
    EXPECT_NEAR(p.time_alone_s() - p.latency_s, 1.4e9 / 230.8e9, 1e-9);
}

TEST(AcrossNodes, CollNetDirectAndChainOnASharpFabric) {
    // S = 8e8 B. Direct: 2S x 3/4 = 1.2e9 B over NVLink (12 ms); S/4 = 2e8 B per GPU to the
    // switch at 10 GB/s x 0.85 (Hopper) = 8.5 GB/s: 23.529 ms; latency (v2.28) 2 x (3.7 + 3 x 0.4)
    // + 31 = 40.8 us. Chain: 2S = 1.6e9 B over NVLink (16 ms), 2e8 B at 10 GB/s (20 ms); latency
    // 2 x 3 x 2.8 + 30 = 46.8 us. The tuner takes the Chain.
    Topology t = hopper_pair(R"(, "sharp": true)");
    auto d = plan_collective_with(t, OpKind::AllReduce, 8e8, 8, Algorithm::CollNetDirect, Protocol::Simple);
    EXPECT_NEAR(d.intra_bytes, 1.2e9, 1e-3);
    EXPECT_NEAR(d.inter_rate, 8.5e9, 1e-3);
    EXPECT_NEAR(d.time_alone_s(), 2e8 / 8.5e9 + 40.8e-6, 1e-12);
    auto c = plan_collective_with(t, OpKind::AllReduce, 8e8, 8, Algorithm::CollNetChain, Protocol::Simple);
    EXPECT_NEAR(c.time_alone_s(), 20e-3 + 46.8e-6, 1e-12);
    EXPECT_EQ(plan_collective(t, OpKind::AllReduce, 8e8, 8, TunerChoice{Algorithm::CollNetChain, {}}).nccl()->algorithm,
              Algorithm::CollNetChain);
    // NCCL 2.13 has Direct only, with its older latencies: 2 x (8.0 + 1.2) + 10.7 = 29.1 us.
    Topology old = hopper_pair(R"(, "sharp": true)", R"(, "nccl": {"version": "2.13"})");
    EXPECT_FALSE(weighs(old, OpKind::AllReduce, 8, Algorithm::CollNetChain));
    EXPECT_NEAR(plan_collective_with(old, OpKind::AllReduce, 8e8, 8, Algorithm::CollNetDirect, Protocol::Simple).latency_s,
                29.1e-6, 1e-12);
    // Without SHARP there is no CollNet.
    EXPECT_FALSE(weighs(hopper_pair(), OpKind::AllReduce, 8, Algorithm::CollNetDirect));
}

TEST(AcrossNodes, WhatEachReleaseAndFabricLetsTheTunerWeigh) {
    Topology t = hopper_pair();
    EXPECT_TRUE(weighs(t, OpKind::AllReduce, 8, Algorithm::NVLSTree));
    EXPECT_FALSE(weighs(t, OpKind::AllReduce, 4, Algorithm::NVLSTree));   // one node: NVLS instead
    EXPECT_TRUE(weighs(t, OpKind::AllReduce, 4, Algorithm::NVLS));
    EXPECT_FALSE(weighs(t, OpKind::AllReduce, 8, Algorithm::NVLS));       // NVLS across nodes needs CollNet
    t.nccl_version = *NcclVersion::parse("2.17");
    EXPECT_FALSE(weighs(t, OpKind::AllReduce, 8, Algorithm::NVLSTree));  // NVLSTree from 2.18
    // AWS's tuner plugin keeps rings and trees; EFA runs Simple only across nodes, all three
    // protocols inside one.
    Topology efa = hopper_pair(R"(, "kind": "efa")", R"(, "nccl": {"tuner": "aws-ofi"})");
    EXPECT_FALSE(weighs(efa, OpKind::AllReduce, 8, Algorithm::NVLSTree));
    for (const TunerCandidate& c : tuner_candidates(efa, OpKind::AllReduce, 8)) EXPECT_EQ(c.protocol, Protocol::Simple);
    EXPECT_EQ(tuner_candidates(efa, OpKind::AllGather, 4).size(), 3u);
    // PAT: all_gather / reduce_scatter with one GPU per node, from 2.23.
    std::string one_per_node = R"({"name": "t", "nodes": 4, "gpus_per_node": 1,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100}, "nics": {"per_node": 1, "bandwidth_gbs": 10},
      "network": {"kind": "fat_tree"}})";
    Topology single = parse_topology("t.json", one_per_node).value();
    EXPECT_TRUE(weighs(single, OpKind::AllGather, 4, Algorithm::PAT));
    EXPECT_FALSE(weighs(t, OpKind::AllGather, 8, Algorithm::PAT));
    single.nccl_version = *NcclVersion::parse("2.21");
    EXPECT_FALSE(weighs(single, OpKind::ReduceScatter, 4, Algorithm::PAT));
    // Releases as --nccl reads them.
    EXPECT_EQ(NcclVersion::parse("2.26.2+cuda12.8")->str(), "2.26");
    EXPECT_FALSE(NcclVersion::parse("3.1"));
    EXPECT_FALSE(NcclVersion::parse("2"));
}

TEST(AcrossNodes, AllToAllSendsTheOffNodeShareThroughTheNics) {
    // S = 8e8 B per rank on 8 ranks: 3/8 S = 3e8 B to the node's other GPUs over NVLink (3 ms),
    // 4/8 S = 4e8 B through the 10 GB/s NIC share at the p2p share 0.47 (85.11 ms).
    Topology t = hopper_pair();
    auto p = plan_all_to_all(t, 8e8, 8);
    EXPECT_NEAR(p.intra_bytes, 3e8, 1e-3);
    EXPECT_NEAR(p.inter_bytes, 4e8, 1e-3);
    EXPECT_NEAR(p.inter_rate, 4.7e9, 1e-3);
    // Latency: Simple base 8.4 + one NVLink step 3.4 + one network step 14 = 25.8 us.
    EXPECT_NEAR(p.latency_s, 25.8e-6, 1e-12);
}

TEST(AcrossNodes, TreeSimpleFillsItsPipelineOneChunkAtATime) {
    // Tree Simple across the two nodes, S = 8e8 B on 8 ranks: 8 channels (2 per NIC, 4 NICs),
    // each with S/8 = 1e8 B in chunks of one Simple step, 4 MiB / 8 = 524288 B. Rates as run:
    // NVLink 100 x 0.92 = 92 GB/s, NIC 10 x 0.92 = 9.2 GB/s. A chunk takes 524288 x 8 / 92e9 =
    // 45.590 us over one NVLink hop (the channel's eighth) and 524288 x 8 / (4 x 9.2e9) =
    // 113.975 us over a network hop (its share of the node's four NICs). Through 2 x 3 NVLink hops
    // and 2 network hops: 501.49 us, less the slowest stage (the NIC's 113.975; NVLink carries
    // each chunk up and down, 91.18): 387.52 us on top of NCCL's 8.4 + 2 x (3 x 4.0 + 14) =
    // 60.4 us.
    Topology t = hopper_pair();
    auto big = plan_collective_with(t, OpKind::AllReduce, 8e8, 8, Algorithm::Tree, Protocol::Simple);
    EXPECT_NEAR(big.intra_rate, 92e9, 1);
    EXPECT_NEAR(big.inter_rate, 9.2e9, 1);
    EXPECT_NEAR(big.latency_s * 1e6, 60.4 + 387.52, 0.01);
    // S = 2e6 B: still 8 channels (2e6 B >= 8 x 512 threads x 64 B), a chunk is a channel's
    // whole 250000 B; NCCL's Simple correction halves the rates (46 / 4.6 GB/s): 43.478 us per
    // NVLink hop, 108.696 per network hop, 6 x 43.478 + 2 x 108.696 - 108.696 = 369.57 us.
    auto mid = plan_collective_with(t, OpKind::AllReduce, 2e6, 8, Algorithm::Tree, Protocol::Simple);
    EXPECT_NEAR(mid.inter_rate, 4.6e9, 1);
    EXPECT_NEAR(mid.latency_s * 1e6, 60.4 + 369.57, 0.01);
}
