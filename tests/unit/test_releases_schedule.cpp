// The release rules of sim/schedule/release_rules.hpp, one hand-derived case per change that
// ../shared/docs/deepspeed-releases.md lists for ZeRO's collectives, each checked at the last
// release before it and the first release with it.
#include <gtest/gtest.h>

#include <functional>

#include "analysis/explain.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/release_rules.hpp"
#include "schedule/schedule.hpp"
#include "inline_inputs.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

using test::build;
using test::param_list;

Release rel(const char* v) { return parse_release(v).value(); }

DsConfig ds_at(const char* release, const std::string& json) {
    auto c = parse_ds_config("inline-ds.json", json, rel(release));
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

std::vector<const Op*> select(const Schedule& s, const std::function<bool(const Op&)>& f) {
    std::vector<const Op*> out;
    for (const auto& op : s.ops)
        if (is_collective(op.kind) && f(op)) out.push_back(&op);
    return out;
}

std::vector<int64_t> bytes_of(const std::vector<const Op*>& ops) {
    std::vector<int64_t> b;
    for (auto* op : ops) b.push_back(op->bytes());
    return b;
}

// As in test_schedule_rules.cpp: l1.weight 5 elements, l2.weight 9; l2's gradient is ready first.
const char* kTwoLayers = R"({"parameters": [{"name": "l1.weight", "shape": [5]}, {"name": "l2.weight", "shape": [9]}]})";

// The probe MLP of the release runs (../shared/reference/deepspeed-releases-cpu/model.json) with
// the runs' stage-3 config (persistence threshold 100: the three 64-element vectors persist).
Model releases_model() {
    auto m = load_model(test::reference("deepspeed-releases-cpu/model.json"));
    EXPECT_TRUE(m.ok());
    return m.value();
}
const char* kZ3t = R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3,
                      "stage3_param_persistence_threshold": 100}})";

bool trace_op(const Op& o) { return o.kind == OpKind::Broadcast && o.step >= 0; }

}  // namespace

TEST(Releases, ParseTheTaggedRangeOnly) {
    EXPECT_EQ(rel("0.17.6"), (Release{0, 17, 6}));
    EXPECT_EQ(rel("v0.19.5"), kNewestRelease);
    for (const char* bad : {"0.14.1", "0.20.0", "0.16.10", "abc", "0.17", "0.17.6rc1"}) {
        auto r = parse_release(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_NE(r.error().what().find("0.14.2 to 0.19.5"), std::string::npos) << r.error().what();
    }
    EXPECT_EQ(known_releases().size(), 42u);   // v0.14.2 .. v0.19.5, deepspeed-releases.md §0
}

TEST(Releases, LogDistLineFollowsTheLoggerSource) {
    // #6496, #6663, #6999, #7621: 96 -> 129 -> 128 -> 107 -> 123.
    EXPECT_EQ(log_dist_line(rel("0.14.2")), 96);
    EXPECT_EQ(log_dist_line(rel("0.15.2")), 96);
    EXPECT_EQ(log_dist_line(rel("0.15.3")), 129);
    EXPECT_EQ(log_dist_line(rel("0.15.4")), 128);
    EXPECT_EQ(log_dist_line(rel("0.16.4")), 128);
    EXPECT_EQ(log_dist_line(rel("0.16.5")), 107);
    EXPECT_EQ(log_dist_line(rel("0.17.6")), 107);
    EXPECT_EQ(log_dist_line(rel("0.18.0")), 123);
    EXPECT_EQ(log_dist_line(rel("0.19.5")), 123);
}

TEST(Releases, Stage3TraceCheckMovesToTheNextForward) {
    // v0.14.2: the three checks (12 modules x 8 B = 96 B, 16 parameter entries x 8 B = 128 B
    // twice) end step 0's backward. v0.15.4 (#6662): a 0-byte broadcast opens step 0's forward
    // and the three checks open step 1's forward.
    auto old_s = build(releases_model(), ds_at("0.15.3", kZ3t), 2, 2);
    auto t = select(old_s, trace_op);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(bytes_of(t), (std::vector<int64_t>{96, 128, 128}));
    for (auto* op : t) EXPECT_TRUE(op->step == 0 && op->phase == Phase::Backward);

    auto new_s = build(releases_model(), ds_at("0.15.4", kZ3t), 2, 2);
    t = select(new_s, trace_op);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(bytes_of(t), (std::vector<int64_t>{0, 96, 128, 128}));
    EXPECT_TRUE(t[0]->step == 0 && t[0]->phase == Phase::Forward && t[0]->rule == RuleId::Stage3TraceStart);
    for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(t[i]->step == 1 && t[i]->phase == Phase::Forward);
    // The 0-byte broadcast is step 0's first collective; the checks come before step 1's gathers.
    EXPECT_EQ(select(new_s, [](const Op& o) { return o.step == 0; }).front(), t[0]);
    EXPECT_EQ(select(new_s, [](const Op& o) { return o.step == 1; }).front(), t[1]);
    // One step: the checks never run.
    EXPECT_EQ(select(build(releases_model(), ds_at("0.16.2", kZ3t), 2, 1), trace_op).size(), 1u);
}

TEST(Releases, Stage3TraceCheckOpensMicroStepTwoWithAccumulation) {
    auto s = build(releases_model(),
                   ds_at("0.16.2", R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                         "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100}})"),
                   2, 1);
    auto t = select(s, trace_op);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0]->micro, 0);
    for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(t[i]->micro == 1 && t[i]->phase == Phase::Forward);
}

TEST(Releases, Stage3LengthBroadcastPrecedesEveryList) {
    // v0.17.6 (#7525): 8 B before each list: step 0 forward (8, 0), step 1 forward (8, 96, 8, 128,
    // 8, 128), as the v0.18.2 run printed (deepspeed-releases.md B3).
    auto s = build(releases_model(), ds_at("0.17.6", kZ3t), 2, 2);
    auto t = select(s, trace_op);
    EXPECT_EQ(bytes_of(t), (std::vector<int64_t>{8, 0, 8, 96, 8, 128, 8, 128}));
    EXPECT_EQ(t[0]->caller, "assert_lst_len_same_as_other_ranks");
    EXPECT_EQ(t[1]->caller, "get_lst_from_rank0");
    EXPECT_EQ(select(build(releases_model(), ds_at("0.17.5", kZ3t), 2, 2), trace_op).size(), 4u);
}

TEST(Releases, Stage3BucketCountNeverResetInV0_17_2) {
    // Bucket 20 elements, world 4. Step 0 everywhere: l2 (9) then l1 (9 + 5 = 14 <= 20), one
    // reduce_scatter at the epilogue of 12 + 8 padded fp32 = 80 B. v0.17.2 keeps the count at 14,
    // so in step 1 l2 (14 + 9 > 20) and then l1 (23 + 5 > 20) each flush: l2 alone (48 B) and the
    // epilogue's l1 (32 B). v0.17.3 (#7418) is back to one 80 B flush.
    const char* cfg = R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
                         "reduce_bucket_size": 20}})";
    auto rs = [](const Schedule& s, int step) {
        return bytes_of(select(s, [step](const Op& o) { return o.kind == OpKind::ReduceScatter && o.step == step; }));
    };
    auto bug = build(param_list(kTwoLayers), ds_at("0.17.2", cfg), 4, 2);
    EXPECT_EQ(rs(bug, 0), (std::vector<int64_t>{80}));
    EXPECT_EQ(rs(bug, 1), (std::vector<int64_t>{48, 32}));
    auto fixed = build(param_list(kTwoLayers), ds_at("0.17.3", cfg), 4, 2);
    EXPECT_EQ(rs(fixed, 1), (std::vector<int64_t>{80}));
}

TEST(Releases, Stage12EmptyBucketAllReduceGoesInV0_14_5) {
    // test_schedule_rules' {0, 36, 20} at v0.14.2: the 0-byte flush of the empty bucket is gone.
    const char* cfg = R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,
                         "reduce_scatter": false, "reduce_bucket_size": 8}})";
    auto bwd = [](const Op& o) { return o.phase == Phase::Backward; };
    EXPECT_EQ(bytes_of(select(build(param_list(kTwoLayers), ds_at("0.14.4", cfg), 4), bwd)), (std::vector<int64_t>{0, 36, 20}));
    EXPECT_EQ(bytes_of(select(build(param_list(kTwoLayers), ds_at("0.14.5", cfg), 4), bwd)), (std::vector<int64_t>{36, 20}));
}

namespace {
size_t overflow_reduces(const char* release, int stage, const std::string& precision) {
    std::string cfg = R"({"train_micro_batch_size_per_gpu": 1, )" + precision + R"(, "zero_optimization": {"stage": )" +
                      std::to_string(stage) + "}}";
    auto s = build(param_list(kTwoLayers), ds_at(release, cfg), 4);
    auto ops = select(s, [](const Op& o) { return o.caller == "has_overflow"; });
    for (auto* op : ops) EXPECT_EQ(op->bytes(), 1);
    return ops.size();
}
}  // namespace

TEST(Releases, Stage1Fp16OverflowStaysLocalFromV0_17_1ToV0_17_6) {
    const char* fp16 = R"("fp16": {"enabled": true})";
    EXPECT_EQ(overflow_reduces("0.17.0", 1, fp16), 1u);
    EXPECT_EQ(overflow_reduces("0.17.1", 1, fp16), 0u);   // #6976
    EXPECT_EQ(overflow_reduces("0.17.6", 1, fp16), 0u);
    EXPECT_EQ(overflow_reduces("0.17.6", 2, fp16), 1u);   // stage 2 unaffected
    EXPECT_EQ(overflow_reduces("0.18.0", 1, fp16), 1u);   // #7580
}

TEST(Releases, Bf16OverflowCheckAtStages1And2FromV0_19_3) {
    const char* bf16 = R"("bf16": {"enabled": true})";
    EXPECT_EQ(overflow_reduces("0.19.2", 2, bf16), 0u);
    EXPECT_EQ(overflow_reduces("0.19.3", 2, bf16), 1u);   // #8035: check_grad_overflow defaults to true
    EXPECT_EQ(overflow_reduces("0.19.3", 1, bf16), 1u);
    EXPECT_EQ(overflow_reduces("0.19.5", 3, bf16), 0u);   // stage 3 checks fp16 only
    EXPECT_EQ(overflow_reduces("0.19.3", 2, R"("bf16": {"enabled": true, "check_grad_overflow": false})"), 0u);
    EXPECT_EQ(overflow_reduces("0.17.1", 2, R"("bf16": {"enabled": true, "check_grad_overflow": true})"), 1u);
    // The step's first op: the flag before the norms and the gather.
    auto s = build(param_list(kTwoLayers), ds_at("0.19.5", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                                                "zero_optimization": {"stage": 2}})"), 4);
    EXPECT_EQ(select(s, [](const Op& o) { return o.phase == Phase::Step; }).front()->caller, "has_overflow");
    // An overflowing bf16 step is skipped after the flag, as fp16's: no norms, no gather.
    auto skipped = build(param_list(kTwoLayers), ds_at("0.19.5", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                                                      "zero_optimization": {"stage": 2}})"), 4, 1, {0});
    EXPECT_EQ(select(skipped, [](const Op& o) { return o.phase == Phase::Step; }).size(), 1u);
}

TEST(Releases, Stage0Bf16LeavesTheBf16OptimizerInV0_17_6) {
    // test_schedule_rules' Bf16UsesTheBf16OptimizerPath (32 B all_reduce, 8 B all_gather) up to
    // v0.17.5; from v0.17.6 (#7515) the 14 bf16 gradients (28 B) in one all_reduce, no gather,
    // unless grad_accum_dtype fp32 is written.
    auto step_ops = [](const char* release, const char* extra) {
        std::string cfg = std::string(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true})") + extra + "}";
        auto s = build(param_list(kTwoLayers), ds_at(release, cfg), 4);
        return bytes_of(select(s, [](const Op& o) { return o.step >= 0; }));
    };
    EXPECT_EQ(step_ops("0.17.5", ""), (std::vector<int64_t>{32, 8}));
    EXPECT_EQ(step_ops("0.17.6", ""), (std::vector<int64_t>{28}));
    EXPECT_EQ(step_ops("0.17.6", R"(, "data_types": {"grad_accum_dtype": "fp32"})"), (std::vector<int64_t>{32, 8}));
}

TEST(Releases, ExplainNamesTheReleaseOfReleaseSpecificRules) {
    Model m = releases_model();
    auto at = [&](const char* release) {
        DsConfig c = ds_at(release, kZ3t);
        return explain_schedule(m, c, build(m, c, 2, 2));
    };
    std::string e = at("0.18.2");
    EXPECT_NE(e.find("Since v0.17.6 (#7525): every trace-check list broadcast"), std::string::npos) << e;
    EXPECT_NE(e.find("Since v0.15.4 (#6662)"), std::string::npos);
    EXPECT_NE(e.find("## DeepSpeed v0.18.2 against v0.14.2"), std::string::npos);
    std::string base = at("0.14.2");
    EXPECT_EQ(base.find("Since v"), std::string::npos);
    EXPECT_EQ(base.find("against v0.14.2"), std::string::npos);
}

TEST(Releases, EveryRuleNamesKnownScheduleRules) {
    for (const auto& r : release_rules()) {
        EXPECT_TRUE(r.first <= r.last) << r.name;
        EXPECT_TRUE(r.first > kBaselineRelease) << r.name;
        std::string ids = r.op_rules;
        for (size_t at = 0; at < ids.size();) {
            size_t end = ids.find(',', at);
            std::string id = ids.substr(at, end == std::string::npos ? std::string::npos : end - at);
            bool found = false;
            for (const auto& rule : all_rules()) found = found || id == rule.name;
            EXPECT_TRUE(found) << r.name << ": " << id;
            at = end == std::string::npos ? ids.size() : end + 1;
        }
    }
}
