// The block quantizer of qwZ/qgZ (runtime/executor/quantize.hpp), without MPI. The bound under
// test, derived on paper: with scale = max|x| / q_max over a block (q_max = 127 for int8, 7 for
// int4) and q = round(x / scale), |x - q * scale| <= scale / 2, since rounding to the nearest
// integer moves x / scale by at most 1/2; fp32 adds a few ulp (quant_error_bound).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "executor/quantize.hpp"

namespace {

struct Quantized {
    std::vector<uint8_t> data;
    std::vector<float> scales, back;
};

Quantized round_trip(const std::vector<float>& x, int64_t blocks, int bits) {
    Quantized q;
    const int64_t n = static_cast<int64_t>(x.size());
    q.data.assign(static_cast<size_t>(zerorun::quantized_bytes(n, bits)), 0);
    q.scales.assign(static_cast<size_t>(blocks), -1.0f);
    q.back.assign(x.size(), 0.0f);
    zerorun::quantize_blocks(x.data(), n, blocks, bits, q.data.data(), q.scales.data());
    zerorun::dequantize_blocks(q.data.data(), q.scales.data(), n, blocks, bits, q.back.data());
    return q;
}

}  // namespace

// Worked by hand (block maxima 127 and 7, so the scale is exactly 1 and no float rounding blurs
// the halves). int8, {127, -63.5, 31.75, 0}: -63.5 rounds to -64 (half to even), 31.75 to 32.
// int4, {7, -3.5, 1.75, 0}: -3.5 -> -4, 1.75 -> 2; nibbles low first: byte 0 = 7 | (-4 & 15) << 4
// = 0xC7, byte 1 = 2 | 0 << 4 = 0x02.
TEST(BlockQuantizer, HandWorkedInt8AndInt4) {
    Quantized a = round_trip({127.0f, -63.5f, 31.75f, 0.0f}, 1, 8);
    EXPECT_EQ(a.scales[0], 1.0f);
    EXPECT_EQ(static_cast<int8_t>(a.data[0]), 127);
    EXPECT_EQ(static_cast<int8_t>(a.data[1]), -64);
    EXPECT_EQ(static_cast<int8_t>(a.data[2]), 32);
    EXPECT_EQ(static_cast<int8_t>(a.data[3]), 0);
    Quantized b = round_trip({7.0f, -3.5f, 1.75f, 0.0f}, 1, 4);
    EXPECT_EQ(b.scales[0], 1.0f);
    ASSERT_EQ(b.data.size(), 2u);
    EXPECT_EQ(b.data[0], 0xC7);
    EXPECT_EQ(b.data[1], 0x02);
    EXPECT_EQ(b.back[1], -4.0f);
    EXPECT_EQ(b.back[2], 2.0f);
}

// Blocks are independent (a block's scale is its own maximum) and an all-zero block stays zero.
TEST(BlockQuantizer, BlocksHaveTheirOwnScale) {
    std::vector<float> x(24, 0.0f);
    for (int i = 0; i < 8; ++i) x[i] = 100.0f * (i + 1);
    for (int i = 16; i < 24; ++i) x[i] = 0.001f * (i - 15);
    Quantized q = round_trip(x, 3, 8);
    EXPECT_FLOAT_EQ(q.scales[0], 800.0f / 127.0f);
    EXPECT_EQ(q.scales[1], 0.0f);
    EXPECT_FLOAT_EQ(q.scales[2], 0.008f / 127.0f);
    for (int i = 8; i < 16; ++i) EXPECT_EQ(q.back[i], 0.0f);
    for (int i = 16; i < 24; ++i) EXPECT_NEAR(q.back[i], x[i], 0.008 / 127 / 2 * 1.0001);
    EXPECT_EQ(zerorun::block_size(24, 3), 8);
    EXPECT_EQ(zerorun::block_size(25, 3), 9);   // the last block shorter
}

// Random data of several magnitudes, DeepSpeed's block counts (qwZ: ceil(N/8000) and up, e.g.
// g(16000) = 2; qgZ: G = max(rows, cols, world)), both widths: every element within scale/2,
// every scale = block max / q_max, and the bound nearly reached (rounding, not truncation,
// which would reach a whole step and fail the bound).
TEST(BlockQuantizer, RandomDataWithinHalfAStep) {
    std::mt19937 rng(17);
    struct Case {
        int64_t n, blocks;
        int bits;
        double spread;
    };
    for (const Case& c : {Case{16000, 2, 8, 1.0}, Case{4160, 1, 8, 1e-3}, Case{40256, 8, 8, 50.0}, Case{64 * 32, 64, 4, 1.0},
                          Case{1000 * 64, 1000, 4, 0.02}, Case{250 * 64, 250, 4, 3.0}}) {
        std::normal_distribution<float> d(0.0f, static_cast<float>(c.spread));
        std::vector<float> x(static_cast<size_t>(c.n));
        for (auto& v : x) v = d(rng);
        Quantized q = round_trip(x, c.blocks, c.bits);
        const int64_t bs = zerorun::block_size(c.n, c.blocks);
        const double qmax = c.bits == 8 ? 127.0 : 7.0;
        double worst = 0.0;   // largest error as a fraction of its block's step
        for (int64_t b = 0; b < c.blocks; ++b) {
            double mx = 0.0;
            for (int64_t i = b * bs; i < std::min(c.n, (b + 1) * bs); ++i) mx = std::max(mx, std::fabs(static_cast<double>(x[i])));
            ASSERT_FLOAT_EQ(q.scales[b], static_cast<float>(mx / qmax)) << "block " << b;
            for (int64_t i = b * bs; i < std::min(c.n, (b + 1) * bs); ++i) {
                const double err = std::fabs(static_cast<double>(x[i]) - q.back[i]);
                ASSERT_LE(err, zerorun::quant_error_bound(q.scales[b], std::fabs(x[i]))) << "n " << c.n << " element " << i;
                worst = std::max(worst, err / q.scales[b]);
            }
        }
        EXPECT_GT(worst, 0.45) << "n " << c.n;
        EXPECT_LE(worst, 0.5 + 1e-5) << "n " << c.n;
    }
}
