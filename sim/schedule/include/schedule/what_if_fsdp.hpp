// What-if schedules of PyTorch FSDP (FullyShardedDataParallel, the wrapper API of PyTorch 2.0-2.5,
// torch/distributed/fsdp/_runtime_utils.py), built from DeepSpeed stage 3's schedule of the same
// model, config and world: its compute segments are kept, its collectives replaced by the ones FSDP
// sends. NOT DeepSpeed's schedule (of any release); docs/what-if.md states every rule and source.
//
// A unit (one FlatParameter) per transformer block, as transformer_auto_wrap_policy wraps them:
// the parameters whose name holds a numeric component ("model.layers.17.*") form unit
// "model.layers.17"; every other parameter (embeddings, final norm, head) belongs to the root unit.
// Each unit's flat parameter is padded to a multiple of the ranks it is sharded over
// (_post_backward_hook: chunk(world_size), numel_to_pad).
//
//  fsdp-full-shard (ShardingStrategy.FULL_SHARD): per unit an all_gather of its flat parameter before
//    its forward (_pre_forward_unshard) and again before its backward (_pre_backward_hook), freed
//    after each (_post_forward_reshard: not the root's; _should_free_in_backward); the next unit's
//    gather issued before the current unit's gradient computation (BackwardPrefetch.BACKWARD_PRE,
//    the default); a reduce_scatter of the unit's flat gradient after its backward
//    (_post_backward_hook, on the post-backward stream). limit_all_gathers (default True): a gather
//    waits on the host for the free of the unit two frees back (_FreeEventQueue, 2 in flight).
//    Per step and rank 3Ψ, as ZeRO-3.
//  fsdp-shard-grad-op (SHARD_GRAD_OP): parameters gathered once in forward and kept to backward (no
//    re-gather), freed after each unit's backward; gradients reduce_scattered per unit. 2Ψ.
//  hybrid-shard (HYBRID_SHARD): full-shard over each node's gpus_per_node consecutive ranks
//    (group FsdpShard), then the reduce_scattered gradient shard all_reduced across the nodes'
//    ranks of the same local rank (group FsdpReplica, default_hooks.allreduce_hook on
//    _inter_node_state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

enum class FsdpStrategy { FullShard, ShardGradOp, HybridShard };
// "fsdp-full-shard", "fsdp-shard-grad-op", "hybrid-shard"; nullopt for any other name.
std::optional<FsdpStrategy> fsdp_strategy(const std::string& what_if);

// One FSDP unit: its name ("" = the root), parameters (Schedule::params indices) and elements.
struct FsdpUnit {
    std::string name;
    std::vector<int> params;
    int64_t numel = 0;
};
// Unit 0 is the root; then the blocks in order of their first parameter.
std::vector<FsdpUnit> fsdp_units(const Schedule& s);

// Replaces stage 3's schedule `s` by FSDP's. Refuses stages other than 3, ZeRO++/MiCS schedules,
// and hybrid-shard without gpus_per_node (meta.variants) or with a world it does not divide.
// Returns the number of units.
Result<int> apply_fsdp_what_if(FsdpStrategy strategy, Schedule& s);

// Whether `s` is a schedule apply_fsdp_what_if made.
bool is_fsdp_schedule(const Schedule& s);

// Model-state bytes per rank of an FSDP schedule with Adam (docs/what-if.md "Memory"): each unit's
// shard (padded numel / shard ranks) in fp32 (4), its low-precision copy for the gather under mixed
// precision (2), its fp32 gradient shard (4) and Adam's two moments (8); plus the most unsharded
// parameters alive at once in the training dtype and one unsharded gradient of the largest unit.
int64_t fsdp_model_state_bytes(const Schedule& s);

}  // namespace zerosim
