// NCCL's channel and thread tuning for small ring/tree collectives (src/enqueue.cc,
// topoGetAlgoInfo; in NCCL <= 2.18 getAlgoInfo): after the tuner has picked algorithm and protocol
// on its full-bandwidth estimate, NCCL drops channels (one thread block each) while the buffer is
// smaller than channels x threads x per-thread threshold, so each thread keeps at least a
// threshold's worth of work. A collective then runs on fewer blocks, and its bandwidth shrinks with
// them. The figures are in nccl_constants.hpp.
//
// The bytes NCCL tests are the larger of what a rank sends and receives (ncclFuncMaxSendRecvCount x
// type size): the whole buffer S for every collective here. NCCL also halves the threads once a
// single channel is left; what that does to one block's throughput is not in NCCL's model, so it is
// left out. NVLS keeps its own channel count (topoGetAlgoInfo) and is not trimmed.
#include <algorithm>

#include "nccl_constants.hpp"
#include "nccl_model.hpp"

namespace zerosim::nccl {

namespace {

// The channels NCCL searched for (`full`) and those it keeps for this size (`kept`).
struct Channels {
    int full = 1, kept = 1;
};

Channels ring_tree_channels(const Topology& t, double buffer_bytes, int64_t n, Algorithm a, Protocol p) {
    double threads = p == Protocol::LL ? kThreadsLL : p == Protocol::LL128 ? kThreadsLL128 : kThreadsSimple;
    double threshold = p == Protocol::LL ? kThresholdLL : p == Protocol::LL128 ? kThresholdLL128 : kThresholdSimple;
    if (a == Algorithm::Ring && p == Protocol::LL) threshold *= static_cast<double>(n);
    const int most = max_channels(t.nccl_version);
    int channels = std::min(most, kRuntimeChannelsPerSearchChannel * std::max(1, t.intra_channels));
    // Across nodes the search puts a channel on each NIC a GPU owns (two at run time): the
    // channels to trim are those, not the NVLinks'.
    const int64_t g = std::min<int64_t>(t.gpus_per_node, n);
    if (n > g && t.nics_per_node > 0)
        channels = std::min<int>(most, kRuntimeChannelsPerSearchChannel * static_cast<int>(std::min<int64_t>(t.nics_per_node, g)));
    int nc = channels;
    while (nc > 1 && buffer_bytes < nc * threads * threshold) --nc;
    return {channels, nc};
}

double channel_fraction(const Topology& t, double buffer_bytes, int64_t n, Algorithm a, Protocol p) {
    if (a != Algorithm::Ring && a != Algorithm::Tree) return 1.0;   // NVLS, NVLSTree, CollNet, PAT keep theirs
    if (t.intra == IntraKind::SharedMemory || n <= 1) return 1.0;
    Channels c = ring_tree_channels(t, buffer_bytes, n, a, p);
    return static_cast<double>(c.kept) / static_cast<double>(c.full);
}

}  // namespace

int running_tree_channels(const Topology& t, double buffer_bytes, int64_t world, Protocol p) {
    return ring_tree_channels(t, buffer_bytes, std::max<int64_t>(world, 1), Algorithm::Tree, p).kept;
}

CollectivePlan as_run(const Topology& t, int64_t world, CollectivePlan plan) {
    const NcclChoice c = plan.reported_pair();
    double f = channel_fraction(t, plan.buffer_bytes, std::max<int64_t>(world, 1), c.algorithm, c.protocol);
    plan.intra_rate *= f;
    plan.inter_rate *= f;
    return plan;
}

}  // namespace zerosim::nccl
