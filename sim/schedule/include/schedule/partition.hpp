// How ZeRO cuts parameters into per-rank partitions. One place for the layout rules:
//  - stages 1/2 (and the bf16 optimizer): each parameter group is flattened (optionally in
//    round-robin order), padded to a multiple of 2*world elements and cut into `world` equal
//    partitions; a parameter may straddle partition boundaries.
//  - stage 3: each parameter on its own, ceil(numel / world) elements per rank.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "inputs/model.hpp"

namespace zerosim {

// DeepSpeed's nccl_start_alignment_factor: partitions start on 2-element boundaries.
constexpr int64_t kPartitionAlignment = 2;

// A piece of one parameter's gradient owned by one rank.
struct GradSlice {
    int partition;           // owning rank
    int64_t offset;          // first element within the parameter
    int64_t numel;
};

struct FlatGroupLayout {
    int group = 0;
    std::vector<int> order;               // parameters in flattened order
    int64_t numel = 0;                    // real elements
    int64_t padded_numel = 0;             // after padding to a multiple of 2*world
    int64_t partition_size = 0;           // padded_numel / world
    std::unordered_map<int, int64_t> flat_offset;  // parameter -> first element in the flat buffer

    // The slices of a parameter, ordered by offset (DeepSpeed's param_to_partition_ids with
    // grad_start_offset).
    std::vector<GradSlice> slices(const Model& m, int param) const;
    // Real (unpadded) elements owned by a rank.
    int64_t owned_real_elements(int rank) const;
};

// Elements per rank of a flattened group of `numel` real elements: padded to a multiple of
// kPartitionAlignment * world, cut into `world` equal partitions.
int64_t flat_partition_size(int64_t numel, int64_t world);

// `round_robin`: DeepSpeed's round_robin_gradients reordering (position i goes to list i mod
// world; lists concatenated in order).
FlatGroupLayout flat_group_layout(const Model& m, int group, int64_t world, bool round_robin);

// Stage 3: elements of a parameter held by each rank.
inline int64_t stage3_partition_numel(int64_t numel, int64_t world) { return (numel + world - 1) / world; }

}  // namespace zerosim
