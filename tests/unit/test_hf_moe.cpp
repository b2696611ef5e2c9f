// Hugging Face families beyond their parameter counts (test_hf_families.cpp): a mixture of experts
// as a property of the model (dense to ZeRO, top-k experts in compute, expert parallelism refused
// by name), Megatron's tensor split of the new families' parameters, and the config keys refused
// by name (null where a number is needed, an unknown family, Gemma-3's image-text model).
#include <gtest/gtest.h>

#include <string>

#include "inputs/model.hpp"
#include "inline_inputs.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"
#include "test_model_helpers.hpp"

using namespace zerosim;
using namespace zerosim::model_test;
using zerosim::test::config;

namespace {

Error hf_error(const std::string& text) {
    auto r = model_from_hf_config_json("config.json", text);
    EXPECT_FALSE(r.ok()) << text << " read but should not have";
    return r.ok() ? Error{} : r.error();
}

// Forward FLOPs of one micro batch of one token (sequence length 1, so attention's scores add
// next to nothing), ZeRO-0 on one rank.
double forward_flops_per_token(const Model& m) {
    ScheduleOptions o;
    o.world = 1;
    o.seq_len = 1;
    auto s = build_schedule(m, test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 0}})"), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    double flops = 0;
    if (s.ok())
        for (const auto& op : s->ops)
            if (op.kind == OpKind::Compute && op.compute == ComputeKind::Forward) flops += op.flops;
    return flops;
}

TEST(HfMoe, ExpertsAreModulesOfADenseModel) {
    Model m = load_ok(config("models/mixtral-8x7b.json"));
    // Not DeepSpeed's MoE layers (no all_to_all, no expert groups): 32 layers of routed experts.
    EXPECT_TRUE(m.parallel.moe.empty());
    ASSERT_EQ(m.routed_experts.size(), 32u);
    EXPECT_EQ(m.routed_experts[0].experts, "model.layers.0.block_sparse_moe.experts");
    EXPECT_EQ(m.routed_experts[0].num_experts, 8);
    EXPECT_EQ(m.routed_experts[0].top_k, 2);
    EXPECT_DOUBLE_EQ(m.token_share("model.layers.0.block_sparse_moe.experts.5.w1"), 0.25);
    EXPECT_DOUBLE_EQ(m.token_share("model.layers.0.block_sparse_moe.gate"), 1.0);
    EXPECT_DOUBLE_EQ(m.token_share("model.layers.0.block_sparse_moe.experts_x"), 1.0);
    // The router runs first, then each expert's w1, w3, w2.
    auto order = forward_names(m, "model.layers.0.block_sparse_moe.");
    ASSERT_GE(order.size(), 4u);
    EXPECT_EQ(order[0], "gate");
    EXPECT_EQ(order[1], "experts.0.w1");
    EXPECT_EQ(order[2], "experts.0.w3");
    EXPECT_EQ(order[3], "experts.0.w2");
}

// Mixtral-8x7B: a token's forward passes 2 of 8 experts. Paper: per token, a multiply-add (2
// FLOPs) per active weight that is a matrix: 12,879,925,248 active parameters less the embedding
// (a lookup, 32000 x 4096) and the vectors (65 norms of 4096, which cost a few FLOPs each); the
// 8 experts' whole 46.7B would be 3.6 times as much.
TEST(HfMoe, MixtralFlopsPerTokenUseTopKExperts) {
    Model m = load_ok(config("models/mixtral-8x7b.json"));
    const double matrices = 12879925248.0 - 32000.0 * 4096 - 65 * 4096;
    EXPECT_NEAR(forward_flops_per_token(m) / (2 * matrices), 1.0, 1e-4);
}

// Qwen1.5-MoE-A2.7B: 4 of 60 routed experts, the shared expert and its gate for every token.
TEST(HfMoe, QwenMoeFlopsCountSharedExperts) {
    Model m = load_ok(config("models/qwen1.5-moe-a2.7b.json"));
    const double routed = 60.0 * 3 * 2048 * 1408;
    const double matrices = 24 * (4.0 * 2048 * 2048 + routed * 4 / 60 + 3.0 * 2048 * 5632 + 2048 + 60 * 2048) + 151936.0 * 2048;
    EXPECT_NEAR(forward_flops_per_token(m) / (2 * matrices), 1.0, 1e-3);
}

// Expert parallelism needs DeepSpeed's MoE layers; a Hugging Face MoE model's experts are plain modules.
TEST(HfMoe, ExpertParallelismRefusedByName) {
    Model m = load_ok(config("models/mixtral-8x7b.json"));
    ScheduleOptions o;
    o.world = 8;
    o.layout.expert = 2;
    auto s = build_schedule(m, test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})"), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "--ep");
    EXPECT_NE(s.error().message.find("expert parallelism of a Hugging Face MoE model is not modelled"), std::string::npos)
        << s.error().what();
    EXPECT_NE(s.error().message.find("\"moe\" section"), std::string::npos);
}

TEST(HfMoe, TooManyExpertsRefusedBeforeBuilding) {
    Error e = hf_error(R"({"model_type": "mixtral", "num_local_experts": 100000})");
    EXPECT_EQ(e.field, "num_local_experts");
    EXPECT_NE(e.message.find("parameter tensors"), std::string::npos) << e.what();
    Error k = hf_error(R"({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 8})");
    EXPECT_EQ(k.field, "num_experts_per_tok");
}

// Qwen-MoE's dense layers: mlp_only_layers and decoder_sparse_step (Qwen2MoeDecoderLayer).
TEST(HfMoe, QwenMoeDenseLayers) {
    Model m = hf_inline("qwen-moe-small.json", R"({"model_type": "qwen2_moe", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 4, "intermediate_size": 96, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48, "num_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100,
        "decoder_sparse_step": 2, "mlp_only_layers": [3]})");
    // Layer 1 is sparse ((1 + 1) % 2 == 0); 0 and 2 are not; 3 is listed dense.
    ASSERT_EQ(m.routed_experts.size(), 1u);
    EXPECT_EQ(m.routed_experts[0].experts, "model.layers.1.mlp.experts");
    EXPECT_GE(param_index(m, "model.layers.3.mlp.gate_proj.weight"), 0);
    EXPECT_GE(param_index(m, "model.layers.1.mlp.shared_expert_gate.weight"), 0);
}

// Megatron's split of the new families' parameters (megatron/core/tensor_parallel/layers.py):
// column-parallel in, row-parallel out, experts like the MLP, routers and MLA's down projections whole.
TEST(HfMoe, TensorSplitsOfTheNewFamilies) {
    auto split = [](const Model& m, const std::string& name) {
        int i = param_index(m, name);
        EXPECT_GE(i, 0) << name;
        return i < 0 ? TpSplit::None : m.params[static_cast<size_t>(i)].tp;
    };
    Model mix = load_ok(config("models/mixtral-8x7b.json"));
    EXPECT_EQ(split(mix, "model.layers.0.block_sparse_moe.experts.0.w1.weight"), TpSplit::Column);
    EXPECT_EQ(split(mix, "model.layers.0.block_sparse_moe.experts.0.w3.weight"), TpSplit::Column);
    EXPECT_EQ(split(mix, "model.layers.0.block_sparse_moe.experts.0.w2.weight"), TpSplit::Row);
    EXPECT_EQ(split(mix, "model.layers.0.block_sparse_moe.gate.weight"), TpSplit::None);
    Model ds = load_ok(config("models/deepseek-v2-lite.json"));
    EXPECT_EQ(split(ds, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), TpSplit::None);
    EXPECT_EQ(split(ds, "model.layers.0.self_attn.kv_b_proj.weight"), TpSplit::Column);
    EXPECT_EQ(split(ds, "model.layers.0.self_attn.o_proj.weight"), TpSplit::Row);
    Model phi = load_ok(config("models/phi-3-mini-4k.json"));
    EXPECT_EQ(split(phi, "model.layers.0.self_attn.qkv_proj.weight"), TpSplit::Column);
    EXPECT_EQ(split(phi, "model.layers.0.mlp.gate_up_proj.weight"), TpSplit::Column);
    Model bloom = load_ok(config("models/bloom-560m.json"));
    EXPECT_EQ(split(bloom, "transformer.word_embeddings.weight"), TpSplit::Column);
    EXPECT_EQ(split(bloom, "transformer.h.0.self_attention.dense.weight"), TpSplit::Row);
    EXPECT_EQ(split(bloom, "transformer.h.0.self_attention.dense.bias"), TpSplit::None);
    Model opt = load_ok(config("models/opt-1.3b.json"));
    EXPECT_EQ(split(opt, "model.decoder.layers.0.self_attn.out_proj.weight"), TpSplit::Row);
    EXPECT_EQ(split(opt, "model.decoder.layers.0.fc1.bias"), TpSplit::Column);
    EXPECT_EQ(split(opt, "model.decoder.layers.0.fc2.weight"), TpSplit::Row);
    Model sc = load_ok(config("models/starcoder.json"));
    const int c_proj = param_index(sc, "transformer.h.0.mlp.c_proj.weight");
    ASSERT_GE(c_proj, 0);
    EXPECT_EQ(sc.params[static_cast<size_t>(c_proj)].tp_dim, 1);   // nn.Linear [out, in], not GPT-2's Conv1D
}

// A null where a number is needed names its key; keys the config class reads None as its default
// (num_key_value_heads, head_dim, DeepSeek's q_lora_rank) take that default.
TEST(HfMoe, NullRefusedByName) {
    Error e = hf_error(R"({"model_type": "llama", "hidden_size": null})");
    EXPECT_EQ(e.field, "hidden_size");
    EXPECT_NE(e.message.find("found null"), std::string::npos) << e.what();
    EXPECT_EQ(hf_error(R"({"model_type": "mixtral", "num_local_experts": null})").field, "num_local_experts");
    EXPECT_EQ(hf_error(R"({"model_type": "gemma2", "tie_word_embeddings": null})").field, "tie_word_embeddings");
    EXPECT_EQ(hf_error(R"({"model_type": "falcon", "hidden_size": null})").field, "hidden_size");
    Model kv = hf_inline("llama-null-kv.json", R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": null, "head_dim": null, "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 10})");
    EXPECT_EQ(kv.kv_heads, 4);
}

TEST(HfMoe, UnknownFamilyNamesWhatIsSupported) {
    Error e = hf_error(R"({"model_type": "mamba"})");
    EXPECT_EQ(e.field, "model_type");
    for (const char* family : {"mixtral", "deepseek_v3", "gemma3_text", "falcon", "olmo2", "parameter-list"})
        EXPECT_NE(e.message.find(family), std::string::npos) << family << ": " << e.what();
    Error g = hf_error(R"({"model_type": "gemma3", "text_config": {"hidden_size": 1152}})");
    EXPECT_EQ(g.field, "model_type");
    EXPECT_NE(g.message.find("gemma3_text"), std::string::npos) << g.what();
}

// The per-rank program of a new family under tensor parallelism: heads and splits as marked.
TEST(HfMoe, TensorParallelQwen3Builds) {
    Model m = hf_inline("qwen3-small.json", R"({"model_type": "qwen3", "hidden_size": 64, "head_dim": 16,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
        "vocab_size": 128, "tie_word_embeddings": true})");
    ScheduleOptions o;
    o.world = 4;
    o.layout.tensor = 2;
    auto s = build_schedule(m, test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})"), o);
    ASSERT_TRUE(s.ok()) << s.error().what();
    // Rank 0 holds half of each split matrix: q_proj 64 x 64 becomes 32 x 64.
    bool found = false;
    for (const auto& p : s->params)
        if (p.name == "model.layers.0.self_attn.q_proj.weight") {
            found = true;
            EXPECT_EQ(p.numel, 32 * 64);
        }
    EXPECT_TRUE(found);
}

}  // namespace
