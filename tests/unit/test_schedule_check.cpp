// The runtime's contract in the IR: every op's payload kind and the partition layout, set by the
// generator and worked out here by hand on a two-parameter model; and the one IR check
// (schedule/check.hpp), which must name the op and the field of each broken rule.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/check.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

// l1.weight has 5 elements, l2.weight 9 (14 in all). At world 4 the flat group is padded to 16 (a
// multiple of 2*4) and cut into partitions of 4: l1 = [0,5) -> p0 [0,4) + p1 [4,5);
// l2 = [5,14) -> p1 [5,8) + p2 [8,12) + p3 [12,14).
const char* kTwoLayers = R"({"parameters": [{"name": "l1.weight", "shape": [5]}, {"name": "l2.weight", "shape": [9]}]})";

Schedule build(const std::string& ds_json, int64_t world, std::vector<int> overflow = {}) {
    auto m = model_from_param_list_json("two-layers.json", kTwoLayers);
    EXPECT_TRUE(m.ok());
    auto c = parse_ds_config("ds.json", ds_json);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    ScheduleOptions o;
    o.world = world;
    o.steps = 1;
    o.overflow_steps = std::move(overflow);
    auto s = build_schedule(m.value(), c.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

std::vector<Payload> payloads(const Schedule& s) {
    std::vector<Payload> p;
    for (const auto& op : s.ops) p.push_back(op.payload);
    return p;
}

const Op& first(const Schedule& s, RuleId rule) {
    for (const auto& op : s.ops)
        if (op.rule == rule) return op;
    ADD_FAILURE() << "no op of rule " << rule;
    return s.ops.front();
}

int64_t index_of(const Schedule& s, RuleId rule) { return first(s, rule).id; }

// The check's error for `s`, as one line; "" when it passes.
std::string check(const Schedule& s) {
    auto e = check_schedule(s, "s.json");
    return e ? e->what() : "";
}

std::string at(int64_t k) { return "s.json: field 'ops[" + std::to_string(k) + "]': "; }

const char* kStage2 = R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})";

}  // namespace

// Stage 2 at world 4: rank 0 broadcasts both weights; forward l1, l2; backward l2, l1; the epilogue
// flush sends the whole bucket as one all_reduce of the per-owner slices (l2's three, then l1's
// two); the step all_reduces the norm, updates this rank's 4 elements and gathers the partitions.
TEST(Payloads, Stage2ByHand) {
    Schedule s = build(kStage2, 4);
    using P = Payload;
    EXPECT_EQ(payloads(s), (std::vector<P>{P::ParameterBroadcast, P::ParameterBroadcast, P::Compute, P::Compute, P::Compute,
                                           P::Compute, P::GradientSlices, P::GradientNorm, P::Compute,
                                           P::ParameterPartitions}));
    const auto& L = s.meta.partition;
    EXPECT_EQ(L.kind, PartitionKind::FlatGroups);
    ASSERT_EQ(L.groups.size(), 1u);
    EXPECT_EQ(L.groups[0].order, (std::vector<int>{0, 1}));
    EXPECT_EQ(L.groups[0].offsets, (std::vector<int64_t>{0, 5}));
    EXPECT_EQ(L.groups[0].partition_size, 4);
    EXPECT_EQ(check(s), "");
}

// fp16 adds the overflow flag before the step; stage 0 with fp32 clipping the norm, its gradients
// as slices of whole parameters, and keeps everything on every rank.
TEST(Payloads, OverflowFlagAndReplicatedStage0) {
    Schedule fp16 = build(R"({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true},
                              "zero_optimization": {"stage": 1}})", 4);
    EXPECT_EQ(first(fp16, RuleId::StepOverflowCheck).payload, Payload::OverflowFlag);
    EXPECT_EQ(check(fp16), "");

    Schedule z0 = build(R"({"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0})", 4);
    EXPECT_EQ(first(z0, RuleId::Stage0BucketAllreduce).payload, Payload::GradientSlices);
    EXPECT_EQ(first(z0, RuleId::Stage0ClipGradNorm).payload, Payload::GradientNorm);
    EXPECT_EQ(z0.meta.partition.kind, PartitionKind::Replicated);
    EXPECT_TRUE(z0.meta.partition.groups.empty());
    EXPECT_EQ(check(z0), "");
}

// Stage 3 at world 2: each weight broadcast twice at start (engine, _zero_init_param), three set-up
// barriers, one start-up gather per parameter of its shard; the trace check; gradients reduce-
// scattered as padded shards, or (reduce_scatter off) all_reduced whole.
TEST(Payloads, Stage3ByHand) {
    Schedule s = build(R"({"train_micro_batch_size_per_gpu": 1,
                           "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})", 2);
    EXPECT_EQ(s.meta.partition.kind, PartitionKind::PerParameter);
    std::multiset<Payload> init;
    for (const auto& op : s.ops)
        if (op.step < 0) init.insert(op.payload);
    EXPECT_EQ(init.count(Payload::ParameterBroadcast), 4u);
    EXPECT_EQ(init.count(Payload::Barrier), 3u);
    EXPECT_EQ(init.count(Payload::ParameterShards), 2u);
    EXPECT_EQ(init.size(), 9u);
    EXPECT_EQ(first(s, RuleId::Stage3Fetch).payload, Payload::ParameterShards);
    EXPECT_EQ(first(s, RuleId::Stage3TraceCheck).payload, Payload::TraceCheck);
    const Op& rs = first(s, RuleId::Stage3FlushReduceScatter);
    EXPECT_EQ(rs.payload, Payload::GradientShards);
    EXPECT_EQ(rs.elements, 2 * (3 + 5));   // l1: 2 x ceil(5/2), l2: 2 x ceil(9/2)
    EXPECT_EQ(first(s, RuleId::Stage3StepGradNorm).payload, Payload::GradientNorm);
    EXPECT_EQ(check(s), "");

    Schedule ar = build(R"({"train_micro_batch_size_per_gpu": 1,
                            "zero_optimization": {"stage": 3, "reduce_scatter": false}})", 2);
    const Op& flush = first(ar, RuleId::Stage3FlushAllreduce);
    EXPECT_EQ(flush.payload, Payload::GradientBucket);
    EXPECT_EQ(flush.elements, 14);
    EXPECT_EQ(check(ar), "");
}

// Every shipped config on the tiny GPT, at 4 ranks and at 1, passes the check.
TEST(ScheduleCheck, GeneratedSchedulesPass) {
    auto model = load_model(test::config("models/tiny-gpt.json"));
    ASSERT_TRUE(model.ok());
    for (const auto& e : std::filesystem::directory_iterator(test::config("deepspeed"))) {
        auto cfg = load_ds_config(e.path().string());
        ASSERT_TRUE(cfg.ok()) << e.path();
        for (int64_t world : {1, 4}) {
            ScheduleOptions o;
            o.world = world;
            o.steps = 2;
            auto s = build_schedule(model.value(), cfg.value(), o);
            ASSERT_TRUE(s.ok()) << e.path();
            EXPECT_EQ(check(s.value()), "") << e.path() << " world " << world;
        }
    }
}

TEST(ScheduleCheck, PayloadThatDoesNotFitTheKind) {
    Schedule s = build(kStage2, 4);
    int64_t k = index_of(s, RuleId::Stage12StepGradNorm);
    s.ops[k].payload = Payload::ParameterShards;
    EXPECT_EQ(check(s), at(k) + "payload parameter_shards cannot travel in all_reduce");
    s.ops[k].payload = Payload::Compute;
    EXPECT_EQ(check(s), at(k) + "payload compute cannot travel in all_reduce");
}

// Every rule has one payload: an op whose payload could travel in its collective but is not its
// rule's is refused.
TEST(ScheduleCheck, PayloadThatIsNotTheRules) {
    Schedule s = build(kStage2, 4);
    int64_t k = index_of(s, RuleId::Stage12StepGradNorm);
    s.ops[k].payload = Payload::GradientSlices;
    EXPECT_EQ(check(s), at(k) + "payload gradient_slices is not rule stage12.step.grad_norm's (gradient_norm)");
    s.ops[k].payload = Payload::GradientNorm;
    s.ops[k].rule = RuleId::Stage0BucketAllreduce;
    EXPECT_EQ(check(s), at(k) + "payload gradient_norm is not rule stage0.bucket_allreduce's (gradient_slices)");
}

TEST(ScheduleCheck, DependencyOnALaterOp) {
    Schedule s = build(kStage2, 4);
    int64_t k = index_of(s, RuleId::Stage12FlushMultiRankAllreduce);
    s.ops[k].deps.push_back(k + 1);
    EXPECT_EQ(check(s), at(k) + "dependency " + std::to_string(k + 1) + " (deps) is not an earlier op");
}

// The layout and the ops must agree: a partition gather or an optimizer step of another size, a
// reduce to a rank that does not own the slice, a layout for another kind of partitioning.
TEST(ScheduleCheck, LayoutMismatchNamesTheOp) {
    Schedule s = build(kStage2, 4);
    int64_t g = index_of(s, RuleId::Stage12StepAllgatherPartitions);
    s.ops[g].elements = 5;
    EXPECT_EQ(check(s), at(g) + "group 0's partition has 4 elements; the op sends 5");

    s = build(kStage2, 4);
    int64_t k = index_of(s, RuleId::ComputeOptimizerStep);
    s.ops[k].elements = 16;
    EXPECT_EQ(check(s), at(k) + "covers 16 elements; group 0's partition has 4");

    // The same schedule read as stage 3's per-parameter layout: the step covers 4 elements, the
    // shards of l1 and l2 at world 4 hold ceil(5/4) + ceil(9/4) = 5.
    s = build(kStage2, 4);
    s.meta.partition = {PartitionKind::PerParameter, {}};
    EXPECT_EQ(check(s), at(k) + "covers 4 elements; the shards of its params hold 5");

    // Reduce per owner: the slices of each reduce belong to its root (l2's [0,3) to rank 1).
    s = build(R"({"train_micro_batch_size_per_gpu": 1,
                  "zero_optimization": {"stage": 2, "use_multi_rank_bucket_allreduce": false}})", 4);
    int64_t r = index_of(s, RuleId::Stage12FlushReducePerRank);
    ASSERT_EQ(s.ops[r].root, 1);
    s.ops[r].root = 2;
    EXPECT_EQ(check(s), at(r) + "segment [0, +3) of l2.weight is not in the partition of rank 2, the reduce's root");
}

// The layout itself: each parameter of the group once, end to end, cut as the padding rule says.
TEST(ScheduleCheck, BrokenLayoutNamesTheField) {
    Schedule s = build(kStage2, 4);
    s.meta.partition.groups[0].partition_size = 6;
    EXPECT_EQ(check(s), "s.json: field 'meta.partition.groups[0].partition_size': 6 elements per rank; 14 elements over "
                        "4 ranks are cut into 4");
    s = build(kStage2, 4);
    s.meta.partition.groups[0].offsets = {0, 4};
    EXPECT_EQ(check(s), "s.json: field 'meta.partition.groups[0].offsets': l2.weight starts at 4, not where the one "
                        "before ends (5)");
    s = build(kStage2, 4);
    s.meta.partition.groups[0].order = {0};
    s.meta.partition.groups[0].offsets = {0};
    EXPECT_EQ(check(s), "s.json: field 'meta.partition.groups[0].order': misses l2.weight");
}

// The JSON carries both, and its reader runs the check: a file whose op claims another payload is
// refused with the file, the op and the reason.
TEST(ScheduleCheck, JsonCarriesPayloadAndLayoutAndReaderChecks) {
    Schedule s = build(kStage2, 4);
    std::ostringstream out;
    write_schedule_json(out, s);
    std::string path = test::temp_file("check-roundtrip.json", out.str());
    auto back = read_schedule_json(path);
    ASSERT_TRUE(back.ok()) << back.error().what();
    EXPECT_EQ(payloads(back.value()), payloads(s));
    EXPECT_EQ(back->meta.partition.kind, PartitionKind::FlatGroups);
    ASSERT_EQ(back->meta.partition.groups.size(), 1u);
    EXPECT_EQ(back->meta.partition.groups[0].offsets, (std::vector<int64_t>{0, 5}));
    EXPECT_EQ(back->meta.partition.groups[0].partition_size, 4);

    int64_t k = index_of(s, RuleId::Stage12StepGradNorm);
    s.ops[k].payload = Payload::TraceCheck;
    std::ostringstream bad;
    write_schedule_json(bad, s);
    std::string bad_path = test::temp_file("check-bad.json", bad.str());
    auto refused = read_schedule_json(bad_path);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().what(),
              bad_path + ": field 'ops[" + std::to_string(k) + "]': payload trace_check cannot travel in all_reduce");
}

// A rule or group name the tables do not hold is refused where the file says it, not taken as text.
TEST(ScheduleCheck, JsonReaderRefusesUnknownRuleAndGroupNames) {
    Schedule s = build(kStage2, 4);
    std::ostringstream out;
    write_schedule_json(out, s);
    const std::string text = out.str();
    auto with = [&](const std::string& from, const std::string& to) {
        std::string t = text;
        const size_t at = t.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        if (at != std::string::npos) t.replace(at, from.size(), to);
        auto r = parse_schedule_json(t, "s.json");
        return r.ok() ? std::string("accepted") : r.error().what();
    };
    const std::string k = std::to_string(index_of(s, RuleId::Stage12StepGradNorm));
    std::string e = with("\"rule\": \"stage12.step.grad_norm\"", "\"rule\": \"stage12.step.grad_nrom\"");
    EXPECT_NE(e.find("ops[" + k + "].rule"), std::string::npos) << e;
    EXPECT_NE(e.find("unknown rule \"stage12.step.grad_nrom\""), std::string::npos) << e;
    e = with("\"group\": \"dp\"", "\"group\": \"world\"");
    EXPECT_NE(e.find(".group"), std::string::npos) << e;
    EXPECT_NE(e.find("unknown group \"world\"; expected one of dp, hpz,"), std::string::npos) << e;
}
