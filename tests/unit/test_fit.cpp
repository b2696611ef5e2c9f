// Does a rank fit its GPU (analysis/fit.hpp): activations worked by hand from Korthikanti et al.
// 2022 (34 s b h per layer, 4 s b h (1 + v/h) outside the layers, 2 s b h per layer plus one layer
// when checkpointed), the framework reserve and the GPU's memory at the boundary.
#include <gtest/gtest.h>

#include "analysis/fit.hpp"
#include "analysis/memory_report.hpp"
#include "inline_inputs.hpp"

namespace zerosim {
namespace {

// Two layers of width h = 16, a 100-token vocabulary.
const char* kTwoLayers = R"({"name": "two-layers", "parameters": [
  {"name": "wte.weight", "shape": [100, 16]},
  {"name": "h.0.ln.weight", "shape": [16]}, {"name": "h.0.fc.weight", "shape": [64, 16]},
  {"name": "h.1.ln.weight", "shape": [16]}, {"name": "h.1.fc.weight", "shape": [64, 16]},
  {"name": "ln_f.weight", "shape": [16]}]})";

TEST(Fit, ActivationsWorkedByHand) {
    Model m = test::param_list(kTwoLayers);
    // s = 8, b = 2: s b h = 256, s b v = 1600.
    auto a = estimate_activations(m, 8, 2, DType::BF16, false);
    EXPECT_EQ(a.layers, 2);
    EXPECT_EQ(a.hidden, 16);
    EXPECT_EQ(a.vocab, 100);
    EXPECT_EQ(a.per_layer_bytes, 34 * 256);          // 8704
    EXPECT_EQ(a.layers_bytes, 2 * 8704);             // 17408
    EXPECT_EQ(a.outside_bytes, 4 * 256 + 4 * 1600);  // 7424: final norm and head inputs, fp32 logits
    EXPECT_EQ(a.total(), 24832);
    // Checkpointed: each layer keeps its 2 s b h input, one layer is recomputed in backward.
    auto c = estimate_activations(m, 8, 2, DType::BF16, true);
    EXPECT_EQ(c.layers_bytes, 2 * 256 * 2 + 8704);   // 9728
    EXPECT_EQ(c.total(), 9728 + 7424);
    EXPECT_NE(c.formula.find("checkpointing"), std::string::npos);
    // fp32 training stores 4-byte activations; the logits are fp32 either way.
    auto f = estimate_activations(m, 8, 2, DType::FP32, false);
    EXPECT_EQ(f.total(), 2 * 17408 + 2 * 4 * 256 + 4 * 1600);
}

// Llama-2-70B's own block, counted item by item as the paper counts the GPT block (sec. 4.1), per
// token in 16-bit bytes: two norms' inputs 2h each (2 x 16384); attention: the projections' input
// 2h (16384), Q 2 x 8192, K and V 2 x 1024 each (8 KV heads of 128), o_proj's input 2 x 8192
// (53248 in all); SwiGLU: its input 2h (16384) and gate, up, activation, product 2 x 28672 each
// (229376). 331,776 bytes = 40.5 h, where the GPT block's 34 h (278,528) under-counted it.
TEST(Fit, Llama70BLayerAsItsBlockStoresIt) {
    auto m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/llama-2-70b.json");
    ASSERT_TRUE(m.ok());
    auto a = estimate_activations(m.value(), 4096, 1, DType::BF16, false);
    EXPECT_EQ(a.layers, 80);
    EXPECT_EQ(a.hidden, 8192);
    EXPECT_EQ(a.vocab, 32000);
    const int64_t per_token = 2 * 16384 + (16384 + 2 * 8192 + 2 * 2 * 1024 + 2 * 8192) + (16384 + 8 * 28672);
    EXPECT_EQ(per_token, 331776);
    EXPECT_EQ(a.per_layer_bytes, int64_t{4096} * per_token);   // 1.27 GiB per layer and sequence
    EXPECT_EQ(a.layers_bytes, int64_t{80} * 4096 * per_token);
    // Checkpointed: each layer's input 2 s b h, and one layer recomputed at a time.
    auto c = estimate_activations(m.value(), 4096, 1, DType::BF16, true);
    EXPECT_EQ(c.layers_bytes, int64_t{2} * 4096 * 8192 * 80 + int64_t{4096} * per_token);
}

// Mixtral-8x7B's MoE layer stores, per token, top-2 experts' worth: the block's input 2h, then
// for each of 2 experts a copy of it (2h) and its SwiGLU 8 x 14336, and the router's fp32 scores
// 4 x 8. With the norms (2 x 2h) and the GQA attention (2h + 2 x 4096 + 2 x 2 x 1024 + 2 x 4096).
TEST(Fit, MixtralLayerStoresTopKExperts) {
    auto m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/mixtral-8x7b.json");
    ASSERT_TRUE(m.ok());
    const int64_t h = 4096;
    const int64_t per_token = 2 * 2 * h + (2 * h + 2 * 4096 + 4 * 1024 + 2 * 4096) + (2 * h + 2 * (2 * h + 8 * 14336) + 4 * 8);
    auto a = estimate_activations(m.value(), 1024, 2, DType::BF16, false);
    EXPECT_EQ(a.per_layer_bytes, int64_t{1024} * 2 * per_token);
    EXPECT_EQ(a.layers_bytes, int64_t{32} * 1024 * 2 * per_token);
}

TEST(Fit, GpuMemoryBoundary) {
    Model m = test::param_list(kTwoLayers);
    auto a = estimate_activations(m, 8, 2, DType::BF16, false);
    const int64_t states = int64_t{10} << 30;
    // 10 GiB + 24832 + 3 GiB reserve = 13,958,668,544 bytes.
    auto yes = estimate_fit(states, a, 13.96);
    EXPECT_EQ(yes.total(), 13958668544);
    EXPECT_TRUE(yes.fits());
    EXPECT_EQ(yes.verdict(), "yes");
    auto no = estimate_fit(states, a, 13.958);
    EXPECT_FALSE(no.fits());
    EXPECT_NE(fit_sentence(no).find("does not fit"), std::string::npos);
    auto unknown = estimate_fit(states, a, 0);
    EXPECT_EQ(unknown.verdict(), "unknown");
    EXPECT_FALSE(unknown.fits());
}

TEST(Fit, ConfigSectionTurnsCheckpointingOn) {
    Model m = test::param_list(kTwoLayers);
    DsConfig plain = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}})");
    DsConfig ckpt = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
                                 "activation_checkpointing": {"partition_activations": false}})");
    EXPECT_FALSE(plain.activation_checkpointing);
    EXPECT_TRUE(ckpt.activation_checkpointing);
    FitOptions o{false, 8, 80, "gpu"};
    auto a = memory_report(m, plain, 4, {2}, std::nullopt, "", o);
    auto b = memory_report(m, ckpt, 4, {2}, std::nullopt, "", o);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->stages[0].activations.total(), 24832);
    EXPECT_EQ(b->stages[0].activations.total(), 17152);
    EXPECT_EQ(a->stages[0].fit.total(), a->stages[0].estimate.total() + 24832 + kFrameworkReserveBytes);
    EXPECT_TRUE(a->stages[0].fit.fits());
    // The flag does what the section does.
    o.activation_checkpointing = true;
    auto c = memory_report(m, plain, 4, {2}, std::nullopt, "", o);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->stages[0].activations.total(), 17152);
}

}  // namespace
}  // namespace zerosim
