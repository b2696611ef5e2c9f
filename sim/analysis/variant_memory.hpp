// ZeRO++ / MiCS memory items for estimate_memory (private to sim/analysis).
#pragma once

#include "analysis/memory.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

// hpZ's secondary partitions, qwZ's and qgZ's quantized buffers (nothing without a variant).
void add_variant_memory(MemoryEstimate& e, const Model& m, const DsConfig& cfg, const Schedule& s);

// ZeRO-Offload (zero-variants.md section 5): the states DeepSpeed keeps in host memory move to the
// category "host", which MemoryEstimate::total() (device memory per rank) leaves out.
//  - offload_optimizer, stages 1-3: the fp32 master partition, Adam m and v and the fp32 gradient
//    partition the CPU optimizer reads (stage_1_and_2.py / stage3.py with cpu_offload: single
//    partitions of fp32 groups and their gradients on the CPU);
//  - offload_param, stage 3: the parameter partitions (partition_parameters.py keeps ds_tensor
//    on the CPU and copies it to the device for each gather).
void move_offloaded_to_host(MemoryEstimate& e, const DsConfig& cfg);

}  // namespace zerosim
