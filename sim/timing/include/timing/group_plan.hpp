// The plan of one schedule op on its process group (schedule/ir.hpp Op::group): the whole world
// for GroupKind::Dp, else the group of rank 0 in meta.groups, on the nodes and links it spans.
#pragma once

#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim {

CollectivePlan plan_for_group(const Topology& t, const Op& op, const ScheduleMeta& meta);

// The quantization kernels around a qwZ/qgZ data op, run on the op's stream before it, as
// memory-bound kernels: bytes read and written / (mem_bandwidth_gbs x mem_efficiency). 0 for others.
//  - qwZ gather of N int8 elements on a group of k: quantize (read N model-dtype values, write N
//    bytes) and dequantize the gathered k·N bytes into fp16 (write 2kN): N(b + 1) + 3kN bytes.
//  - qgZ intra exchange of m/2 bytes: swizzle_quant reads m comm-dtype values, writes m/2.
//  - qgZ inter exchange of m/(2L) bytes: quantized_reduction reads m/2, writes m/(2L); the final
//    dequantize and average read those and write m/L fp16 values: about (L + 6)·m/(2L) bytes.
double quantization_seconds(const Topology& t, const Op& op, const ScheduleMeta& meta);

}  // namespace zerosim
