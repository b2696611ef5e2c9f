// A Trainer's DeepSpeed config with "auto" values (inputs/trainer_auto.hpp), filled as
// transformers' HfTrainerDeepSpeedConfig fills them. Expected values are worked out here from the
// Trainer's rules (hidden_size squared and so on) for the models' published widths, not read back
// from the code.
#include <gtest/gtest.h>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "inputs/trainer_auto.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

const std::string kStockZero3 = test::fixture("trainer-configs/zero3.json");
const std::string kStockZero2 = test::fixture("trainer-configs/zero2.json");

TrainerArgs batch(int64_t micro, int64_t accum) {
    TrainerArgs t;
    t.per_device_train_batch_size = micro;
    t.gradient_accumulation_steps = accum;
    return t;
}

Result<Json> filled(const std::string& path, const TrainerArgs& t, int64_t hidden, std::vector<std::string>* notes = nullptr) {
    std::vector<std::string> n;
    auto doc = read_trainer_ds_config_document(path, t, hidden, n);
    if (notes) *notes = n;
    return doc;
}

TEST(TrainerAuto, TheStockZero3ConfigRunsWithTheTrainersBatchFlags) {
    TrainerArgs t = batch(4, 2);
    t.bf16 = true;
    auto doc = filled(kStockZero3, t, 4096);   // Llama-2-7B's hidden_size
    ASSERT_TRUE(doc.ok()) << doc.error().what();
    const Json& d = doc.value();
    EXPECT_EQ(d["train_micro_batch_size_per_gpu"], 4);
    EXPECT_EQ(d["gradient_accumulation_steps"], 2);
    EXPECT_FALSE(d.contains("train_batch_size"));   // DeepSpeed derives world x 4 x 2, as the Trainer writes it
    EXPECT_EQ(d["bf16"]["enabled"], true);          // accelerate adds the section --bf16 asks for
    EXPECT_EQ(d["fp16"]["enabled"], false);
    const auto& z = d["zero_optimization"];
    EXPECT_EQ(z["reduce_bucket_size"].get<int64_t>(), 16'777'216);              // 4096^2
    EXPECT_EQ(z["stage3_prefetch_bucket_size"].get<int64_t>(), 15'099'494);     // 0.9 x 4096^2 = 15,099,494.4, truncated
    EXPECT_EQ(z["stage3_param_persistence_threshold"].get<int64_t>(), 40'960);  // 10 x 4096
    EXPECT_EQ(d["gradient_clipping"], 1.0);                                     // TrainingArguments.max_grad_norm
    auto cfg = parse_ds_config(kStockZero3, d.dump());
    ASSERT_TRUE(cfg.ok()) << cfg.error().what();
    EXPECT_EQ(cfg->model_dtype, DType::BF16);
    auto plan = resolve_batch(cfg.value(), 16);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->train_batch, 16 * 4 * 2);
}

TEST(TrainerAuto, WithoutTheBatchFlagsOneErrorNamesEveryMissingValueOnce) {
    auto doc = filled(kStockZero3, TrainerArgs{}, 4096);
    ASSERT_FALSE(doc.ok());
    const std::string m = doc.error().message;
    for (const char* part : {"train_micro_batch_size_per_gpu (--per_device_train_batch_size)",
                             "gradient_accumulation_steps (--gradient_accumulation_steps)", "train_batch_size (world x"}) {
        const size_t at = m.find(part);
        EXPECT_NE(at, std::string::npos) << part << " in: " << m;
        EXPECT_EQ(m.find(part, at + 1), std::string::npos) << part << " twice in: " << m;
    }
    EXPECT_EQ(m.find("zero_optimization"), std::string::npos) << "filled from the model: " << m;
}

TEST(TrainerAuto, TheTrainersDefaultsAreNamedInANote) {
    std::vector<std::string> notes;
    auto doc = filled(kStockZero3, batch(1, 1), 4096, &notes);
    ASSERT_TRUE(doc.ok());
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes[0].find("gradient_clipping = 1.0 (--max_grad_norm)"), std::string::npos) << notes[0];
    EXPECT_FALSE(doc.value().contains("bf16")) << "no --bf16: no section added";
    EXPECT_EQ(doc.value()["fp16"]["enabled"], false);   // neither flag: fp32, the Trainer's default
    auto cfg = parse_ds_config(kStockZero3, doc->dump());
    ASSERT_TRUE(cfg.ok());
    EXPECT_EQ(cfg->model_dtype, DType::FP32);
}

TEST(TrainerAuto, AWrittenValueThatDisagreesWithAFlagIsTheTrainersMismatch) {
    // The stock ZeRO-2 config with the micro batch written as 8 and --per_device_train_batch_size 4.
    auto doc = read_ds_config_document(kStockZero2);
    ASSERT_TRUE(doc.ok());
    Json d = doc.value();
    d["train_micro_batch_size_per_gpu"] = 8;
    std::vector<std::string> notes;
    auto e = fill_trainer_auto(d, "mine.json", batch(4, 1), 4096, notes);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->field, "train_micro_batch_size_per_gpu");
    EXPECT_NE(e->message.find("= 8 vs --per_device_train_batch_size 4"), std::string::npos) << e->message;
}

TEST(TrainerAuto, BucketsComeFromTheModelsHiddenSize) {
    // GPT-2 small's config says n_embd 768, which transformers reads as hidden_size.
    auto gpt2 = load_model(test::config("models/gpt2-small.json"));
    ASSERT_TRUE(gpt2.ok());
    EXPECT_EQ(gpt2->hidden_size, 768);
    auto doc = filled(kStockZero3, batch(1, 1), gpt2->hidden_size);
    ASSERT_TRUE(doc.ok());
    EXPECT_EQ(doc.value()["zero_optimization"]["reduce_bucket_size"].get<int64_t>(), 589'824);            // 768^2
    EXPECT_EQ(doc.value()["zero_optimization"]["stage3_prefetch_bucket_size"].get<int64_t>(), 530'841);   // 0.9 x 589,824 = 530,841.6
    // A parameter list has no hidden_size: the three buckets are missing, named with why.
    auto none = filled(kStockZero3, batch(1, 1), 0);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("reduce_bucket_size (the model's hidden_size; this model file gives none"),
              std::string::npos)
        << none.error().message;
}

TEST(TrainerAuto, StageThreeKeysAreFilledOnlyAtStageThree) {
    Json d = Json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,
                             "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}})");
    std::vector<std::string> notes;
    auto e = fill_trainer_auto(d, "s2.json", TrainerArgs{}, 1024, notes);
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->message.find("stage3_prefetch_bucket_size (the Trainer fills it only at stage 3)"), std::string::npos) << e->message;
    EXPECT_EQ(d["zero_optimization"]["reduce_bucket_size"].get<int64_t>(), 1'048'576);   // 1024^2
}

TEST(TrainerAuto, BothPrecisionsAtOnceAreRefused) {
    TrainerArgs t = batch(1, 1);
    t.fp16 = t.bf16 = true;
    auto doc = filled(kStockZero3, t, 4096);
    ASSERT_FALSE(doc.ok());
    EXPECT_EQ(doc.error().field, "--fp16/--bf16");
}

TEST(TrainerAuto, AConfigWithoutAutoAndNoFlagIsReadAsWritten) {
    auto plain = read_ds_config_document(test::config("deepspeed/zero3.json"));
    auto doc = filled(test::config("deepspeed/zero3.json"), TrainerArgs{}, 0);
    ASSERT_TRUE(plain.ok() && doc.ok());
    EXPECT_EQ(doc.value(), plain.value());
}

}  // namespace
}  // namespace zerosim
