// `zerosim explain`: why each kind of op is in the schedule (the rule, the config keys and their
// values against DeepSpeed's defaults, what changing them does), the classic "I set reduce_scatter
// and see all_reduce" answer, and per stage the ZeRO paper's volume beside what DeepSpeed sends.
// Counts are per step (the last, steady one; another step is named where it differs), every byte
// total is what each rank sends and receives on a ring (the paper's convention for 2Ψ and 3Ψ),
// and the flush rules say how the gradients fill reduce_bucket_size buckets.
#pragma once

#include <string>

#include "inputs/ds_config.hpp"
#include "schedule/ir.hpp"
#include "inputs/model.hpp"

namespace zerosim {

// Bytes one rank puts on the wire for the collectives of `step` (ring accounting, as the ZeRO
// paper counts: all_reduce 2(n-1)/n S, reduce_scatter (n-1)/n S, all_gather (n-1) x shard).
// zero_only: ZeRO's own groups only (data parallel and expert data), what the paper's 2Ψ/3Ψ count
// in a 3D layout.
double wire_bytes_per_rank(const Schedule& s, int step, bool zero_only = false);
// One op's share of it: the bytes each rank sends (and, on a ring, receives) for `op` on the
// `ranks` of its process group (ScheduleMeta::group_size; the world for GroupKind::Dp).
double op_wire_bytes(const Op& op, int64_t ranks);

std::string explain_schedule(const Model& model, const DsConfig& cfg, const Schedule& schedule);
// A 3D schedule (pipe, tensor, sequence, expert): what each parallel dimension adds on its rank, by
// process group, beside ZeRO's own (explain_3d.cpp); "" without a 3D layout. `whole` is the model
// as given, before the rank's share was cut.
std::string explain_layout(const Model& whole, const DsConfig& cfg, const Schedule& schedule);

}  // namespace zerosim
