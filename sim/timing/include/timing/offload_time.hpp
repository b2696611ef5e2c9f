// ZeRO-Offload's time (issue 17; ../shared/docs/zero-variants.md section 5): what DeepSpeed v0.14.2
// moves over PCIe and computes on the host when `offload_optimizer` / `offload_param` are on.
#pragma once

#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// The time of `op` with offload, given its device time without (`device_s`):
//  - the optimizer step with offload_optimizer: DeepSpeed's CPU Adam on the host instead of the
//    GPU (stage_1_and_2.py / stage3.py step with DeepSpeedCPUAdam): the state traffic (op.mem_bytes,
//    28 bytes an element) at host.cpu_adam_gbs, plus the PCIe copies around it: the fp32 gradient
//    partition down (stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu / stage3.py
//    partition_grads, 4 bytes an element) and the updated partition up in the model dtype
//    (the fp16/bf16 copy the next gathers read), at host.pcie_gbps. Both are put at the step,
//    where they sit on the critical path; DeepSpeed starts the gradient copies during backward
//    (overlap_comm), so this is the pessimistic end.
//  - a fetch-path gather (caller allgather_fn) with offload_param: the partition copied host to
//    device before the gather (partition_parameters.py all_gather_coalesced, `.to(device)`):
//    the op's input bytes at host.pcie_gbps, on the op's stream.
// A figure of 0 (absent from the topology) costs nothing. Every other op: device_s.
double offload_seconds(const Topology& t, const Op& op, const ScheduleMeta& meta, double device_s);

}  // namespace zerosim
