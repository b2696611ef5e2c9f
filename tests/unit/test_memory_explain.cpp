// `zerosim memory` and `zerosim explain`: memory figures against the ZeRO paper's worked example
// and hand computations, and the explanation's answers changing with the settings behind them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inputs/ds_config.hpp"
#include "analysis/explain.hpp"
#include "analysis/memory.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

Schedule schedule_of(const Model& m, const DsConfig& c, int64_t world) {
    ScheduleOptions o;
    o.world = world;
    o.steps = 2;
    auto s = build_schedule(m, c, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

TEST(Memory, ZeroPaperWorkedExample) {
    // ZeRO paper, Figure 1: Ψ = 7.5B parameters, N = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    EXPECT_NEAR(zero_paper_bytes(0, 7.5e9, 64) / 1e9, 120.0, 0.05);
    EXPECT_NEAR(zero_paper_bytes(1, 7.5e9, 64) / 1e9, 31.4, 0.05);
    EXPECT_NEAR(zero_paper_bytes(2, 7.5e9, 64) / 1e9, 16.6, 0.05);
    EXPECT_NEAR(zero_paper_bytes(3, 7.5e9, 64) / 1e9, 1.9, 0.05);
}

TEST(Memory, Stage2ByHand) {
    // One 1000-element parameter, bf16, 4 ranks, bucket 100, overlap off: the group is already a
    // multiple of 2 x 4, so partitions of 250. Parameters 1000 x 2 = 2000 B; gradient partition
    // 250 x 2 = 500 B; its fp32 copy 1000 B; fp32 master + m + v 250 x 12 = 3000 B; one bucket of
    // 100 bf16 = 200 B. Total 6700 B.
    auto m = model_from_param_list_json("m.json", R"({"parameters": [{"name": "w", "shape": [1000]}]})");
    auto c = parse_ds_config("c.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
        "zero_optimization": {"stage": 2, "reduce_bucket_size": 100, "overlap_comm": false}})");
    ASSERT_TRUE(m.ok() && c.ok());
    auto e = estimate_memory(m.value(), c.value(), schedule_of(m.value(), c.value(), 4));
    EXPECT_EQ(e.category("parameters"), 2000);
    EXPECT_EQ(e.category("gradients"), 1500);
    EXPECT_EQ(e.category("optimizer"), 3000);
    EXPECT_EQ(e.category("buckets"), 200);
    EXPECT_EQ(e.total(), 6700);
    // The paper for the same: 2Ψ + (2 + 12)Ψ/N = 2000 + 3500 = 5500 B; DeepSpeed's estimator
    // 4Ψ + 16Ψ/N = 4000 + 4000 = 8000 B.
    EXPECT_EQ(e.paper_bytes, 5500);
    EXPECT_EQ(e.deepspeed_estimator_bytes, 8000);
    EXPECT_FALSE(e.differences.empty());
}

TEST(Memory, PaddingShowsInStage1) {
    // 10 elements on 4 ranks: padded to 16, partitions of 4; the fp32 master + moments take
    // 4 x 12 = 48 B (the paper's KΨ/N would be 30 B) and the difference names the padding.
    auto m = model_from_param_list_json("m.json", R"({"parameters": [{"name": "w", "shape": [10]}]})");
    auto c = parse_ds_config("c.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}})");
    auto e = estimate_memory(m.value(), c.value(), schedule_of(m.value(), c.value(), 4));
    EXPECT_EQ(e.category("optimizer"), 48);
    bool named = false;
    for (const auto& d : e.differences) named = named || d.find("padd") != std::string::npos;
    EXPECT_TRUE(named);
}

TEST(Memory, Stage3GathersTheSmallModelWhole) {
    // The reference model (667,136 fp32 elements) fits the default reuse distance, so at the turn
    // from forward to backward every parameter is gathered at once: 2,668,544 B.
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    auto c = load_ds_config(test::reference("deepspeed-v0.14.2-cpu/z3_default_w4/ds_config.json"));
    auto s = schedule_of(m.value(), c.value(), 4);
    EXPECT_EQ(s.meta.stage3_peak_gathered_elements, 667136);
    auto e = estimate_memory(m.value(), c.value(), s);
    int64_t gathered = 0;
    for (const auto& it : e.items)
        if (it.name.find("gathered") != std::string::npos) gathered = it.bytes;
    EXPECT_EQ(gathered, 667136 * 4);
}

std::string explain_for(const std::string& zero) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": )" + zero + "}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return explain_schedule(m.value(), c.value(), schedule_of(m.value(), c.value(), 4));
}

TEST(Explain, AnswersTheReduceScatterQuestion) {
    std::string t = explain_for(R"({"stage": 2, "reduce_scatter": true, "reduce_bucket_size": 50000})");
    EXPECT_NE(t.find("why do I see one big all_reduce"), std::string::npos);
    EXPECT_NE(t.find("use_multi_rank_bucket_allreduce"), std::string::npos);
    EXPECT_NE(t.find("reduce_bucket_size = 50000"), std::string::npos);
    // The bucket size shown follows the config.
    std::string t2 = explain_for(R"({"stage": 2, "reduce_bucket_size": 200000})");
    EXPECT_NE(t2.find("reduce_bucket_size = 200000"), std::string::npos);
    // Without the multi-rank all_reduce the answer changes: one reduce per owning rank.
    std::string t3 = explain_for(R"({"stage": 2, "use_multi_rank_bucket_allreduce": false})");
    EXPECT_EQ(t3.find("why do I see one big all_reduce"), std::string::npos);
    EXPECT_NE(t3.find("one reduce per owning rank"), std::string::npos);
    EXPECT_NE(t3.find("x reduce (allreduce_bucket)"), std::string::npos);
}

TEST(Explain, ShowsPaperVolumeBesideDeepSpeeds) {
    // Stage 2 row: DeepSpeed sends 1.5x the paper's 2Ψ on 4 ranks (all_reduce + all_gather).
    std::string t = explain_for(R"({"stage": 2})");
    auto row = t.find("\n2       2Ψ");
    ASSERT_NE(row, std::string::npos) << t;
    EXPECT_NE(t.substr(row, 90).find("1.50x"), std::string::npos) << t.substr(row, 90);
    EXPECT_NE(t.find("(DeepSpeed's default)"), std::string::npos);
}

}  // namespace

namespace {

TEST(Memory, AgainstZerorunsMeasurementOfTheTinyModel) {
    // tests/fixtures/zerorun-tiny-zero2-memory.json was written by zerorun (MPI backend) running
    // configs/deepspeed/tiny-zero2.json on 4 ranks. Parameters (667,136 fp32 = 2,668,544 B) and
    // the fp32 master + Adam moments of a 166,784-element partition (x 12 B = 2,001,408 B) are
    // allocated as the schedule says, to the byte.
    auto r = zerosim::test::run_zerosim("memory --deepspeed 0.14.2 --ds-config '" + zerosim::test::config("deepspeed/tiny-zero2.json") +
                                        "' --model '" + zerosim::test::config("models/tiny-gpt.json") +
                                        "' --world 4 --stages 2 --format json --measured '" +
                                        zerosim::test::fixture("zerorun-tiny-zero2-memory.json") + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    const auto& m = j[0]["measured"];
    EXPECT_EQ(m["parameters"]["predicted"], 2668544);
    EXPECT_EQ(m["parameters"]["measured"], 2668544);
    EXPECT_EQ(m["optimizer"]["predicted"], 2001408);
    EXPECT_EQ(m["optimizer"]["measured"], 2001408);
    // A world that does not match the measured run is refused: tests/cli/cases/memory-measured-world-mismatch.case.
}

}  // namespace
