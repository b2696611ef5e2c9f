// Element types on the wire. DeepSpeed trains in fp32, bf16 or fp16 and sends small ops in fp64,
// int64 and uint8; the runtime keeps state in fp32 and converts at the buffer boundary, so every
// conversion lives here (round-to-nearest-even, as torch's .to(bfloat16) / .half() do).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"

namespace zerorun {

using zerosim::DType;

// bf16: the top 16 bits of an fp32, rounded to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// IEEE binary16, round to nearest even, overflow to infinity, subnormals kept.
uint16_t float_to_fp16(float f);
float fp16_to_float(uint16_t h);

// Element i of a buffer of type t, as a double (exact for every type here except int64 > 2^53).
double load_element(const void* buf, DType t, int64_t i);
// Stores v (rounded as the type rounds) into element i.
void store_element(void* buf, DType t, int64_t i, double v);

// Bulk conversions between fp32 state and a buffer of type t.
void pack_floats(const float* src, void* dst, DType t, int64_t n);     // dst[i] = (t) src[i]
void unpack_floats(const void* src, float* dst, DType t, int64_t n);   // dst[i] = float(src[i])
void add_unpacked(const void* src, float* dst, DType t, int64_t n);    // dst[i] += float(src[i])

// The value v takes once stored in type t (for expected values computed in double/float).
double round_to(DType t, double v);

// Element i of rank r's input where only the check matters (zerorun bench; ops whose payload the
// executor does not model): small integers, so sums over any number of ranks up to ~50 are exact
// in every type (bf16 holds integers exactly up to 256) whatever order the backend adds them in,
// and the result check is an exact comparison, as nccl-tests' is for integer-valued data.
inline double check_pattern_value(DType t, int r, int64_t i) {
    int64_t v = (static_cast<int64_t>(r) * 7 + i * 3) % 11;
    return t == DType::UINT8 ? static_cast<double>(v % 5) : static_cast<double>(v - 5);
}
// One unit in the last place of type t at magnitude |v| (the check tolerance unit).
double ulp(DType t, double v);

}  // namespace zerorun
