// explain's counts and totals (issue 19): per step, not over all steps; one convention for bytes
// (what each rank sends and receives on a ring) for every collective; the bucket sentence; the
// step's total beside the paper's 2Ψ. Worked by hand for the reference model: Ψ = 667,136 fp32
// parameters on n = 4 ranks, Ψ x 4 bytes x (n-1)/n = 2,001,408 B = 1.91 MiB.
#include <gtest/gtest.h>

#include <regex>

#include "analysis/explain.hpp"
#include "inline_inputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

std::string explain_two_steps(const std::string& zero) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_TRUE(m.ok());
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": )" + zero + "}");
    return explain_schedule(m.value(), c, test::build(m.value(), c, 4, 2));
}

TEST(ExplainPerStep, CountsAndBytesPerStepOneConvention) {
    std::string t = explain_two_steps(R"({"stage": 2})");
    // One all_reduce per step (two steps were built): 2 (n-1)/n x 2.54 MiB = 2 x 1.91 MiB.
    EXPECT_NE(t.find("## per step: 1 x all_reduce (allreduce_bucket), each rank sends and receives 3.82 MiB"), std::string::npos) << t;
    // The all_gather of the updated partitions: (n-1) x the 651.5 KiB shard = 1.91 MiB, the same
    // convention (not the shard alone).
    EXPECT_NE(t.find("1 x all_gather_into_tensor (all_gather_into_tensor_dp_groups), each rank sends and receives 1.91 MiB"),
              std::string::npos)
        << t;
    // 3.82 + 1.91 = 5.73 MiB against the paper's 2Ψ (n-1)/n = 3.82 MiB.
    EXPECT_NE(t.find("## Step 1 in all: each rank sends and receives 5.73 MiB; the ZeRO paper's 2Ψ for stage 2 is 3.82 MiB (1.50x)"),
              std::string::npos)
        << t;
    EXPECT_EQ(t.find("over 2 step(s)"), std::string::npos);
}

TEST(ExplainPerStep, BucketSentence) {
    std::string t = explain_two_steps(R"({"stage": 2})");
    EXPECT_NE(t.find("all 667K gradient elements fit one 500M-element bucket (reduce_bucket_size): one flush per step"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find("Here that is 1 all_reduce(s) per step"), std::string::npos);
    // Buckets of 200,000 elements: at least ceil(667,136 / 200,000) = 4 flushes.
    std::string small = explain_two_steps(R"({"stage": 2, "reduce_bucket_size": 200000})");
    auto at = small.find("gradient elements fill ");
    ASSERT_NE(at, std::string::npos) << small;
    EXPECT_GE(std::stoi(small.substr(at + 23)), 4);
    EXPECT_NE(small.find("buckets of up to 200K elements"), std::string::npos);
    // Stage 3's reduce-scatter: (n-1)/n of the full 2.54 MiB input = 1.91 MiB, like the all_gathers.
    std::string z3 = explain_two_steps(R"({"stage": 3})");
    EXPECT_NE(z3.find("## per step: 1 x reduce_scatter_tensor (reduce_scatter_fn), each rank sends and receives 1.91 MiB"),
              std::string::npos)
        << z3;
}

// The volume sentences are the table's own figures: with gradient accumulation 4, stage 2 reduces
// each micro batch's gradients, (2 x 4 + 1)Ψ = 4.5 x the paper's 2Ψ (worked by hand), and the
// sentence says what the table says, not a canned "about 1.5x". The overflow check's sentence
// follows the config's dtype: under bf16 it does not claim that bf16 removes it.
TEST(ExplainPerStep, SentencesAgreeWithTheirNumbers) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    ASSERT_TRUE(m.ok());
    auto parsed = parse_ds_config("inline-ds.json", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                   "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})", kNewestRelease);
    ASSERT_TRUE(parsed.ok()) << parsed.error().what();   // v0.19.5: bf16.check_grad_overflow on by default
    const DsConfig c = parsed.value();
    const std::string t = explain_schedule(m.value(), c, test::build(m.value(), c, 4, 2));
    EXPECT_NE(t.find("2       2Ψ"), std::string::npos) << t;
    EXPECT_NE(t.find("4.50x\n"), std::string::npos) << "the table's stage-2 ratio: " << t;
    EXPECT_NE(t.find("Stage 2 sends 4.50x (4.50x expected"), std::string::npos) << t;
    EXPECT_EQ(t.find("about 1.5x"), std::string::npos) << t;
    EXPECT_EQ(t.find("bf16 or fp32 training removes it"), std::string::npos) << t;
    ASSERT_NE(t.find("step.overflow_check"), std::string::npos) << "bf16 with check_grad_overflow sends it: " << t;
    EXPECT_NE(t.find("bf16.check_grad_overflow (its default from DeepSpeed v0.19.3) sends it under bf16"), std::string::npos) << t;
}

}  // namespace
}  // namespace zerosim

namespace zerosim {
namespace {

// explain takes --activation-checkpointing, as the schedule it explains depends on it, and says what
// it adds: Llama-2-7B's 32 decoder layers each run their 9 modules with parameters (q, k, v, o, gate,
// up, down and the two norms) again in backward: 288 recomputed forwards per step, and at stage 3 more
// all_gathers in step 0 than without (the recompute's fetches).
TEST(ExplainPerStep, CheckpointingIsTakenAndSaid) {
    const std::string args = "explain --ds-config " + test::q(test::config("deepspeed/zero3.json")) + " --model " +
                             test::q(test::config("models/llama-2-7b.json")) + " --world 8 --seq-len 1024";
    auto plain = test::run_zerosim(args);
    auto ckpt = test::run_zerosim(args + " --activation-checkpointing");
    ASSERT_EQ(plain.exit_code, 0) << plain.out;
    ASSERT_EQ(ckpt.exit_code, 0) << ckpt.out;
    EXPECT_EQ(plain.out.find("Activation checkpointing:"), std::string::npos) << plain.out;
    EXPECT_NE(ckpt.out.find("Activation checkpointing: 288 checkpointed module forward(s) run again in backward in step 1"),
              std::string::npos)
        << ckpt.out;
    auto step0_gathers = [](const std::string& out) {
        std::smatch m;
        return std::regex_search(out, m, std::regex("step 0: ([0-9]+) x all_gather_into_tensor")) ? std::stoll(m[1]) : -1LL;
    };
    EXPECT_GT(step0_gathers(ckpt.out), step0_gathers(plain.out));
    EXPECT_GT(step0_gathers(plain.out), 0);
}

}  // namespace
}  // namespace zerosim
