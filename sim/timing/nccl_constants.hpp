// NCCL's constants, in one table, as its tuner uses them (src/graph/tuning.cc unless an entry says
// otherwise; NCCL 2.18 to 2.28; shared docs/collectives.md). Private to the cost model.
#pragma once

#include "timing/collectives.hpp"

namespace zerosim::nccl {

// Latencies in µs, indexed by protocol: LL, LL128, Simple.
struct LatencyRow {
    double v[3];
};
inline int proto_index(Protocol p) { return p == Protocol::LL ? 0 : p == Protocol::LL128 ? 1 : 2; }

// baseLat: a collective's fixed start-up cost, by algorithm.
constexpr LatencyRow kBaseRing{{6.6, 14.0, 8.4}};
constexpr LatencyRow kBaseTree{{6.8, 14.0, 8.4}};
// hwLat[NCCL_HW_NVLINK]: one step over NVLink / NVSwitch.
constexpr LatencyRow kNvlinkRing{{0.6, 1.9, 3.4}};
constexpr LatencyRow kNvlinkTree{{0.6, 1.25, 4.0}};
// hwLat[NCCL_HW_PCI]: one step over PCIe.
constexpr LatencyRow kPcieRing{{1.0, 2.5, 5.7}};
constexpr LatencyRow kPcieTree{{1.0, 1.9, 4.0}};
// hwLat[NCCL_HW_NET]: one step across the network (the NIC's own latency comes on top).
constexpr LatencyRow kNetRing{{2.7, 4.0, 14.0}};
constexpr LatencyRow kNetTree{{5.0, 8.5, 14.0}};
// hwLat[NCCL_HW_NVLINK][NCCL_ALGO_NVLS][Simple]: NVLS's one step through the switch.
constexpr double kNvlsLatencyNvlinkUs = 25.0;

// The ratio of payload to wire bytes per protocol: LL sends 8 bytes of data per 16 (a flag with
// every word), LL128 120 per 128 (a flag per 128-byte line), rated 0.92; Simple all of it.
inline double protocol_cap(Protocol p) { return p == Protocol::LL ? 0.5 : p == Protocol::LL128 ? 0.92 : 1.0; }

// Multi-node Ring/Simple all_reduce: NCCL's empirical latency correction ("lat *= 1.4").
constexpr double kRingSimpleAllReduceNetLatencyFactor = 1.4;

// Tree all_reduce's bandwidth (src/graph/tuning.cc up to 2.27; src/tuning/tree.cc since): the
// bus bandwidth capped at 0.92, LL at 1/3.8 of it, LL128 at 120/128 across nodes and 7/9 inside
// one.
constexpr double kTreeBusCap = 0.92;
constexpr double kTreeLLDivisor = 3.8;
constexpr double kTreeLL128NetFactor = 120.0 / 128.0;
constexpr double kTreeLL128IntraFactor = 7.0 / 9.0;
// treeCorrectionFactor: NVIDIA's own note is that "trees are not perfectly sticking to the model
// for medium sizes"; by protocol (LL, LL128, Simple), for powers of two of the buffer from 64 B
// (entry k: log2(bytes / 64) == k). NCCL corrects entries 0..22.
constexpr int kTreeCorrectedSizes = 23;
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

// Channel trimming for small collectives (src/enqueue.cc topoGetAlgoInfo; getAlgoInfo up to 2.18).
// Threads per block: NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS
// (src/include/device.h).
constexpr double kThreadsLL = 512, kThreadsLL128 = 640, kThreadsSimple = 512;
// Bytes each thread keeps at least: NCCL_LL_THREAD_THRESHOLD, NCCL_LL128_THREAD_THRESHOLD,
// NCCL_SIMPLE_THREAD_THRESHOLD (src/include/comm.h); ring LL's is multiplied by the rank count
// (ncclTopoTuneModel).
constexpr double kThresholdLL = 8, kThresholdLL128 = 8, kThresholdSimple = 64;
// MAXCHANNELS (32 in older releases).
constexpr int kMaxChannels = 64;
// ncclTopoPostset (src/graph/connect.cc): the communicator runs twice the channels its ring search
// found, each carrying half a search channel's bandwidth.
constexpr int kRuntimeChannelsPerSearchChannel = 2;

}  // namespace zerosim::nccl
