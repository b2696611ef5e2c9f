// The 16-bit conversions every bf16/fp16 buffer goes through (no MPI needed).
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

#include "backends/dtype.hpp"
#include "executor/loss.hpp"

using namespace zerorun;

TEST(Dtypes, Bf16RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
    // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties go to the even (1.0).
    EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
    // 1 + 3*2^-8 is half way between 1+2^-7 and 1+2^-6: even is 1+2^-6.
    EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
    EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Dtypes, Fp16MatchesIeeeHalf) {
    EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
    EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(float_to_fp16(70000.0f), 0x7c00);                 // overflow to infinity
    EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
    EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);    // tie to even (0)
    EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
    // Every finite half survives a round trip through float.
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if ((h & 0x7c00) == 0x7c00) continue;
        ASSERT_EQ(float_to_fp16(fp16_to_float(static_cast<uint16_t>(h))), h) << h;
    }
}

TEST(Dtypes, RoundToAndUlp) {
    EXPECT_EQ(round_to(DType::BF16, 1.0 + 1e-4), 1.0);
    EXPECT_EQ(ulp(DType::FP32, 1.0), std::ldexp(1.0, -23));
    EXPECT_EQ(ulp(DType::BF16, 3.0), std::ldexp(1.0, -6));
}

TEST(Loss, TargetsDependOnEveryCoordinate) {
    float t = target(1, 0, 0, 0, 0, 0);
    EXPECT_NE(t, target(1, 1, 0, 0, 0, 0));
    EXPECT_NE(t, target(1, 0, 1, 0, 0, 0));
    EXPECT_NE(t, target(1, 0, 0, 1, 0, 0));
    EXPECT_NE(t, target(1, 0, 0, 0, 1, 0));
    EXPECT_NE(t, target(1, 0, 0, 0, 0, 1));
    EXPECT_NE(t, target(2, 0, 0, 0, 0, 0));
    EXPECT_GE(t, -1.0f);
    EXPECT_LT(t, 1.0f);
}

TEST(Loss, AdamFirstStepMovesByLearningRate) {
    // Adam's first update is lr * g / (|g| + eps'): a step of lr against the gradient's sign.
    float w[2] = {1.0f, 1.0f}, m[2] = {0, 0}, v[2] = {0, 0}, g[2] = {0.5f, -2.0f};
    AdamParams a;
    a.lr = 0.01f;
    adam_update(w, m, v, g, 2, 1, a);
    EXPECT_NEAR(w[0], 0.99f, 1e-6);
    EXPECT_NEAR(w[1], 1.01f, 1e-6);
}
