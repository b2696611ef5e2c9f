// DeepSpeed config reading: DeepSpeed v0.14.2's defaults (deepspeed/runtime/zero/config.py and
// runtime/config.py), the checks on bad values, and the batch-size rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "inputs/ds_config.hpp"

using namespace zerosim;

namespace {

DsConfig parse_ok(const std::string& text) {
    auto r = parse_ds_config("ds.json", text);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
    if (!r.ok()) return DsConfig{};
    return std::move(r).value();
}

Error parse_err(const std::string& text) {
    auto r = parse_ds_config("ds.json", text);
    EXPECT_FALSE(r.ok()) << text << " parsed but should not have";
    return r.ok() ? Error{} : r.error();
}

bool has_key(const DsConfig& c, const std::string& k) {
    return std::find(c.ignored_keys.begin(), c.ignored_keys.end(), k) != c.ignored_keys.end();
}

}  // namespace

// No zero_optimization section means ZeRO stage 0 (DeepSpeed's default), fp32, no overlap.
TEST(DsConfig, NoZeroSectionIsStage0) {
    DsConfig c = parse_ok(R"({"train_micro_batch_size_per_gpu": 2})");
    EXPECT_EQ(c.zero.stage, 0);
    EXPECT_FALSE(c.zero.overlap_comm);
    EXPECT_EQ(c.model_dtype, DType::FP32);
    EXPECT_EQ(c.comm_dtype(), DType::FP32);
    EXPECT_EQ(c.source, "ds.json");
    ASSERT_TRUE(c.micro_batch.has_value());
    EXPECT_EQ(*c.micro_batch, 2);
    EXPECT_FALSE(c.grad_accum.has_value());
}

// DeepSpeedZeroConfig defaults: reduce_bucket_size 5e8, contiguous_gradients, reduce_scatter and
// use_multi_rank_bucket_allreduce true, round_robin false, stage-3 persistence threshold 1e5,
// prefetch bucket 5e7, allgather bucket 5e8.
TEST(DsConfig, ZeroDefaults) {
    DsConfig c = parse_ok(R"({"zero_optimization": {"stage": 2}})");
    EXPECT_EQ(c.zero.stage, 2);
    EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
    EXPECT_EQ(c.zero.allgather_bucket_size, 500000000);
    EXPECT_TRUE(c.zero.contiguous_gradients);
    EXPECT_TRUE(c.zero.reduce_scatter);
    EXPECT_TRUE(c.zero.use_multi_rank_bucket_allreduce);
    EXPECT_TRUE(c.zero.allgather_partitions);
    EXPECT_FALSE(c.zero.round_robin_gradients);
    EXPECT_EQ(c.zero.param_persistence_threshold, 100000);
    EXPECT_EQ(c.zero.prefetch_bucket_size, 50000000);
    EXPECT_FALSE(c.zero.offload_optimizer);
    EXPECT_FALSE(c.zero.offload_param);
}

// overlap_comm defaults to (stage == 3): DeepSpeed's overlap_comm_valid validator.
TEST(DsConfig, OverlapCommDefaultsByStage) {
    EXPECT_FALSE(parse_ok(R"({"zero_optimization": {"stage": 1}})").zero.overlap_comm);
    EXPECT_FALSE(parse_ok(R"({"zero_optimization": {"stage": 2}})").zero.overlap_comm);
    EXPECT_TRUE(parse_ok(R"({"zero_optimization": {"stage": 3}})").zero.overlap_comm);
}

// An explicit overlap_comm wins over the stage default, both ways.
TEST(DsConfig, OverlapCommExplicitWins) {
    EXPECT_TRUE(parse_ok(R"({"zero_optimization": {"stage": 1, "overlap_comm": true}})").zero.overlap_comm);
    EXPECT_FALSE(parse_ok(R"({"zero_optimization": {"stage": 3, "overlap_comm": false}})").zero.overlap_comm);
}

// Explicit values replace the defaults.
TEST(DsConfig, ExplicitZeroValues) {
    DsConfig c = parse_ok(R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": 50000,
        "contiguous_gradients": false, "reduce_scatter": false, "use_multi_rank_bucket_allreduce": false,
        "round_robin_gradients": true, "stage3_param_persistence_threshold": 0,
        "stage3_max_live_parameters": 123, "offload_optimizer": {"device": "cpu"}}})");
    EXPECT_EQ(c.zero.reduce_bucket_size, 50000);
    EXPECT_FALSE(c.zero.contiguous_gradients);
    EXPECT_FALSE(c.zero.reduce_scatter);
    EXPECT_FALSE(c.zero.use_multi_rank_bucket_allreduce);
    EXPECT_TRUE(c.zero.round_robin_gradients);
    EXPECT_EQ(c.zero.param_persistence_threshold, 0);  // 0 is allowed: nothing persists
    EXPECT_EQ(c.zero.max_live_parameters, 123);
    EXPECT_TRUE(c.zero.offload_optimizer);
}

// Both spellings of the prefetch bucket are DeepSpeed's (field name and its stage3_ alias).
TEST(DsConfig, PrefetchBucketBothSpellings) {
    EXPECT_EQ(parse_ok(R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1234}})")
                  .zero.prefetch_bucket_size,
              1234);
    EXPECT_EQ(parse_ok(R"({"zero_optimization": {"stage": 3, "prefetch_bucket_size": 4321}})").zero.prefetch_bucket_size,
              4321);
}

// DeepSpeed configs write 5e8 as a float (the reference z1 config does); it is 500000000 exactly.
TEST(DsConfig, FloatCountsAccepted) {
    DsConfig c = parse_ok(R"({"zero_optimization": {"stage": 1, "reduce_bucket_size": 5e8,
        "allgather_bucket_size": 200000000.0}})");
    EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
    EXPECT_EQ(c.zero.allgather_bucket_size, 200000000);
    Error e = parse_err(R"({"zero_optimization": {"reduce_bucket_size": 1.5}})");
    EXPECT_EQ(e.field, "zero_optimization.reduce_bucket_size");
}

// fp16.enabled / bf16.enabled set the model dtype, which gradients travel in by default.
TEST(DsConfig, PrecisionSetsModelAndCommDtype) {
    DsConfig h = parse_ok(R"({"fp16": {"enabled": true}})");
    EXPECT_EQ(h.model_dtype, DType::FP16);
    EXPECT_EQ(h.comm_dtype(), DType::FP16);
    DsConfig b = parse_ok(R"({"bf16": {"enabled": true}})");
    EXPECT_EQ(b.model_dtype, DType::BF16);
    EXPECT_EQ(b.comm_dtype(), DType::BF16);
    DsConfig off = parse_ok(R"({"fp16": {"enabled": false}})");
    EXPECT_EQ(off.model_dtype, DType::FP32);
}

// communication_data_type overrides the dtype gradients are reduced in, not the model's.
TEST(DsConfig, CommunicationDataTypeOverrides) {
    DsConfig c = parse_ok(R"({"bf16": {"enabled": true}, "communication_data_type": "fp32"})");
    EXPECT_EQ(c.model_dtype, DType::BF16);
    EXPECT_EQ(c.comm_dtype(), DType::FP32);
    Error e = parse_err(R"({"communication_data_type": "int8"})");
    EXPECT_EQ(e.field, "communication_data_type");
}

// fp16 and bf16 together are refused, as DeepSpeed does.
TEST(DsConfig, Fp16AndBf16Together) {
    Error e = parse_err(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
    EXPECT_NE(e.message.find("both"), std::string::npos) << e.what();
}

// fp16 with the "bfloat16" spelling of bf16: the conflict is reported on the key present.
TEST(DsConfig, Fp16AndBfloat16SpellingTogether) {
    Error e = parse_err(R"({"fp16": {"enabled": true}, "bfloat16": {"enabled": true}})");
    EXPECT_NE(e.message.find("both"), std::string::npos) << e.what();
}

// "auto" is filled in by the HF Trainer; the error names the field and the Trainer flag.
TEST(DsConfig, AutoRejectedWithTrainerFlag) {
    Error e = parse_err(R"({"train_micro_batch_size_per_gpu": "auto"})");
    EXPECT_EQ(e.field, "train_micro_batch_size_per_gpu");
    EXPECT_EQ(e.file, "ds.json");
    EXPECT_NE(e.message.find("--per_device_train_batch_size"), std::string::npos) << e.what();
    Error g = parse_err(R"({"gradient_accumulation_steps": "auto"})");
    EXPECT_EQ(g.field, "gradient_accumulation_steps");
    EXPECT_NE(g.message.find("--gradient_accumulation_steps"), std::string::npos) << g.what();
    Error b = parse_err(R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"}})");
    EXPECT_EQ(b.field, "zero_optimization.reduce_bucket_size");
    EXPECT_NE(b.message.find("hidden_size"), std::string::npos) << b.what();
    Error f = parse_err(R"({"fp16": {"enabled": "auto"}})");
    EXPECT_EQ(f.field, "fp16.enabled");
    EXPECT_NE(f.message.find("--fp16"), std::string::npos) << f.what();
}

// ZeRO has stages 0 to 3 only.
TEST(DsConfig, StageOutOfRange) {
    Error e = parse_err(R"({"zero_optimization": {"stage": 4}})");
    EXPECT_EQ(e.field, "zero_optimization.stage");
    EXPECT_NE(e.message.find("4"), std::string::npos) << e.what();
    EXPECT_EQ(parse_err(R"({"zero_optimization": {"stage": -1}})").field, "zero_optimization.stage");
}

// A bucket of 0 or fewer elements can never flush.
TEST(DsConfig, ReduceBucketSizeMustBePositive) {
    EXPECT_EQ(parse_err(R"({"zero_optimization": {"reduce_bucket_size": 0}})").field,
              "zero_optimization.reduce_bucket_size");
    EXPECT_EQ(parse_err(R"({"zero_optimization": {"reduce_bucket_size": -5}})").field,
              "zero_optimization.reduce_bucket_size");
}

// Wrong JSON types name the field.
TEST(DsConfig, WrongTypes) {
    EXPECT_EQ(parse_err(R"({"zero_optimization": {"overlap_comm": "yes"}})").field, "zero_optimization.overlap_comm");
    EXPECT_EQ(parse_err(R"({"zero_optimization": 3})").field, "zero_optimization");
    EXPECT_EQ(parse_err(R"({"train_batch_size": 0})").field, "train_batch_size");
}

// Malformed JSON: the message gives line 2 (where '}' closes an object after a trailing comma).
TEST(DsConfig, MalformedJson) {
    // A trailing comma is hjson, which DeepSpeed reads (issue 33); a bracket closing a brace is not.
    Error e = parse_err("{\"train_batch_size\": 8,\n]");
    EXPECT_EQ(e.file, "ds.json");
    EXPECT_NE(e.message.find("line 2, column 1"), std::string::npos) << e.what();
}

// Unknown top-level keys are collected (one warning later); known keys that do not change the
// traffic (optimizer, comms_logger, steps_per_print) are not. An unknown key inside
// zero_optimization is refused, as DeepSpeed v0.14.2 refuses it (issue 14; it used to be collected).
TEST(DsConfig, IgnoredKeys) {
    DsConfig c = parse_ok(R"({"optimizer": {"type": "AdamW"}, "comms_logger": {"enabled": true},
        "steps_per_print": 1, "my_custom_key": 1,
        "zero_optimization": {"stage": 2}})");
    EXPECT_EQ(c.ignored_keys.size(), 1u);
    EXPECT_TRUE(has_key(c, "my_custom_key"));
    EXPECT_EQ(parse_err(R"({"zero_optimization": {"stage": 2, "typo_bucket_size": 5}})").field,
              "zero_optimization.typo_bucket_size");
    EXPECT_FALSE(has_key(c, "optimizer"));
    EXPECT_FALSE(has_key(c, "comms_logger"));
    EXPECT_FALSE(has_key(c, "zero_optimization"));
}

// DeepSpeed: train_batch_size = micro * gas * world; 2 * 4 * 4 = 32.
TEST(ResolveBatch, ConsistentTriple) {
    DsConfig c = parse_ok(
        R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
    auto b = resolve_batch(c, 4);
    ASSERT_TRUE(b.ok()) << b.error().what();
    EXPECT_EQ(b->micro_batch, 2);
    EXPECT_EQ(b->grad_accum, 4);
    EXPECT_EQ(b->train_batch, 32);
}

// 2 * 4 * 4 = 32, not 64: refused on train_batch_size.
TEST(ResolveBatch, InconsistentTriple) {
    DsConfig c = parse_ok(
        R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})");
    auto b = resolve_batch(c, 4);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().field, "train_batch_size");
    EXPECT_NE(b.error().message.find("64"), std::string::npos) << b.error().what();
}

// Only train_batch_size: gas = 1, micro = 32 / 4 = 8 (DeepSpeed's _set_batch_related_parameters).
TEST(ResolveBatch, OnlyTrainBatch) {
    DsConfig c = parse_ok(R"({"train_batch_size": 32})");
    auto b = resolve_batch(c, 4);
    ASSERT_TRUE(b.ok()) << b.error().what();
    EXPECT_EQ(b->micro_batch, 8);
    EXPECT_EQ(b->grad_accum, 1);
    EXPECT_EQ(b->train_batch, 32);
    // 30 is not divisible by 4 ranks.
    EXPECT_FALSE(resolve_batch(parse_ok(R"({"train_batch_size": 30})"), 4).ok());
}

// train_batch and micro: gas = 32 / (2 * 4) = 4. Only micro and gas: train = 2 * 3 * 4 = 24.
TEST(ResolveBatch, DerivedValues) {
    auto b = resolve_batch(parse_ok(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2})"), 4);
    ASSERT_TRUE(b.ok()) << b.error().what();
    EXPECT_EQ(b->grad_accum, 4);
    auto d = resolve_batch(parse_ok(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3})"), 4);
    ASSERT_TRUE(d.ok()) << d.error().what();
    EXPECT_EQ(d->train_batch, 24);
}

// Neither train_batch_size nor the micro batch: DeepSpeed cannot start.
TEST(ResolveBatch, NothingSet) {
    auto b = resolve_batch(parse_ok("{}"), 4);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().field, "train_micro_batch_size_per_gpu");
}
