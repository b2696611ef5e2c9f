// The block quantizer (executor/quantize.hpp has the scheme and its error bound).
#include "executor/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zerorun {

int64_t block_size(int64_t n, int64_t blocks) { return blocks <= 0 ? n : (n + blocks - 1) / blocks; }

int64_t quantized_bytes(int64_t n, int bits) { return bits == 4 ? (n + 1) / 2 : n; }

namespace {

int qmax(int bits) { return (1 << (bits - 1)) - 1; }

void put(uint8_t* data, int bits, int64_t i, int q) {
    if (bits == 8) {
        data[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
        return;
    }
    uint8_t nib = static_cast<uint8_t>(q) & 0x0F;
    uint8_t& byte = data[i / 2];
    byte = (i % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0) | nib) : static_cast<uint8_t>((byte & 0x0F) | (nib << 4));
}

int get(const uint8_t* data, int bits, int64_t i) {
    if (bits == 8) return static_cast<int8_t>(data[i]);
    int nib = (i % 2 == 0) ? (data[i / 2] & 0x0F) : (data[i / 2] >> 4);
    return nib >= 8 ? nib - 16 : nib;   // two's complement nibble
}

}  // namespace

void quantize_blocks(const float* x, int64_t n, int64_t blocks, int bits, uint8_t* data, float* scales) {
    const int64_t bs = block_size(n, blocks);
    const int qm = qmax(bits);
    if (bits == 4) std::fill(data, data + quantized_bytes(n, bits), uint8_t{0});
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t lo = std::min(n, b * bs), hi = std::min(n, lo + bs);
        float mx = 0.0f;
        for (int64_t i = lo; i < hi; ++i) mx = std::max(mx, std::fabs(x[i]));
        const float scale = mx / static_cast<float>(qm);
        scales[b] = scale;
        for (int64_t i = lo; i < hi; ++i) {
            int q = scale > 0.0f ? static_cast<int>(std::lrint(x[i] / scale)) : 0;
            put(data, bits, i, std::clamp(q, -qm, qm));   // |x| <= mx: the clamp only guards rounding
        }
    }
}

float dequantized(const uint8_t* data, const float* scales, int64_t n, int64_t blocks, int bits, int64_t i) {
    return static_cast<float>(get(data, bits, i)) * scales[i / block_size(n, blocks)];
}

void dequantize_blocks(const uint8_t* data, const float* scales, int64_t n, int64_t blocks, int bits, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = dequantized(data, scales, n, blocks, bits, i);
}

double quant_error_bound(double scale, double magnitude) {
    // x / scale and q * scale each round once in fp32 (relative 2^-24), and the clamp never
    // moves a value by more than that: 4 ulp of the magnitude covers both.
    return scale / 2.0 + 4.0 * magnitude * std::numeric_limits<float>::epsilon();
}

}  // namespace zerorun
