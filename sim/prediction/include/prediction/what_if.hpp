// What-if schedules: DeepSpeed's schedule changed the way a proposal would change it, to price the
// alternative before anyone writes it. Never DeepSpeed v0.14.2's (or any release's) schedule; the
// CLI says so on stderr and in the step summary.
//
// reduce-scatter (DeepSpeed #6463, PR #7440): stages 1 and 2 send each flushed gradient bucket as
// one reduce_scatter_tensor of the owners' slices instead of the all_reduce of the whole bucket
// (stage_1_and_2.py average_tensor's multi-rank bucket all_reduce). A reduce-scatter needs equal
// per-rank chunks; the bucket is taken padded to a multiple of the ranks (the slices of a bucket
// are uneven, so the real change pads more or calls it per chunk: a lower bound on its cost).
// Each rank then sends (n-1)/n of the bucket instead of 2(n-1)/n: with the all_gather of the
// updated partitions, the ZeRO paper's 2Ψ.
#pragma once

#include <string>

#include "core/error.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

// "reduce-scatter"; others named by issue 19 (fsdp-full-shard, fsdp-shard-grad-op, hybrid-shard)
// are refused as not modelled yet. Returns how many ops it changed.
Result<int> apply_what_if(const std::string& name, Schedule& s);

}  // namespace zerosim
