// What each release reads and writes: the config keys of the releases after v0.14.2 (known from
// their release on, refused or modelled by name, never ignored), the logger's prefix and default
// level in the logs it writes, and the real runs of ../shared/reference/deepspeed-releases-cpu
// matched op for op (the summary-only one per op kind) with the release each was run with.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/log_release.hpp"
#include "formats/measured_logs.hpp"
#include "formats/op_kinds.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"
#include "validate/diff.hpp"
#include "validate/op_kinds_diff.hpp"

using namespace zerosim;
namespace fs = std::filesystem;

namespace {

Release rel(const char* v) { return parse_release(v).value(); }

Result<DsConfig> cfg_at(const char* release, const std::string& json) { return parse_ds_config("c.json", json, rel(release)); }

std::string error_of(const char* release, const std::string& json) {
    auto c = cfg_at(release, json);
    return c.ok() ? std::string("(accepted)") : c.error().what();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ReleaseKeys, ZeroKeyOfALaterReleaseIsRefusedWithItsRelease) {
    // DeepSpeedZeroConfig forbids extra keys: at v0.18.4 stage3_allgather_sequential is one.
    std::string e = error_of("0.18.4", R"({"zero_optimization": {"stage": 3, "stage3_allgather_sequential": false}})");
    EXPECT_TRUE(contains(e, "DeepSpeed v0.18.4 refuses keys zero_optimization does not have")) << e;
    EXPECT_TRUE(contains(e, "arrives in v0.18.5 (#7661)")) << e;
    EXPECT_EQ(error_of("0.18.5", R"({"zero_optimization": {"stage": 3, "stage3_allgather_sequential": false}})"), "(accepted)");
    // v0.14.2's own message for a misspelt key is unchanged.
    EXPECT_TRUE(contains(error_of("0.14.2", R"({"zero_optimization": {"reduce_bucket_sise": 1}})"), "did you mean 'reduce_bucket_size'?"));
}

TEST(ReleaseKeys, KeysThatChangeStage3AreRefusedByNameWhereNotModelled) {
    struct Case { const char* release; const char* key; const char* value; } cases[] = {
        {"0.14.3", "stage3_use_all_reduce_for_fetch_params", "true"},
        {"0.16.0", "stage3_module_granularity_threshold", "100"},
        {"0.16.2", "zeropp_loco_param", R"({"err_beta": 0.8})"},
        {"0.17.6", "enable_sanity_checks", "true"},
        {"0.18.0", "leaf_module", R"({"names": ["block"]})"},
        {"0.18.5", "stage3_allgather_sequential", "true"},
    };
    for (const auto& c : cases) {
        std::string e = error_of(c.release, std::string(R"({"zero_optimization": {"stage": 3, ")") + c.key + "\": " + c.value + "}}");
        EXPECT_TRUE(contains(e, "field 'zero_optimization." + std::string(c.key))) << e;
        EXPECT_TRUE(contains(e, "does not model yet")) << e;
    }
    // Their defaults change nothing and are accepted.
    EXPECT_EQ(error_of("0.19.5", R"({"zero_optimization": {"stage": 3, "stage3_use_all_reduce_for_fetch_params": false,
                                   "stage3_module_granularity_threshold": 0, "leaf_module": {"names": []}}})"),
              "(accepted)");
    std::string t = error_of("0.17.2", R"({"torch_autocast": {"enabled": true}})");
    EXPECT_TRUE(contains(t, "torch_autocast (since v0.17.2, #6993)")) << t;
}

TEST(ReleaseKeys, TopLevelKeysOfLaterReleasesAreNamedNotIgnored) {
    // Before their release DeepSpeed ignores them (top-level keys are not checked): one warning each.
    auto c = cfg_at("0.17.1", R"({"log_level": "info", "torch_autocast": {"enabled": true}})");
    ASSERT_TRUE(c.ok()) << c.error().what();
    ASSERT_EQ(c->ignored_keys.size(), 2u);
    EXPECT_EQ(c->ignored_keys[0], "log_level (DeepSpeed v0.17.1 does not read it; it arrives in v0.19.3, #8067)");
    EXPECT_EQ(c->ignored_keys[1], "torch_autocast (DeepSpeed v0.17.1 does not read it; it arrives in v0.17.2, #6993)");
    auto d = cfg_at("0.19.3", R"({"log_level": "INFO"})");
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->ignored_keys.empty());
    EXPECT_EQ(d->log_level.value_or(""), "info");
    EXPECT_TRUE(contains(error_of("0.19.3", R"({"log_level": "loud"})"), "field 'log_level'"));
}

TEST(ReleaseKeys, Bf16SectionIsStrictFromV0_17_1) {
    // runtime/precision_config.py (v0.17.1): DeepSpeedBF16Config forbids extra keys.
    EXPECT_TRUE(contains(error_of("0.17.1", R"({"bf16": {"enabled": true, "check_overflow": true}})"),
                         "refuses keys bf16 does not have"));
    auto old = cfg_at("0.17.0", R"({"bf16": {"enabled": true, "check_grad_overflow": true}})");
    ASSERT_TRUE(old.ok());
    EXPECT_FALSE(old->bf16_check_grad_overflow);
    ASSERT_EQ(old->ignored_keys.size(), 1u);
    EXPECT_TRUE(contains(old->ignored_keys[0], "bf16.check_grad_overflow (DeepSpeed v0.17.0 does not read it; it arrives in v0.17.1"));
    EXPECT_FALSE(cfg_at("0.19.2", R"({"bf16": {"enabled": true}})")->bf16_check_grad_overflow);
    EXPECT_TRUE(cfg_at("0.19.3", R"({"bf16": {"enabled": true}})")->bf16_check_grad_overflow);
}

TEST(ReleaseKeys, RefusalsNameTheReleaseThatRefuses) {
    EXPECT_TRUE(contains(error_of("0.16.2", R"({"zero_optimization": {"legacy_stage1": true}})"), "DeepSpeed v0.16.2 refuses legacy_stage1"));
    EXPECT_TRUE(contains(error_of("0.14.2", R"({"zero_optimization": {"legacy_stage1": true}})"), "DeepSpeed v0.14.2 refuses legacy_stage1"));
}

TEST(LogReleases, PrefixAndSummaryOnlyNameTheReleases) {
    auto guess = [](const std::string& text) {
        auto log = parse_log(text, "l.log");
        EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().what());
        return infer_log_releases(log.value());
    };
    const std::string op = " [Rank 0] comm op: all_reduce | [Caller Func: allreduce_bucket] | time (ms): 1.00 | msg size: 4.0 B | "
                           "algbw (Gbps): 0.00 | busbw (Gbps): 0.00\n";
    auto r = guess("[2026-01-01 00:00:00,000] [INFO] [logging.py:128:log_dist]" + op);
    EXPECT_TRUE(r.known);
    EXPECT_EQ(r.range(), "DeepSpeed v0.15.4 to v0.16.4");
    EXPECT_EQ(guess("[2026-01-01 00:00:00,000] [INFO] [logging.py:129:log_dist]" + op).range(), "DeepSpeed v0.15.3");
    EXPECT_EQ(guess("[2026-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist]" + op).range(), "DeepSpeed v0.14.2 to v0.15.2");
    const std::string table =
        "Comm. Op            Message Size        Count               Total Latency(ms)   Avg Latency(ms)     tput_avg (Gbps)     busbw_avg (Gbps)\n"
        "all_reduce | [Caller Func: allreduce_bucket]\n"
        "                    4.0 B               3                   1.50                0.50                0.00                0.00\n";
    auto s = guess(table);
    EXPECT_EQ(s.range(), "DeepSpeed v0.17.6 to v0.19.5");
    EXPECT_TRUE(contains(s.evidence, "#7526"));
}

TEST(LogReleases, WrittenLogsCarryTheReleasePrefix) {
    EXPECT_TRUE(contains(ds_line_prefix(0.0), "[logging.py:96:log_dist]"));
    EXPECT_TRUE(contains(ds_line_prefix(0.0, 123), "[logging.py:123:log_dist]"));
}

// Every real run of deepspeed-releases-cpu against the schedule built with its release: op for op
// where the log has per-op lines, per op kind where it holds only log_summary()'s table.
TEST(LogReleases, ReleaseRunsMatchOpForOp) {
    fs::path root = test::reference("deepspeed-releases-cpu");
    if (!fs::exists(root)) GTEST_SKIP() << "no " << root;
    auto model = load_model((root / "model.json").string());
    ASSERT_TRUE(model.ok());
    int runs = 0;
    for (const auto& e : fs::directory_iterator(root)) {
        if (!e.is_directory() || !fs::exists(e.path() / "rank0.log")) continue;
        auto run = nlohmann::json::parse(test::read_file((e.path() / "run.json").string()));
        Release r = parse_release(run["deepspeed"].get<std::string>()).value();
        auto cfg = load_ds_config((e.path() / "ds_config.json").string(), r);
        ASSERT_TRUE(cfg.ok()) << cfg.error().what();
        ScheduleOptions o;
        o.world = run["world_size"].get<int64_t>();
        o.steps = run["steps"].get<int>();
        auto s = build_schedule(model.value(), cfg.value(), o);
        ASSERT_TRUE(s.ok()) << s.error().what();
        std::ostringstream pred_text;
        DeepSpeedLogOptions lo;
        lo.log_summary = true;
        write_schedule_deepspeed(pred_text, s.value(), lo);
        auto pred = parse_log(pred_text.str(), "pred");
        auto meas = read_log((e.path() / "rank0.log").string());
        ASSERT_TRUE(pred.ok() && meas.ok());
        EXPECT_TRUE(infer_log_releases(meas.value()).contains(r) || !infer_log_releases(meas.value()).known) << e.path();
        if (summary_only(meas.value())) {
            OpKindReport k = diff_op_kinds(pred.value(), meas.value(), 0.15, DiffScope::Ops);
            EXPECT_TRUE(k.pass()) << e.path() << ": " << k.differing << " op kinds differ";
            EXPECT_GE(k.matching, 4u);
        } else {
            DiffReport d = diff_logs(pred.value(), meas.value(), 0.15, DiffScope::Ops);
            EXPECT_TRUE(d.pass()) << e.path();
            EXPECT_EQ(d.matched, meas->ops.size()) << e.path();
            EXPECT_EQ(d.missing + d.extra + d.resized + d.swapped, 0u) << e.path();
        }
        ++runs;
    }
    EXPECT_GE(runs, 3);
}

TEST(LogReleases, OpKindsDiffFindsACountOrSizeDifference) {
    auto summary = [](const char* rows) {
        std::string t = "Comm. Op            Message Size        Count               Total Latency(ms)   Avg Latency(ms)     "
                        "tput_avg (Gbps)     busbw_avg (Gbps)\nall_reduce | [Caller Func: allreduce_bucket]\n";
        auto log = parse_log(t + rows, "s.log");
        EXPECT_TRUE(log.ok());
        return log.value();
    };
    auto a = summary("                    629.75 KB           3                   9.00                3.00                0.00                0.00\n");
    auto b = summary("                    629.75 KB           2                   6.00                3.00                0.00                0.00\n");
    EXPECT_TRUE(diff_op_kinds(a, a, 0.15, DiffScope::All).pass());
    auto d = diff_op_kinds(a, b, 0.15, DiffScope::Ops);
    EXPECT_FALSE(d.pass());
    ASSERT_EQ(d.kinds.size(), 1u);
    EXPECT_EQ(d.kinds[0].pred_count, 3);
    EXPECT_EQ(d.kinds[0].meas_count, 2);
    // Times where both measured: 9 ms against 6 ms is a 50% error.
    auto t = diff_op_kinds(a, b, 0.15, DiffScope::Time);
    EXPECT_NEAR(t.median_time_error, 0.5, 1e-9);
    EXPECT_FALSE(t.pass());
}
