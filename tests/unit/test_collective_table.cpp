// The collective table (schedule/collective_table.hpp) against nccl-tests' definitions and
// DeepSpeed's logged-size convention, worked by hand (shared docs/collectives.md, docs/zero-comm.md).
#include <gtest/gtest.h>

#include "schedule/collective_table.hpp"

using namespace zerosim;

namespace {
const OpKind kAll[] = {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce};
}

TEST(CollectiveTable, NamesRoundTripAndUnknownIsRefused) {
    for (OpKind k : kAll) {
        auto named = collective_named(collective_info(k).name);
        ASSERT_TRUE(named.has_value()) << collective_info(k).name;
        EXPECT_EQ(*named, k);
        EXPECT_EQ(collective_info(k).kind, k);
    }
    EXPECT_FALSE(collective_named("all_gather_into_tensor").has_value());   // DeepSpeed's name, not nccl-tests'
    EXPECT_FALSE(collective_named("barrier").has_value());
    EXPECT_FALSE(collective_named("").has_value());
}

TEST(CollectiveTable, BusFactorsAreNcclTests) {
    // 8 ranks: all_reduce 2*7/8, all_gather and reduce_scatter 7/8, broadcast and reduce 1.
    EXPECT_DOUBLE_EQ(collective_info(OpKind::AllReduce).bus_factor(8), 1.75);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::AllGather).bus_factor(8), 0.875);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::ReduceScatter).bus_factor(8), 0.875);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::Broadcast).bus_factor(8), 1.0);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::Reduce).bus_factor(8), 1.0);
    // One rank: nothing crosses a link for the ring-shaped ones; broadcast and reduce keep
    // factor 1 as nccl-tests prints them.
    EXPECT_DOUBLE_EQ(collective_info(OpKind::AllReduce).bus_factor(1), 0.0);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::AllGather).bus_factor(1), 0.0);
    EXPECT_DOUBLE_EQ(collective_info(OpKind::Broadcast).bus_factor(1), 1.0);
}

TEST(CollectiveTable, PerRankBuffersFollowGetCollByteCount) {
    // 4096 elements in all on 8 ranks.
    auto ag = collective_info(OpKind::AllGather).per_rank_counts(4096, 8);
    EXPECT_EQ(ag.send, 512);
    EXPECT_EQ(ag.recv, 4096);
    auto rs = collective_info(OpKind::ReduceScatter).per_rank_counts(4096, 8);
    EXPECT_EQ(rs.send, 4096);
    EXPECT_EQ(rs.recv, 512);
    for (OpKind k : {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce}) {
        auto c = collective_info(k).per_rank_counts(4096, 8);
        EXPECT_EQ(c.send, 4096);
        EXPECT_EQ(c.recv, 4096);
        EXPECT_FALSE(collective_info(k).splits_buffer);
    }
    EXPECT_TRUE(collective_info(OpKind::AllGather).splits_buffer);
    EXPECT_TRUE(collective_info(OpKind::ReduceScatter).splits_buffer);
}

TEST(CollectiveTable, DeepSpeedLogsAllGathersShard) {
    // all_gather_into_tensor logs one rank's input: a 1 MiB shard on 8 ranks is an 8 MiB buffer.
    EXPECT_DOUBLE_EQ(collective_info(OpKind::AllGather).buffer_bytes(1048576, 8), 8388608);
    EXPECT_DOUBLE_EQ(logged_bytes_of_buffer(OpKind::AllGather, 8388608, 8), 1048576);
    // reduce_scatter_tensor logs its whole input, all_reduce its whole tensor.
    EXPECT_DOUBLE_EQ(collective_info(OpKind::ReduceScatter).buffer_bytes(8388608, 8), 8388608);
    EXPECT_DOUBLE_EQ(logged_bytes_of_buffer(OpKind::AllReduce, 4096, 8), 4096);
    // A barrier is an all_reduce of one element whatever is logged (0 bytes).
    EXPECT_DOUBLE_EQ(collective_info(OpKind::Barrier).buffer_bytes(0, 8), 1.0);
    EXPECT_EQ(collective_info(OpKind::Barrier).ring_rounds, 2);
}

TEST(CollectiveTable, RingRoundsReductionsAndRoots) {
    EXPECT_EQ(collective_info(OpKind::AllReduce).ring_rounds, 2);
    for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce})
        EXPECT_EQ(collective_info(k).ring_rounds, 1);
    EXPECT_TRUE(collective_info(OpKind::AllReduce).reduces);
    EXPECT_TRUE(collective_info(OpKind::ReduceScatter).reduces);
    EXPECT_TRUE(collective_info(OpKind::Reduce).reduces);
    EXPECT_FALSE(collective_info(OpKind::AllGather).reduces);
    EXPECT_FALSE(collective_info(OpKind::Broadcast).reduces);
    EXPECT_TRUE(collective_info(OpKind::Broadcast).rooted);
    EXPECT_TRUE(collective_info(OpKind::Reduce).rooted);
    EXPECT_FALSE(collective_info(OpKind::AllReduce).rooted);
}

TEST(CollectiveTable, DeepSpeedInPlaceCalls) {
    // The bucket's all_reduce, a parameter's broadcast and reduce run on one buffer;
    // all_gather_into_tensor and reduce_scatter_tensor write a separate output.
    EXPECT_TRUE(deepspeed_calls_in_place(OpKind::AllReduce));
    EXPECT_TRUE(deepspeed_calls_in_place(OpKind::Broadcast));
    EXPECT_TRUE(deepspeed_calls_in_place(OpKind::Reduce));
    EXPECT_FALSE(deepspeed_calls_in_place(OpKind::AllGather));
    EXPECT_FALSE(deepspeed_calls_in_place(OpKind::ReduceScatter));
    EXPECT_FALSE(deepspeed_calls_in_place(OpKind::Compute));
}
