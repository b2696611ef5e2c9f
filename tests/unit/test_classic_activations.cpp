// Issue 30: the families before Llama's decoder store what their own block stores, not the paper's
// GPT block (34 h per token and layer). Each figure is worked by hand from the family's modelling
// file and the shipped config (16-bit bytes per token, one layer; FlashAttention: no s x s terms):
// each norm's input 2h, the attention's input 2h, Q, K and V 2(q + 2 kv), the output projection's
// input 2q, the MLP's input 2h (none where the attention's is shared), GeLU's input and the second
// linear's input 2F each (ReLU: 2F once), a 1-byte mask of h per residual dropout above 0.
#include <gtest/gtest.h>

#include "inputs/model.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

int64_t per_token_layer(const std::string& file) {
    auto m = load_model(test::config("models/" + file));
    EXPECT_TRUE(m.ok()) << file;
    return m.ok() ? m->activations.largest : -1;
}

TEST(ClassicActivations, GptBigCodeStarCoderMultiQuery) {
    // h 6144, 48 heads of 128, one K and one V head (multi_query): q 6144, kv 128; F 24576; two
    // dropouts at GPTBigCodeConfig's 0.1. 4h + (2h + 2(q + 2kv) + 2q) + (2h + 4F) + two masks of h
    // = 24576 + 37376 + 110592 + 12288 = 184832 (30.1 h, not 34 h).
    EXPECT_EQ(per_token_layer("starcoder.json"), 184832);
}

TEST(ClassicActivations, OptReluKeepsOneTensorForTwoUses) {
    // h 2048, 32 heads (q = kv = h), F 8192, ReLU, dropout 0.1 twice:
    // 4h + 10h + (2h + 2F) + two masks of h = 8192 + 20480 + 20480 + 4096 = 53248 (26 h).
    EXPECT_EQ(per_token_layer("opt-1.3b.json"), 53248);
}

TEST(ClassicActivations, FalconParallelBlockSharesOneNorm) {
    // Falcon-7B: h 4544, 71 heads of 64, multi-query (kv 64), F 4h = 18176, parallel_attn with one
    // input_layernorm whose output both blocks read, hidden_dropout 0:
    // 2h + (2h + 2(4544 + 128) + 2h) + 4F = 9088 + 27520 + 72704 = 109312.
    EXPECT_EQ(per_token_layer("falcon-7b.json"), 109312);
    // Falcon-40B (new architecture): h 8192, 128 heads of 64, 8 kv heads (kv 512), ln_attn and
    // ln_mlp: 4h + (2h + 2(8192 + 1024) + 2h) + (2h + 4 x 32768) = 32768 + 51200 + 147456 = 231424.
    EXPECT_EQ(per_token_layer("falcon-40b.json"), 231424);
}

TEST(ClassicActivations, BloomWithoutDropout) {
    // BLOOM-560m: h 1024, 16 heads, F 4h, hidden_dropout 0: 4h + 10h + 18h = 32 h = 32768.
    EXPECT_EQ(per_token_layer("bloom-560m.json"), 32768);
}

}  // namespace
}  // namespace zerosim
