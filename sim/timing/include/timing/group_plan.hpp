// The plan of one schedule op on its process group (schedule/ir.hpp Op::group): the whole world
// for GroupKind::Dp, else the group of rank 0 in meta.groups, on the nodes and links it spans. In a
// 3D layout (meta.layout.is_3d()) every group is the schedule's own rank's, data-parallel included:
// its members are strided over the world (DeepSpeed's grid puts tensor ranks innermost), so the
// nodes they span come from the mesh, never from the group's size.
#pragma once

#include <vector>

#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim {

CollectivePlan plan_for_group(const Topology& t, const Op& op, const ScheduleMeta& meta);

// The members of meta.rank's group of `kind` in a 3D layout (the mesh's group_of; ZeRO's group is
// the data group, or sequence x data under Ulysses); empty outside a 3D layout or for a kind the
// layout does not form.
std::vector<int> own_group_members(const ScheduleMeta& meta, GroupKind kind);

// The op on a group of these members (ranks; placed on nodes by schedule/mesh.hpp): a collective, or
// a Send/Recv as NCCL runs one, a two-rank broadcast from the sender (one step, the pair's link).
CollectivePlan plan_for_members(const Topology& t, const Op& op, const std::vector<int>& members);

// The quantization kernels around a qwZ/qgZ data op, run on the op's stream before it, as
// memory-bound kernels: bytes read and written / (mem_bandwidth_gbs x mem_efficiency). 0 for others.
//  - qwZ gather of N int8 elements on a group of k: quantize (read N model-dtype values, write N
//    bytes) and dequantize the gathered k·N bytes into fp16 (write 2kN): N(b + 1) + 3kN bytes.
//  - qgZ intra exchange of m/2 bytes: swizzle_quant reads m comm-dtype values, writes m/2.
//  - qgZ inter exchange of m/(2L) bytes: quantized_reduction reads m/2, writes m/(2L); the final
//    dequantize and average read those and write m/L fp16 values: about (L + 6)·m/(2L) bytes.
double quantization_seconds(const Topology& t, const Op& op, const ScheduleMeta& meta);

}  // namespace zerosim
