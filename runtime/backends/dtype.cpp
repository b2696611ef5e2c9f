#include "backends/dtype.hpp"

#include <cmath>
#include <limits>

namespace zerorun {

uint16_t float_to_fp16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);          // NaN
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);         // >= 65520: inf
    if (absx < 0x38800000u) {                                                       // subnormal or zero
        // In units of the fp16 subnormal step 2^-24 the value is exact in a double; nearbyint
        // rounds to nearest even (default mode), and 1024 units encodes the smallest normal.
        float a;
        std::memcpy(&a, &absx, 4);
        double units = static_cast<double>(a) * 16777216.0;  // a / 2^-24
        double rounded = std::nearbyint(units);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
    }
    uint32_t exp = ((absx >> 23) - 127 + 15);
    uint32_t mant = absx & 0x7fffffu;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carries into the exponent correctly
    return static_cast<uint16_t>(sign | h);
}

float fp16_to_float(uint16_t h) {
    uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    float f;
    if (exp == 0) {
        f = std::ldexp(static_cast<float>(mant), -24);
        return sign ? -f : f;
    }
    uint32_t u;
    if (exp == 31)
        u = sign | 0x7f800000u | (mant << 13);
    else
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    std::memcpy(&f, &u, 4);
    return f;
}

double load_element(const void* buf, DType t, int64_t i) {
    switch (t) {
        case DType::FP32: return static_cast<const float*>(buf)[i];
        case DType::FP64: return static_cast<const double*>(buf)[i];
        case DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(buf)[i]);
        case DType::FP16: return fp16_to_float(static_cast<const uint16_t*>(buf)[i]);
        case DType::INT64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
        case DType::UINT8: return static_cast<const uint8_t*>(buf)[i];
    }
    return 0.0;
}

void store_element(void* buf, DType t, int64_t i, double v) {
    switch (t) {
        case DType::FP32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
        case DType::FP64: static_cast<double*>(buf)[i] = v; break;
        case DType::BF16: static_cast<uint16_t*>(buf)[i] = float_to_bf16(static_cast<float>(v)); break;
        case DType::FP16: static_cast<uint16_t*>(buf)[i] = float_to_fp16(static_cast<float>(v)); break;
        case DType::INT64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
        case DType::UINT8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    }
}

void pack_floats(const float* src, void* dst, DType t, int64_t n) {
    if (t == DType::FP32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else if (t == DType::BF16) {
        auto* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
    } else if (t == DType::FP16) {
        auto* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = float_to_fp16(src[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) store_element(dst, t, i, src[i]);
    }
}

void unpack_floats(const void* src, float* dst, DType t, int64_t n) {
    if (t == DType::FP32) {
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    } else if (t == DType::BF16) {
        auto* s = static_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load_element(src, t, i));
    }
}

void add_unpacked(const void* src, float* dst, DType t, int64_t n) {
    if (t == DType::FP32) {
        auto* s = static_cast<const float*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] += s[i];
    } else {
        for (int64_t i = 0; i < n; ++i) dst[i] += static_cast<float>(load_element(src, t, i));
    }
}

double round_to(DType t, double v) {
    switch (t) {
        case DType::FP32: return static_cast<float>(v);
        case DType::FP64: return v;
        case DType::BF16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
        case DType::FP16: return fp16_to_float(float_to_fp16(static_cast<float>(v)));
        case DType::INT64: return static_cast<double>(static_cast<int64_t>(v));
        case DType::UINT8: return static_cast<double>(static_cast<uint8_t>(v));
    }
    return v;
}

double ulp(DType t, double v) {
    int bits = 0;  // stored mantissa bits
    switch (t) {
        case DType::FP32: bits = 23; break;
        case DType::FP64: bits = 52; break;
        case DType::BF16: bits = 7; break;
        case DType::FP16: bits = 10; break;
        case DType::INT64:
        case DType::UINT8: return 1.0;
    }
    double a = std::fabs(v);
    if (a < std::numeric_limits<double>::min()) return std::ldexp(1.0, -bits - 14);
    int e;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    return std::ldexp(1.0, e - 1 - bits);
}

}  // namespace zerorun
