// Issue 14, "No silent wrong answers", in the input readers: DeepSpeed's own strictness about
// zero_optimization keys, features zerosim does not model refused or warned by name, 64-bit
// element counts that cannot wrap, numbers checked for type and range, and the README's
// parameter-list example read as written.
// Key lists come from DeepSpeed v0.14.2 runtime/zero/config.py (DeepSpeedZeroConfig), written out
// here independently of the reader's own table.
#include <gtest/gtest.h>

#include <string>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "test_helpers.hpp"

using namespace zerosim;
using zerosim::test::config;
using zerosim::test::read_file;
using zerosim::test::reference;

namespace {

Result<DsConfig> ds(const std::string& text) { return parse_ds_config("ds.json", text); }

Error ds_err(const std::string& text) {
    auto r = ds(text);
    EXPECT_FALSE(r.ok()) << text << " parsed but should not have";
    return r.ok() ? Error{} : r.error();
}

DsConfig ds_ok(const std::string& text) {
    auto r = ds(text);
    EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().what());
    return r.ok() ? std::move(r).value() : DsConfig{};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Error params_err(const std::string& text) {
    auto r = model_from_param_list_json("m.json", text);
    EXPECT_FALSE(r.ok()) << text << " read but should not have";
    return r.ok() ? Error{} : r.error();
}

Error hf_err(const std::string& text) {
    auto r = model_from_hf_config_json("config.json", text);
    EXPECT_FALSE(r.ok()) << text << " read but should not have";
    return r.ok() ? Error{} : r.error();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// zero_optimization keys: DeepSpeedConfigModel's `extra = "forbid"` refuses unknown ones.

TEST(InputStrictness, UnknownZeroKeyRefusedWithClosestKey) {
    Error e = ds_err(R"({"zero_optimization": {"stage": 2, "reduce_bucket_sise": 50000}})");
    EXPECT_EQ(e.file, "ds.json");
    EXPECT_EQ(e.field, "zero_optimization.reduce_bucket_sise");
    EXPECT_TRUE(contains(e.message, "did you mean 'reduce_bucket_size'?")) << e.what();
    Error far = ds_err(R"({"zero_optimization": {"completely_unrelated_setting_name": 1}})");
    EXPECT_EQ(far.field, "zero_optimization.completely_unrelated_setting_name");
    EXPECT_FALSE(contains(far.message, "did you mean")) << far.what();
}

// Every field and alias of DeepSpeedZeroConfig, each with DeepSpeed's default, is accepted.
TEST(InputStrictness, EveryDeepSpeedZeroKeyAccepted) {
    ds_ok(R"({"zero_optimization": {"stage": 3, "contiguous_gradients": true, "reduce_scatter": true,
        "reduce_bucket_size": 500000000, "use_multi_rank_bucket_allreduce": true, "allgather_partitions": true,
        "allgather_bucket_size": 500000000, "overlap_comm": null, "load_from_fp32_weights": true,
        "elastic_checkpoint": false, "offload_param": null, "offload_optimizer": null, "sub_group_size": 1000000000,
        "cpu_offload_use_pin_memory": null, "stage3_prefetch_bucket_size": 50000000,
        "param_persistence_threshold": 100000, "stage3_model_persistence_threshold": 9223372036854775807,
        "max_live_parameters": 1000000000, "stage3_max_reuse_distance": 1000000000,
        "gather_16bit_weights_on_model_save": false, "ignore_unused_parameters": true, "legacy_stage1": false,
        "round_robin_gradients": false, "zero_hpz_partition_size": 1, "zero_quantized_weights": false,
        "zero_quantized_nontrainable_weights": false, "zero_quantized_gradients": false, "mics_shard_size": -1,
        "mics_hierarchical_params_gather": false, "memory_efficient_linear": true,
        "pipeline_loading_checkpoint": false, "override_module_apply": true}})");
    // The other spelling of each aliased field, and the deprecated fields without their replacements.
    ds_ok(R"({"zero_optimization": {"prefetch_bucket_size": 1, "stage3_param_persistence_threshold": 1,
        "model_persistence_threshold": 1, "stage3_max_live_parameters": 1, "max_reuse_distance": 1,
        "stage3_gather_16bit_weights_on_model_save": false}})");
    DsConfig c = ds_ok(R"({"zero_optimization": {"stage": 2, "cpu_offload": true, "cpu_offload_param": true,
        "stage3_gather_fp16_weights_on_model_save": false}})");
    // config.py new_param_fn: cpu_offload true is offload_optimizer on the CPU (warned as offload).
    EXPECT_TRUE(c.zero.offload_optimizer);
    EXPECT_TRUE(c.zero.offload_param);
}

// _process_deprecated_field asserts when a deprecated key and its replacement are both written;
// pydantic forbids a field's name beside its alias; engine.py refuses legacy_stage1.
TEST(InputStrictness, CombinationsDeepSpeedRefuses) {
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"cpu_offload": false, "offload_optimizer": {"device": "cpu"}}})").field,
              "zero_optimization.cpu_offload");
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}})").field,
              "zero_optimization.prefetch_bucket_size");
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"stage": 1, "legacy_stage1": true}})").field,
              "zero_optimization.legacy_stage1");
    // offload_config.py: OffloadDeviceEnum is none, cpu or nvme; the sections forbid extra keys.
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})").field,
              "zero_optimization.offload_optimizer.device");
    Error pin = ds_err(R"({"zero_optimization": {"offload_param": {"device": "cpu", "pin_memmory": true}}})");
    EXPECT_EQ(pin.field, "zero_optimization.offload_param.pin_memmory");
    EXPECT_TRUE(contains(pin.message, "did you mean 'pin_memory'?")) << pin.what();
    EXPECT_FALSE(ds_ok(R"({"zero_optimization": {"offload_optimizer": {"device": "none", "ratio": 0.5}}})")
                     .zero.offload_optimizer);
}

// Unknown top-level keys (DeepSpeed ignores them): warned, with the closest known key.
TEST(InputStrictness, UnknownTopLevelKeyWarnedWithClosestKey) {
    DsConfig c = ds_ok(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimisation": {"stage": 3},
        "my_custom_key": 1, "mics_shard_size": 2})");
    ASSERT_EQ(c.ignored_keys.size(), 3u);
    EXPECT_EQ(c.ignored_keys[0], "zero_optimisation (did you mean 'zero_optimization'?)");
    EXPECT_EQ(c.ignored_keys[1], "my_custom_key");
    EXPECT_EQ(c.ignored_keys[2], "mics_shard_size (a zero_optimization key; DeepSpeed ignores it at the top level)");
    EXPECT_EQ(c.zero.stage, 0);  // what DeepSpeed does with the misspelt section
    // Two edits in five letters is no typo: "model" (a run.json key) suggests nothing, not "moe".
    EXPECT_EQ(ds_ok(R"({"model": "tiny"})").ignored_keys.at(0), "model");
}

// ---------------------------------------------------------------------------------------------
// ZeRO++ and MiCS (issue 17): hpZ, qwZ, qgZ and flat MiCS are modelled at stage 3 and read;
// quantized non-trainable weights and hierarchical MiCS gathers stay refused; below stage 3
// (DeepSpeed ignores them there) every one is refused; their defaults stay accepted.

TEST(InputStrictness, ZeroPlusPlusAndMicsReadAtStage3) {
    DsConfig c = ds_ok(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2, "zero_quantized_weights": true,
        "zero_quantized_gradients": true}})");
    EXPECT_EQ(c.zero.hpz_partition_size, 2);
    EXPECT_TRUE(c.zero.quantized_weights);
    EXPECT_TRUE(c.zero.quantized_gradients);
    EXPECT_EQ(ds_ok(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 2}})").zero.mics_shard_size, 2);
    // MiCS_Optimizer is built without the ZeRO++ arguments: the mix is refused, naming it.
    EXPECT_TRUE(contains(ds_err(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2, "mics_shard_size": 2}})").message,
                         "MiCS with zero_hpz_partition_size"));
}

TEST(InputStrictness, ZeroPlusPlusAndMicsRefused) {
    struct Case {
        const char* setting;
        const char* field;
    } cases[] = {{R"("zero_quantized_nontrainable_weights": true)", "zero_quantized_nontrainable_weights"},
                 {R"("mics_hierarchical_params_gather": true)", "mics_hierarchical_params_gather"}};
    for (const auto& k : cases) {
        Error e = ds_err(std::string(R"({"zero_optimization": {"stage": 3, )") + k.setting + "}}");
        EXPECT_EQ(e.field, std::string("zero_optimization.") + k.field);
        EXPECT_TRUE(contains(e.message, std::string("(") + k.field + ") is not modelled yet; the schedule would be "
                                                                      "plain stage 3's"))
            << e.what();
    }
    // Below stage 3 DeepSpeed ignores them; zerosim still refuses (a sweep could run the file at 3).
    EXPECT_TRUE(contains(ds_err(R"({"zero_optimization": {"stage": 2, "mics_shard_size": 4}})").message,
                         "ignores it at stage 2"));
    EXPECT_TRUE(contains(ds_err(R"({"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 2}})").message,
                         "ZeRO++ hpZ"));
    // hpZ takes ge=0 (config.py): -1 is DeepSpeed's error too.
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"zero_hpz_partition_size": -1}})").field,
              "zero_optimization.zero_hpz_partition_size");
    ds_ok(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 0, "mics_shard_size": 0}})");
}

// The real runs of shared/reference/deepspeed-v0.14.2-cpu-variants: every config is readable
// (test_zero_variants_reference.cpp reproduces each run).
TEST(InputStrictness, ReferenceVariantConfigs) {
    const std::string dir = "deepspeed-v0.14.2-cpu-variants/";
    for (const char* ok : {"hpz2_r0p0_w4", "mics2_w4", "qgz_l2_w4", "qwz_w4", "z3_offload_opt_w4", "z3_zeroinit_w4"}) {
        auto r = load_ds_config(reference(dir + ok + "/ds_config.json"));
        EXPECT_TRUE(r.ok()) << ok << ": " << (r.ok() ? "" : r.error().what());
    }
}

// Pipeline, tensor, expert and sequence parallelism: one warning naming each.
// Issue 28: the layout keys are read where DeepSpeed reads them and named where not; nothing is
// called "not modelled" any more. "pipeline" holds the pipeline engine's settings (silent), the
// Ulysses degree is read, inference's tp_size and a "moe" section are named.
TEST(InputStrictness, LayoutKeysReadOrNamed) {
    DsConfig c = ds_ok(R"({"pipeline": {"stages": 2}, "sequence_parallel_size": 4, "moe": {"enabled": true}})");
    EXPECT_EQ(c.sequence_parallel_size, 4);
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_TRUE(contains(c.warnings[0], "moe: DeepSpeed's engine reads no MoE layout")) << c.warnings[0];
    EXPECT_TRUE(c.ignored_keys.empty());
    EXPECT_TRUE(ds_ok(R"({"sequence_parallel_size": 1, "tensor_parallel": {"tp_size": 1}})").warnings.empty());
    EXPECT_EQ(ds_ok(R"({"tensor_parallel": {"tp_size": 2}})").warnings.size(), 1u);
    EXPECT_EQ(ds_err(R"({"sequence_parallel_size": 0})").field, "sequence_parallel_size");
    // AutoTP's degree from v0.16.4; v0.14.2 names it as a key it does not read.
    auto later = parse_ds_config("ds.json", R"({"tensor_parallel": {"autotp_size": 4}})", Release{0, 17, 0});
    ASSERT_TRUE(later.ok()) << later.error().what();
    EXPECT_EQ(later->autotp_size, 4);
    DsConfig early = ds_ok(R"({"tensor_parallel": {"autotp_size": 4}})");
    EXPECT_EQ(early.autotp_size, 0);
    ASSERT_EQ(early.ignored_keys.size(), 1u);
    EXPECT_TRUE(contains(early.ignored_keys[0], "v0.16.4")) << early.ignored_keys[0];
}

// ---------------------------------------------------------------------------------------------
// Numbers: type, range, finiteness.

TEST(InputStrictness, DeepSpeedNumbersChecked) {
    EXPECT_EQ(ds_err(R"({"train_micro_batch_size_per_gpu": 2.5})").field, "train_micro_batch_size_per_gpu");
    EXPECT_EQ(ds_err(R"({"gradient_accumulation_steps": -1})").field, "gradient_accumulation_steps");
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"reduce_bucket_size": -5e8}})").field, "zero_optimization.reduce_bucket_size");
    EXPECT_EQ(ds_err(R"({"zero_optimization": {"stage3_max_live_parameters": -1}})").field,
              "zero_optimization.stage3_max_live_parameters");
    EXPECT_EQ(ds_err(R"({"gradient_clipping": -1.0})").field, "gradient_clipping");
    EXPECT_EQ(ds_err(R"({"gradient_clipping": "1.0"})").field, "gradient_clipping");
    // 2^64 - 1 and 2^63 used to wrap to -1 and -2^63 when read as int64_t.
    Error big = ds_err(R"({"gradient_accumulation_steps": 18446744073709551615})");
    EXPECT_TRUE(contains(big.message, "found 18446744073709551615")) << big.what();
    Error edge = ds_err(R"({"zero_optimization": {"stage3_prefetch_bucket_size": 9223372036854775808}})");
    EXPECT_TRUE(contains(edge.message, "found 9223372036854775808")) << edge.what();
    EXPECT_TRUE(contains(ds_err(R"({"train_batch_size": 1e19})").message, "found 1e+19"));
    EXPECT_FALSE(ds(R"({"train_batch_size": 1e400})").ok());
    EXPECT_EQ(ds_ok(R"({"zero_optimization": {"stage3_model_persistence_threshold": 9223372036854775807}})")
                  .zero.model_persistence_threshold,
              INT64_MAX);
}

// micro * accumulation * world, checked: 2^62 * 2 * 4 does not wrap into a "consistent" batch.
TEST(InputStrictness, BatchProductChecked) {
    DsConfig c = ds_ok(R"({"train_micro_batch_size_per_gpu": 4611686018427387904, "gradient_accumulation_steps": 2})");
    auto b = resolve_batch(c, 4);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().field, "train_micro_batch_size_per_gpu");
    DsConfig t = ds_ok(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4611686018427387904})");
    EXPECT_FALSE(resolve_batch(t, 4).ok());
}

TEST(InputStrictness, ModelNumbersChecked) {
    const std::string head = R"({"parameters": [{"name": "a.weight", "shape": [4, 4])";
    EXPECT_EQ(params_err(head + R"(, "group": 1.5}]})").field, "parameters[0].group");
    EXPECT_EQ(params_err(R"({"parameters": [{"name": "a.weight", "shape": [4.5]}]})").field, "parameters[0].shape[0]");
    EXPECT_EQ(params_err(R"({"parameters": [{"name": "a.weight", "shape": [-4]}]})").field, "parameters[0].shape");
    EXPECT_EQ(params_err(head + R"(}], "seq_len": 0})").field, "seq_len");
    EXPECT_EQ(params_err(head + R"(}], "seq_len": -5})").field, "seq_len");
    EXPECT_EQ(hf_err(R"({"model_type": "gpt2", "n_layer": 2.5})").field, "n_layer");
    EXPECT_EQ(hf_err(R"({"model_type": "llama", "num_hidden_layers": -1})").field, "num_hidden_layers");
    EXPECT_EQ(hf_err(R"({"model_type": "llama", "vocab_size": 0})").field, "vocab_size");
    EXPECT_EQ(hf_err(R"({"model_type": "gpt_neox", "hidden_size": "64"})").field, "hidden_size");
    // 32 heads (LlamaConfig's default, not in the file) are not a multiple of 3: the field is the one written.
    EXPECT_EQ(hf_err(R"({"model_type": "llama", "num_key_value_heads": 3})").field, "num_key_value_heads");
}

// ---------------------------------------------------------------------------------------------
// Element counts: overflow-checked, bounded by kMaxModelElements = 2^56.

TEST(InputStrictness, ParameterShapesOverflowChecked) {
    // 2^32 * 2^32 = 2^64: used to wrap to numel 0 and a 0B broadcast.
    Error e = params_err(R"({"parameters": [{"name": "a.b", "shape": [1]}, {"name": "c.d", "shape": [2]},
        {"name": "e.f", "shape": [3]}, {"name": "x.weight", "shape": [4294967296, 4294967296]}]})");
    EXPECT_EQ(e.field, "parameters[3].shape");
    EXPECT_EQ(e.message, "2^64 elements in 'x.weight' exceed 2^56, the most zerosim takes for a model");
    // 2^63 does not fit int64_t: said as written, not as -9223372036854775808.
    Error e63 = params_err(R"({"parameters": [{"name": "x.weight", "shape": [9223372036854775808]}]})");
    EXPECT_EQ(e63.field, "parameters[0].shape[0]");
    EXPECT_TRUE(contains(e63.message, "found 9223372036854775808")) << e63.what();
    // 3 * 2^62 wraps too; 2^57 fits int64_t but exceeds the bound.
    EXPECT_TRUE(contains(params_err(R"({"parameters": [{"name": "x.w", "shape": [3, 4611686018427387904]}]})").message,
                         "1.38e+19 elements"));
    EXPECT_TRUE(contains(params_err(R"({"parameters": [{"name": "x.w", "shape": [144115188075855872]}]})").message,
                         "2^57 elements"));
    // Two parameters of 2^55 each are 2^56 in total (allowed); a third passes the bound.
    auto ok = model_from_param_list_json("m.json", R"({"parameters": [{"name": "a.w", "shape": [36028797018963968]},
        {"name": "b.w", "shape": [36028797018963968]}]})");
    ASSERT_TRUE(ok.ok()) << ok.error().what();
    EXPECT_EQ(ok->total_numel(), kMaxModelElements);
    Error total = params_err(R"({"parameters": [{"name": "a.w", "shape": [36028797018963968]},
        {"name": "b.w", "shape": [36028797018963968]}, {"name": "c.w", "shape": [1]}]})");
    EXPECT_EQ(total.field, "parameters[2].shape");
    EXPECT_TRUE(contains(total.message, "the parameters up to 'c.w' hold")) << total.what();
}

// llama with hidden_size 2^32 used to give 899 ops of 0B.
TEST(InputStrictness, HfSizesOverflowChecked) {
    Error e = hf_err(R"({"model_type": "llama", "hidden_size": 4294967296, "num_attention_heads": 1})");
    EXPECT_EQ(e.field, "hidden_size");
    EXPECT_TRUE(contains(e.message, "found 4294967296")) << e.what();
    // 2^31 - 1 is allowed as a size, but q_proj is then (2^31 - 1)^2 = 4.61e18 elements.
    Error q = hf_err(R"({"model_type": "llama", "hidden_size": 2147483647, "num_attention_heads": 1})");
    EXPECT_EQ(q.field, "hidden_size");
    EXPECT_TRUE(contains(q.message, "makes 'model.embed_tokens.weight'") ||
                contains(q.message, "makes 'model.layers.0.self_attn.q_proj.weight'"))
        << q.what();
    // vocab 2^31 - 1 by hidden 2^26: the embedding alone is 1.44e17 > 2^56; vocab is the largest size.
    Error v = hf_err(R"({"model_type": "gpt2", "vocab_size": 2147483647, "n_embd": 67108864, "n_head": 1})");
    EXPECT_EQ(v.field, "vocab_size");
    EXPECT_TRUE(contains(v.message, "makes 'transformer.wte.weight' 1.44e+17 elements")) << v.what();
    // Per layer: q, k, v, o are 4 * 2^32, gate/up/down 3 * 2^16 * 11008, norms 2 * 2^16 (1.93e10);
    // times 2^31 - 1 layers is 4.15e19 with the embedding, refused after building one layer, not 2^31 of them.
    Error l = hf_err(R"({"model_type": "llama", "num_hidden_layers": 2147483647, "hidden_size": 65536,
        "num_attention_heads": 1})");
    EXPECT_EQ(l.field, "num_hidden_layers");
    EXPECT_TRUE(contains(l.message, "makes the parameters up to the last of 2147483647 layers 4.15e+19 elements")) << l.what();
}

// ---------------------------------------------------------------------------------------------
// README.md's parameter-list example, read from the README itself so that it cannot rot.

TEST(InputStrictness, ReadmeExample) {
    std::string readme = read_file(config("../README.md"));
    auto intro = readme.find("A parameter list describes any other model");
    ASSERT_NE(intro, std::string::npos);
    auto open = readme.find("```json\n", intro);
    ASSERT_NE(open, std::string::npos);
    open += 8;
    auto close = readme.find("```", open);
    ASSERT_NE(close, std::string::npos);
    auto m = model_from_param_list_json("README.md", readme.substr(open, close - open));
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ(m->name, "tiny-gpt");
    ASSERT_EQ(m->params.size(), 2u);
    EXPECT_EQ(m->total_numel(), 1024 * 128 + 128);
    EXPECT_EQ(m->num_groups, 2);  // decay_no_decay with the norm's weight put in group 1
    ASSERT_EQ(m->forward_order.size(), 3u);
    const Module& head = m->modules[m->forward_order[2]];
    EXPECT_EQ(head.name, "lm_head");
    ASSERT_EQ(head.params.size(), 1u);
    EXPECT_EQ(m->params[head.params[0]].name, "wte.weight");  // the tied use, fetched again for the head
}

// README.md's 3D sketch: every section reads, and means what the README says.
TEST(InputStrictness, ReadmeParallelExample) {
    std::string readme = read_file(config("../README.md"));
    auto intro = readme.find("the test `ReadmeParallelExample` reads this sketch");
    ASSERT_NE(intro, std::string::npos);
    auto open = readme.find("```json\n", intro);
    ASSERT_NE(open, std::string::npos);
    open += 8;
    auto close = readme.find("```", open);
    auto m = model_from_param_list_json("README.md", readme.substr(open, close - open));
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ(m->params[0].tp, TpSplit::Column);
    EXPECT_EQ(m->params[1].tp, TpSplit::Row);
    ASSERT_EQ(m->parallel.pipe_layers.size(), 4u);
    EXPECT_EQ(m->parallel.pipe_layers[3].output, (std::vector<int64_t>{16, 192}));
    ASSERT_EQ(m->parallel.moe.size(), 1u);
    EXPECT_EQ(m->parallel.moe[0].num_experts, 2);
    ASSERT_EQ(m->parallel.attention.size(), 1u);
    EXPECT_EQ(m->parallel.attention[0].heads, 4);
}
