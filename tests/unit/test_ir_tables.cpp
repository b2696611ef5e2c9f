// The IR's name tables (sim/schedule/ir.cpp): every enumerator has one name, distinct from the
// others; name -> value -> name round-trips over each whole table; a name not in a table gives
// nullopt. The expected strings are the ones every output prints (schedule JSON, tables, explain),
// written out here by hand.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "schedule/ir.hpp"

using namespace zerosim;

namespace {

// Each (value, expected name) pair: the name is right, unique in the list, and reads back.
template <class E, class Name, class From>
void table_is(const std::vector<std::pair<E, std::string>>& want, Name name, From from) {
    std::set<std::string> seen;
    for (const auto& [value, expected] : want) {
        EXPECT_EQ(name(value), expected);
        EXPECT_TRUE(seen.insert(expected).second) << expected << " twice";
        auto back = from(expected);
        ASSERT_TRUE(back.has_value()) << expected;
        EXPECT_EQ(*back, value) << expected;
    }
    EXPECT_FALSE(from("").has_value());
    EXPECT_FALSE(from("no_such_name").has_value());
    EXPECT_FALSE(from(want.front().second + " ").has_value());   // exact match only
}

}  // namespace

TEST(IrTables, OpRecordNames) {
    table_is<OpKind>({{OpKind::AllReduce, "all_reduce"},
                      {OpKind::AllGather, "all_gather_into_tensor"},
                      {OpKind::ReduceScatter, "reduce_scatter_tensor"},
                      {OpKind::Broadcast, "broadcast"},
                      {OpKind::Reduce, "reduce"},
                      {OpKind::Barrier, "barrier"},
                      {OpKind::Compute, "compute"},
                      {OpKind::AllToAll, "all_to_all_single"}},
                     op_record_name, op_record_from_name);
}

TEST(IrTables, PhaseStreamReduceOpAndComputeKindNames) {
    table_is<Phase>({{Phase::Init, "init"}, {Phase::Forward, "forward"}, {Phase::Backward, "backward"}, {Phase::Step, "step"}},
                    phase_name, phase_from_name);
    table_is<Stream>({{Stream::Compute, "compute"}, {Stream::Comm, "comm"}, {Stream::Reduce, "reduce"}, {Stream::Fetch, "fetch"}},
                     stream_name, stream_from_name);
    table_is<ReduceOp>({{ReduceOp::None, "none"}, {ReduceOp::Sum, "sum"}, {ReduceOp::Max, "max"}}, reduce_op_name,
                       reduce_op_from_name);
    table_is<ComputeKind>({{ComputeKind::None, "none"},
                           {ComputeKind::Forward, "forward"},
                           {ComputeKind::Backward, "backward"},
                           {ComputeKind::OptimizerStep, "optimizer_step"}},
                          compute_kind_name, compute_kind_from_name);
}

TEST(IrTables, HostKindNames) {
    table_is<HostKind>({{HostKind::PreForward, "pre_forward"},
                        {HostKind::PreBackward, "pre_backward"},
                        {HostKind::FetchWait, "fetch_wait"},
                        {HostKind::PostForward, "post_forward"},
                        {HostKind::PostBackward, "post_backward"},
                        {HostKind::ReleaseAll, "release_all"},
                        {HostKind::GradientFlush, "gradient_flush"},
                        {HostKind::ReduceSync, "reduce_sync"}},
                       host_kind_name, host_kind_from_name);
}

TEST(IrTables, PayloadAndPartitionKindNames) {
    table_is<Payload>({{Payload::Compute, "compute"},
                       {Payload::GradientBucket, "gradient_bucket"},
                       {Payload::GradientSlices, "gradient_slices"},
                       {Payload::GradientShards, "gradient_shards"},
                       {Payload::ParameterShards, "parameter_shards"},
                       {Payload::ParameterPartitions, "parameter_partitions"},
                       {Payload::ParameterBroadcast, "parameter_broadcast"},
                       {Payload::OverflowFlag, "overflow_flag"},
                       {Payload::GradientNorm, "gradient_norm"},
                       {Payload::TraceCheck, "trace_check"},
                       {Payload::Barrier, "barrier"},
                       {Payload::QuantizedShards, "quantized_shards"},
                       {Payload::QuantScales, "quant_scales"},
                       {Payload::QuantizedGradient, "quantized_gradient"},
                       {Payload::GradientPartitions, "gradient_partitions"}},
                      payload_name, payload_from_name);
    table_is<PartitionKind>({{PartitionKind::Replicated, "replicated"},
                             {PartitionKind::FlatGroups, "flat_groups"},
                             {PartitionKind::PerParameter, "per_parameter"}},
                            partition_kind_name, partition_kind_from_name);
}

TEST(IrTables, GroupKindNames) {
    table_is<GroupKind>({{GroupKind::Dp, "dp"},
                         {GroupKind::Hpz, "hpz"},
                         {GroupKind::QgzIntra, "qgz_intra"},
                         {GroupKind::QgzInter, "qgz_inter"},
                         {GroupKind::MicsShard, "mics_shard"},
                         {GroupKind::MicsReplica, "mics_replica"},
                         {GroupKind::FsdpShard, "fsdp_shard"},
                         {GroupKind::FsdpReplica, "fsdp_replica"}},
                        group_name, group_from_name);
    std::ostringstream out;
    out << GroupKind::MicsReplica;
    EXPECT_EQ(out.str(), "mics_replica");
}

// The whole rule table: entry i is RuleId i, names are unique and read back, each rule has its
// summary; and a few ids spelled out, the strings the reference runs' outputs print.
TEST(IrTables, RuleTableRoundTripsAndNamesAreUnique) {
    const auto& rules = all_rules();
    ASSERT_EQ(rules.size(), static_cast<size_t>(RuleId::ComputeOptimizerStep) + 1);
    std::set<std::string> names;
    for (size_t i = 0; i < rules.size(); ++i) {
        const Rule& r = rules[i];
        EXPECT_EQ(static_cast<size_t>(r.id), i) << r.name;
        EXPECT_STREQ(rule_info(r.id).name, r.name);
        EXPECT_STREQ(rule_name(r.id), r.name);
        EXPECT_TRUE(names.insert(r.name).second) << r.name << " twice";
        EXPECT_NE(std::string(r.summary), "") << r.name;
        auto back = rule_from_name(r.name);
        ASSERT_TRUE(back.has_value()) << r.name;
        EXPECT_EQ(*back, r.id);
    }
    EXPECT_STREQ(rule_name(RuleId::InitBroadcastModel), "init.broadcast_model");
    EXPECT_STREQ(rule_name(RuleId::Stage3Fetch), "stage3.fetch");
    EXPECT_STREQ(rule_name(RuleId::Stage12FlushMultiRankAllreduce), "stage12.flush.multi_rank_allreduce");
    EXPECT_STREQ(rule_name(RuleId::QgzInterScales), "qgz.inter_scales");
    EXPECT_STREQ(rule_name(RuleId::WhatifHsdpAllreduce), "whatif.hsdp.allreduce");
    EXPECT_STREQ(rule_name(RuleId::ComputeOptimizerStep), "compute.optimizer_step");
    EXPECT_FALSE(rule_from_name("stage3").has_value());
    EXPECT_FALSE(rule_from_name("stage3.fetch.").has_value());
    EXPECT_FALSE(rule_from_name("Stage3Fetch").has_value());
    std::ostringstream out;
    out << RuleId::Stage3Prefetch;
    EXPECT_EQ(out.str(), "stage3.prefetch");
}

// "Each rule has one payload": qwZ's int8 gathers are rules of their own, not stage3.fetch with
// another payload.
TEST(IrTables, QuantizedGathersHaveTheirOwnRules) {
    EXPECT_EQ(rule_info(RuleId::Stage3Fetch).payload, Payload::ParameterShards);
    EXPECT_EQ(rule_info(RuleId::Stage3Prefetch).payload, Payload::ParameterShards);
    EXPECT_EQ(rule_info(RuleId::QwzFetch).payload, Payload::QuantizedShards);
    EXPECT_EQ(rule_info(RuleId::QwzPrefetch).payload, Payload::QuantizedShards);
    EXPECT_STREQ(rule_name(RuleId::QwzFetch), "qwz.fetch");
    EXPECT_STREQ(rule_name(RuleId::QwzPrefetch), "qwz.prefetch");
}
