// What-if schedules: DeepSpeed's schedule changed the way a proposal would change it, or replaced by
// PyTorch FSDP's (schedule/what_if_fsdp.hpp), to price the alternative before anyone writes it. Never DeepSpeed v0.14.2's (or any release's) schedule; the
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

// The what-ifs --what-if takes, for help texts and errors.
inline constexpr const char* kWhatIfNames = "reduce-scatter, fsdp-full-shard, fsdp-shard-grad-op or hybrid-shard";

// "reduce-scatter" (stages 1/2; returns how many ops it changed) or one of FSDP's
// (schedule/what_if_fsdp.hpp: stage 3's schedule replaced; returns the number of units).
Result<int> apply_what_if(const std::string& name, Schedule& s);

// Whether the what-if changes a schedule of this ZeRO stage (sweep applies it to those points only):
// reduce-scatter stages 1 and 2, the FSDP ones stage 3.
bool what_if_applies(const std::string& name, int stage);

// The one line the CLI prints on stderr ("zerosim: note: " before it): NOT DeepSpeed's schedule,
// and what changed (`changed`: apply_what_if's count).
std::string what_if_note(const std::string& name, const Schedule& s, int changed);

}  // namespace zerosim
