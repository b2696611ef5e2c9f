// NVLS: the all_reduce that NVSwitch reduces itself (NCCL's NVLS algorithm, Hopper and later).
#include "nccl_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

// As NCCL's NVLS all_reduce moves the data: rank r owns 1/n of the buffer; its multimem
// load-reduce makes the switch read that share from every GPU, so each GPU's whole buffer goes up
// its link once (S) and r's reduced share comes back (S/n); r's multimem store sends the share up
// once (S/n) and the switch writes it to every GPU (S arriving per GPU). S(1 + 1/n) each way, on
// the NVLink bandwidth NCCL sees, at NCCL's NVLS efficiency (0.85 on Hopper, from the topology).
// The 1/n is why NVLS gains more with more GPUs (reference Table C1: algbw 259 GB/s on 5 H200s,
// 270 on 8), where NCCL's own conversion (bus x n / 2(n-1), as for a ring) has it shrink.
double nvls_estimate(const Topology& t, const RankShare& r, CollectivePlan& plan) {
    plan.intra_bytes = r.buffer_bytes * (1.0 + 1.0 / static_cast<double>(r.ranks));
    plan.intra_rate = r.cap.intra * t.nvls_efficiency;
    return hw_latency_table_us(kHwNvlink, Algorithm::NVLS, Protocol::Simple);
}

}  // namespace zerosim::nccl
