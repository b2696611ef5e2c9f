// NCCL's constants, in one table, as its tuner uses them (src/graph/tuning.cc unless an entry says
// otherwise; NCCL 2.18 to 2.28; shared docs/collectives.md). Private to the cost model.
#pragma once

#include "timing/collectives.hpp"

namespace zerosim::nccl {

// The latency table, indexed as NCCL's tuner indexes it (src/include/plugin/nccl_tuner.h, v2.28.9-1):
// algorithm NCCL_ALGO_TREE 0, RING 1, COLLNET_DIRECT 2, COLLNET_CHAIN 3, NVLS 4, NVLS_TREE 5, PAT 6;
// protocol NCCL_PROTO_LL 0, LL128 1, SIMPLE 2; link NCCL_HW_NVLINK 0, PCI 1, NET 2.
enum NcclAlgoIndex { kAlgoTree, kAlgoRing, kAlgoCollNetDirect, kAlgoCollNetChain, kAlgoNvls, kAlgoNvlsTree, kAlgoPat, kAlgoCount };
enum NcclHwIndex { kHwNvlink, kHwPci, kHwNet, kHwCount };
constexpr int kProtoCount = 3;
inline int proto_index(Protocol p) { return p == Protocol::LL ? 0 : p == Protocol::LL128 ? 1 : 2; }
inline int algo_index(Algorithm a) {
    switch (a) {
        case Algorithm::Tree: return kAlgoTree;
        case Algorithm::Ring: return kAlgoRing;
        case Algorithm::CollNetDirect: return kAlgoCollNetDirect;
        case Algorithm::CollNetChain: return kAlgoCollNetChain;
        case Algorithm::NVLS: return kAlgoNvls;
        case Algorithm::NVLSTree: return kAlgoNvlsTree;
        case Algorithm::PAT: return kAlgoPat;
    }
    return kAlgoRing;
}

// baseLat[algo][proto] (ncclTunerConstantsDefaults.baseLatencies, µs): a collective's fixed
// start-up cost. 0 where NCCL has none (CollNet, NVLS, NVLSTree) or the protocol does not run.
constexpr double kBaseLatencyUs[kAlgoCount][kProtoCount] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4},   // Tree, Ring
    {0, 0, 0}, {0, 0, 0},                 // CollNet Direct, Chain
    {0, 0, 0}, {0, 0, 0},                 // NVLS, NVLSTree
    {8.0, 8.0, 8.0}};                     // PAT
// hwLat[hw][algo][proto] (ncclTunerConstantsDefaults.hwLatencies, µs): one step over the link. On
// NET the NIC's own latency comes on top (the topology's nics.latency_us). The releases whose
// figures differ (CollNet and NVLSTree before v2.21 and v2.28, Tree Simple's step in v2.21) are in
// nccl_multinode_constants.hpp.
constexpr double kHwLatencyUs[kHwCount][kAlgoCount][kProtoCount] = {
    // NVLINK
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4},   // Tree, Ring
     {0, 0, 3.7}, {0, 0, 2.8},          // CollNet Direct, Chain
     {0, 0, 25}, {0, 0, 25},            // NVLS, NVLSTree
     {0, 0, 4.0}},                      // PAT
    // PCI
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7},
     {0, 0, 3.7}, {0, 0, 2.8},
     {0, 0, 0}, {0, 0, 0},
     {0, 0, 4.0}},
    // NET
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0},
     {0, 0, 31}, {0, 0, 30},
     {0, 0, 18}, {0, 0, 20.9},
     {0, 0, 14}}};
inline double base_latency_table_us(Algorithm a, Protocol p) { return kBaseLatencyUs[algo_index(a)][proto_index(p)]; }
inline double hw_latency_table_us(NcclHwIndex hw, Algorithm a, Protocol p) { return kHwLatencyUs[hw][algo_index(a)][proto_index(p)]; }

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
// MAXCHANNELS, the most channels a communicator runs: the cap on ncclTopoPostset doubling the
// search's channels (src/graph/connect.cc, v2.28.9-1 line 452: "nChannels = comm->nChannels =
// std::min(MAXCHANNELS,nChannels*2)"), on one node and across nodes alike. 32 through v2.24
// (src/include/device.h, devcomm.h before v2.19), 64 since v2.25.1 (device.h line 86 in v2.28.9-1).
constexpr int kMaxChannelsBeforeV225 = 32, kMaxChannelsSinceV225 = 64;
inline int max_channels(const NcclVersion& v) { return v.at_least(2, 25) ? kMaxChannelsSinceV225 : kMaxChannelsBeforeV225; }
// ncclTopoPostset (src/graph/connect.cc): the communicator runs twice the channels its ring search
// found, each carrying half a search channel's bandwidth.
constexpr int kRuntimeChannelsPerSearchChannel = 2;

}  // namespace zerosim::nccl
