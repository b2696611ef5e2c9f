// The OpenMPI transport model of topologies/localhost.json (sim/timing/mpi_transport.cpp), derived
// by hand from the algorithms' bytes (docs/mpi-collectives.md), 4 ranks.
#include <gtest/gtest.h>

#include "core/json_input.hpp"
#include "schedule/collective_table.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

CollectivePlan localhost_plan(OpKind k, double buffer_bytes) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return plan_collective(t.value(), k, logged_bytes_of_buffer(k, buffer_bytes, 4), 4);
}

}  // namespace

// reduce_scatter_block on 4 ranks: recursive halving below a 1 MiB block moves (p-1)/p S = 0.75 S;
// linear from a 1 MiB block (a 4 MiB buffer) moves (p-1) S + (p-1)/p S = 3.75 S over all ranks,
// shared by the 4 ranks of one host: 0.9375 S. The root-bound 3.75 S made the 4 MiB call 10x the
// 2 MiB one; measured 1.8-2.0x (docs/mpi-collectives.md).
TEST(MpiTransport, ReduceScatterLinearIsTheTotalSharedByTheRanks) {
    const double mib = 1 << 20;
    CollectivePlan halving = localhost_plan(OpKind::ReduceScatter, 2 * mib);
    CollectivePlan linear = localhost_plan(OpKind::ReduceScatter, 4 * mib);
    EXPECT_DOUBLE_EQ(halving.intra_bytes, 0.75 * 2 * mib);
    EXPECT_DOUBLE_EQ(linear.intra_bytes, 3.75 * 4 * mib / 4);
    EXPECT_NEAR(linear.intra_bytes / halving.intra_bytes, 2.5, 1e-12);
}

// The shared-memory BTL's eager limit (docs/mpi-collectives.md): a step whose message reaches
// 4096 bytes pays the rendezvous latency too. localhost.json: base 5 us, 2 us a step, 10 us a
// rendezvous step, 5 GB/s. On 2 ranks all_gather is one step of S/2 (two_proc), broadcast one
// step of S (linear up to 32 KiB).
TEST(MpiTransport, StepsAboveTheEagerLimitPayTheRendezvous) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(t.ok()) << t.error().what();
    auto plan = [&](OpKind k, double buffer) { return plan_collective(t.value(), k, logged_bytes_of_buffer(k, buffer, 2), 2); };
    CollectivePlan eager = plan(OpKind::AllGather, 4096);        // a 2048-byte message
    EXPECT_DOUBLE_EQ(eager.openmpi()->rendezvous_s, 0.0);
    EXPECT_NEAR(eager.latency_s, 7e-6, 1e-15);
    CollectivePlan rendezvous = plan(OpKind::AllGather, 8192);   // a 4096-byte message
    EXPECT_NEAR(rendezvous.openmpi()->rendezvous_s, 10e-6, 1e-15);
    EXPECT_NEAR(rendezvous.latency_s, 17e-6, 1e-15);
    CollectivePlan bcast = plan(OpKind::Broadcast, 4096);
    EXPECT_NEAR(bcast.latency_s, 17e-6, 1e-15);
    EXPECT_DOUBLE_EQ(bcast.intra_bytes, 4096);
}

// Broadcast's linear algorithm on one host: the receivers copy the root's buffer concurrently, so
// the critical path carries S, where chain's p-1 copies in turn carry (p-1) S. 4 ranks: linear
// below 1 MiB, chain from it; both 3 steps.
TEST(MpiTransport, BroadcastLinearCarriesOneCopy) {
    const double kib = 1024;
    CollectivePlan linear = localhost_plan(OpKind::Broadcast, 512 * kib);
    CollectivePlan chain = localhost_plan(OpKind::Broadcast, 1024 * kib);
    EXPECT_DOUBLE_EQ(linear.intra_bytes, 512 * kib);
    EXPECT_DOUBLE_EQ(chain.intra_bytes, 3 * 1024 * kib);
    EXPECT_NEAR(linear.latency_s, chain.latency_s, 1e-15);   // 5 + 3 x (2 + 10) us each
    EXPECT_NEAR(linear.latency_s, 41e-6, 1e-15);
}

// The eager-limit keys describe OpenMPI's transport: refused on a topology NCCL plans.
TEST(MpiTransport, EagerLimitOnlyWithOpenMpiCollectives) {
    auto text = read_text_file(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json", "topology");
    ASSERT_TRUE(text.ok()) << text.error().what();
    Json j = Json::parse(text.value());
    j["intra_node"]["collectives"] = "nccl";
    auto t = parse_topology("nccl-shm.json", j.dump());
    ASSERT_FALSE(t.ok());
    EXPECT_NE(std::string(t.error().what()).find("nccl-shm.json: field 'intra_node.eager_limit_bytes': describes OpenMPI"),
              std::string::npos)
        << t.error().what();
    j["intra_node"]["collectives"] = "openmpi-4.1-tuned";
    j["intra_node"]["eager_limit_bytes"] = 0;
    auto zero = parse_topology("zero-limit.json", j.dump());
    ASSERT_FALSE(zero.ok());
    EXPECT_NE(std::string(zero.error().what()).find("field 'intra_node.eager_limit_bytes'"), std::string::npos) << zero.error().what();
}

// The cache term (docs/mpi-collectives.md): localhost.json gives a rank 2 MiB of cache. An
// all_gather of a 4 MiB buffer on 2 ranks touches its output and its input, 6 MiB, and moves
// S/2 = 2 MiB on the critical path, of which 1 - 2/6 = 2/3 (4/3 MiB) beyond the cache. Uncalibrated
// the two shares go at one bandwidth (2 MiB in all); with a memory scale of 0.5 the share beyond
// counts twice: 2/3 + 2 x 4/3 = 10/3 MiB at the in-cache rate. A 1 MiB buffer (1.5 MiB touched)
// stays within.
TEST(MpiTransport, BytesBeyondTheCacheGoAtTheMemoryScale) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(t.ok()) << t.error().what();
    const double mib = 1 << 20;
    auto plan = [&](const Topology& top, double buffer) {
        return plan_collective(top, OpKind::AllGather, logged_bytes_of_buffer(OpKind::AllGather, buffer, 2), 2);
    };
    CollectivePlan tied = plan(t.value(), 4 * mib);
    EXPECT_NEAR(tied.openmpi()->beyond_cache_bytes, 4 * mib / 3, 1e-6);
    EXPECT_NEAR(tied.openmpi()->in_cache_bytes, 2 * mib / 3, 1e-6);
    EXPECT_NEAR(tied.intra_bytes, 2 * mib, 1e-6);
    Topology slow = t.value();
    slow.collective_scales["all_gather"] = {1.0, 1.0, 0.0, 0.5};
    EXPECT_NEAR(plan(slow, 4 * mib).intra_bytes, 10 * mib / 3, 1e-6);
    CollectivePlan within = plan(slow, 1 * mib);
    EXPECT_EQ(within.openmpi()->beyond_cache_bytes, 0.0);
    EXPECT_NEAR(within.intra_bytes, 0.5 * mib, 1e-6);
}
