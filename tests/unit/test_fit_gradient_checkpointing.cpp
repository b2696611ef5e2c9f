// Issue 19: Hugging Face's "gradient_checkpointing": true in a model's config.json turns on the fit's
// activation checkpointing as --activation-checkpointing does. GPT-2 small, s = 1024, b = 4, bf16
// (2-byte activations), h = 768, L = 12 (Korthikanti et al. 2022, sec. 4.1 and 5):
//   without: 34 s b h L         = 34 x 3,145,728 x 12 = 1,283,457,024 bytes in the layers
//   with:    2 s b h L + 34 s b h = (24 + 34) x 3,145,728 =   182,452,224 bytes
#include <gtest/gtest.h>

#include "analysis/fit.hpp"
#include "inputs/model.hpp"

namespace zerosim {
namespace {

const char* kGpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
                        "vocab_size": 50257%s})";

Model gpt2(const char* extra) {
    char text[512];
    std::snprintf(text, sizeof text, kGpt2, extra);
    auto m = model_from_hf_config_json("config.json", text);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

TEST(FitGradientCheckpointing, HuggingFaceKeyTurnsItOn) {
    const Model plain = gpt2("");
    const Model hf = gpt2(R"(, "gradient_checkpointing": true)");
    EXPECT_FALSE(plain.gradient_checkpointing);
    EXPECT_TRUE(hf.gradient_checkpointing);
    auto without = estimate_activations(plain, 1024, 4, DType::BF16, false);
    auto by_key = estimate_activations(hf, 1024, 4, DType::BF16, false);
    auto by_flag = estimate_activations(plain, 1024, 4, DType::BF16, true);
    EXPECT_EQ(without.layers_bytes, 1283457024);
    EXPECT_EQ(by_key.layers_bytes, 182452224);
    EXPECT_TRUE(by_key.checkpointing);
    EXPECT_EQ(by_key.layers_bytes, by_flag.layers_bytes);
    EXPECT_FALSE(gpt2(R"(, "gradient_checkpointing": false)").gradient_checkpointing);
}

}  // namespace
}  // namespace zerosim
