// zerorun's block quantizer for ZeRO++ qwZ and qgZ (issue 17): symmetric, one fp32 scale per
// block of consecutive elements, on the host. Our own implementation of the scheme DeepSpeed
// v0.14.2 runs in CUDA (csrc/quantization, "Symmetric" type): only the wire format's sizes follow
// DeepSpeed (int8 data and one fp32 scale per group for qwZ, partition_parameters.py
// CUDAQuantizer.quantize; int4 two values a byte for qgZ, coalesced_collectives.py
// all_to_all_quant_reduce with swizzle_quant(..., 4, ...)), so the IR's sizes are what is sent.
//
// The scheme, for a block B of a vector x and q_max = 2^(bits-1) - 1 (127 for int8, 7 for int4):
//   scale_B = max_{i in B} |x_i| / q_max     (0 for an all-zero block)
//   q_i     = round(x_i / scale_B)           in [-q_max, q_max] (|x_i| <= max, so no clamping)
//   dq_i    = q_i * scale_B
// so |x_i - dq_i| <= scale_B / 2 (rounding to the nearest integer moves by at most 1/2 a step),
// up to the float arithmetic of the division and product (a few ulp of |x_i|, quant_error_bound).
#pragma once

#include <cstdint>

namespace zerorun {

// Blocks of a vector of n elements cut into `blocks` groups: block b is
// [b * block_size(n, blocks), min(n, (b + 1) * block_size(n, blocks))).
int64_t block_size(int64_t n, int64_t blocks);

// bits: 8 (one int8 per byte) or 4 (two per byte, element 2k in the low nibble of byte k, both
// two's complement). `data` holds quantized_bytes(n, bits) bytes, `scales` `blocks` floats.
int64_t quantized_bytes(int64_t n, int bits);
void quantize_blocks(const float* x, int64_t n, int64_t blocks, int bits, uint8_t* data, float* scales);
// Element i of the quantized vector, dequantized.
float dequantized(const uint8_t* data, const float* scales, int64_t n, int64_t blocks, int bits, int64_t i);
void dequantize_blocks(const uint8_t* data, const float* scales, int64_t n, int64_t blocks, int bits, float* out);

// The most |x_i - dq_i| may be for a value of magnitude up to `magnitude` in a block of this
// scale: scale / 2 plus the float rounding of x / scale and q * scale.
double quant_error_bound(double scale, double magnitude);

}  // namespace zerorun
