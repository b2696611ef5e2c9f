// NCCL's constants for collectives across nodes, as its tuner has them (src/graph/tuning.cc,
// ncclTunerConstantsDefaults in v2.28.9-1; the per-release latencies where they changed). Private
// to the cost model; the single-node constants are in nccl_constants.hpp.
#pragma once

#include "nccl_constants.hpp"
#include "timing/nccl_version.hpp"

namespace zerosim::nccl {

// GPU generation index of NCCL's tables: Volta, Ampere, Hopper, Blackwell (compCapIndex).
inline int generation_index(int compute_capability) {
    return compute_capability >= 100 ? 3 : compute_capability >= 90 ? 2 : compute_capability >= 80 ? 1 : 0;
}
// Node-count index: one node, two, more (index2 = nNodes <= 2 ? nNodes - 1 : 2).
inline int node_index(long long nodes) { return nodes <= 2 ? static_cast<int>(nodes - 1) : 2; }

// llMaxBws, the multi-node rows (indexed by CPU vendor there; an Intel host assumed): LL's bus
// bandwidth ceiling, GB/s, on two nodes and on more.
constexpr double kLLMaxBusTwoNodes = 39.0, kLLMaxBusMoreNodes = 20.4;
// Per-channel bus bandwidth ceilings, GB/s [generation][nodes: 1, 2, more].
constexpr double kPerChMaxRingLL128[4][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
constexpr double kPerChMaxTreeLL128[4][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNVLSTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}};

// getNetOverhead: a multi-node ring step costs at least the network post overhead (1 µs on an
// Intel host), x3 for Simple.
constexpr double kNetOverheadUs = 1.0;
constexpr double kNetOverheadSimpleFactor = 3.0;

// Simple-protocol latencies (µs) of the algorithms NCCL has across nodes, by release: one step
// over NVLink and one across the network (hwLat[NVLINK] and hwLat[NET]); the current release's
// are the table's (nccl_constants.hpp), older releases' figures where they differ. Base latency
// (baseLat) 0 for CollNet and NVLSTree, 8.0 for PAT.
struct StepLatency {
    double nvlink, net;
};
inline StepLatency table_step_latency(NcclAlgoIndex a) {
    return {kHwLatencyUs[kHwNvlink][a][kProtoCount - 1], kHwLatencyUs[kHwNet][a][kProtoCount - 1]};
}
inline StepLatency collnet_direct_latency(const NcclVersion& v) {
    return v.at_least(2, 21) ? table_step_latency(kAlgoCollNetDirect) : StepLatency{8.0, 10.7};
}
inline StepLatency collnet_chain_latency(const NcclVersion& v) {
    return v.at_least(2, 21) ? table_step_latency(kAlgoCollNetChain) : StepLatency{4.75, 14};
}
inline StepLatency nvls_tree_latency(const NcclVersion& v) {
    return v.at_least(2, 28) ? table_step_latency(kAlgoNvlsTree) : v.at_least(2, 21) ? StepLatency{25, 14} : StepLatency{0, 19};
}
// What an NVLSTree step costs on the hardware: v2.28's figures (25 µs through the switch, 20.9
// across the network). Releases before v2.21 rated the switch step 0, which the p5 table (10:
// 172-178 µs for 8 B on 2 nodes) contradicts; a release's own figures are what its tuner weighs.
inline StepLatency nvls_tree_step_on_hardware() { return table_step_latency(kAlgoNvlsTree); }
// PAT's base latency and network step (Simple).
inline double pat_base_us() { return kBaseLatencyUs[kAlgoPat][kProtoCount - 1]; }
inline double pat_net_us() { return kHwLatencyUs[kHwNet][kAlgoPat][kProtoCount - 1]; }
// PAT's log-latency divisor and its per-rank linear term, µs (tuning.cc, NCCL_ALGO_PAT).
constexpr double kPatLogDivisor = 3.5, kPatPerRankUs = 2.8;
// PAT runs at 0.75 of the ring's bandwidth (tuning.cc: "busBw *= .75").
constexpr double kPatBandwidthFactor = 0.75;
// CollNet Direct on Hopper and later: x0.85 (tuning.cc).
constexpr double kCollNetDirectHopperFactor = 0.85;
// CollNet Direct's arity serialisation: 0.4 µs per local rank.
constexpr double kCollNetDirectArityUs = 0.4;
// Tree Simple's per-step latency in v2.21 (28 µs on every link; 4.0 NVLink / 14 network before
// and after).
constexpr double kTreeSimpleStepV221Us = 28.0;

// all_to_all across nodes: the share of a rank's NIC bandwidth NCCL's point-to-point channels
// reach with every peer at once. Fitted on table 26 (B200 NDR, 2 nodes, nccl-tests alltoall_perf,
// from 1 MiB, with b200-ndr's NIC efficiency 0.96: 0.53 at the 0.85 it had before, the same
// bytes per second); see docs/collectives.md §5.
constexpr double kAllToAllNetShare = 0.47;
// A tree Simple chunk: one step of the Simple buffer, NCCL_BUFFSIZE (4 MiB, init.cc
// DEFAULT_BUFFSIZE) over NCCL_STEPS (8, device.h); tree runs one step per chunk
// (enqueue.cc calcCollChunking: chunkSteps = 1 unless ring Simple).
constexpr double kTreeSimpleChunkBytes = 4.0 * 1024 * 1024 / 8;

}  // namespace zerosim::nccl
