// The timing engine: a discrete-event simulation of a schedule on SimGrid.
//
// Ranks are symmetric (every rank runs the same ops, and the topology's nodes are identical), so
// one representative rank is simulated exactly: its streams are SimGrid actors, each collective is
// a latency followed by at most two flows (its bytes over the rank's intra-node link, and over its
// share of the NICs and the fabric above them), and collectives that overlap in time share those
// links by SimGrid's flow-level max-min sharing. The cost is per op, independent of world size.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "timing/collectives.hpp"
#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

enum class TimingMode {
    Overlapped,    // as the hardware runs it: streams overlap, collectives share links
    Synchronized,  // as DeepSpeed's comms logger measures: the device synchronises after every op
};
const char* timing_mode_name(TimingMode m);

struct OpTiming {
    double start_s = 0;
    double end_s = 0;
    bool simulated = false;     // false for ops that take no time on this platform
    // Ranks simulated together (simulate_ranks): of the time from start_s, how long the op waited
    // for another rank (a send or receive for its other end, a group collective for the last of
    // its simulated members); the rest is its own.
    double wait_s = 0;
    Algorithm algorithm = Algorithm::Ring;
    Protocol protocol = Protocol::Simple;
    double duration() const { return end_s - start_s; }
};

struct StepTiming {
    int step = 0;
    double start_s = 0;
    double end_s = 0;
    double compute_s = 0;       // busy time of the compute stream on compute segments
    double comm_s = 0;          // sum of collective durations
    double exposed_comm_s = 0;  // step time not covered by compute
    // Stage 3 with a host timeline (-1 otherwise): the most gathered, unreleased parameter bytes
    // at once (the memory model's "gathered parameters" counted on the timeline), and the most
    // bytes gathered ahead: gathers finished whose module's compute has not started.
    int64_t gathered_peak_bytes = -1;
    int64_t gathered_ahead_peak_bytes = -1;
    double allocator_stall_s = 0;   // of Prediction::allocator_stall_s, the host's stalls issuing this step's ops
    double step_s() const { return end_s - start_s; }
};

// Gathered, unreleased parameter bytes from time t_s on (stage 3's host timeline).
struct GatheredSample {
    double t_s = 0;
    int64_t bytes = 0;
    int step = -1;
};

struct HostTiming {
    double start_s = 0;   // the host reached the event
    double end_s = 0;     // and left it (its waits and its own time done)
};

struct Prediction {
    TimingMode mode = TimingMode::Overlapped;
    std::vector<OpTiming> ops;      // indexed like Schedule::ops
    std::vector<StepTiming> steps;
    double init_s = 0;              // engine start (deepspeed.initialize)
    // Stage 3's host timeline, overlapped mode (empty otherwise): each Schedule::host event, when
    // the host issued each op, and the gathered bytes over time.
    std::vector<HostTiming> host;
    std::vector<double> issued_s;
    std::vector<GatheredSample> gathered;
    // Gathered buffers allocated and not yet reusable (device memory), in time order.
    std::vector<GatheredSample> resident;
    double zero_init_construction_s = -1;  // --zero-init: zero_init_construction_seconds; -1 otherwise
    double allocator_stall_s = 0;          // host time stalled on the gathered-parameter budget
    int64_t resident_peak_bytes = 0;       // gathered buffers allocated and not yet reusable, at most
    int64_t gathered_budget_bytes = INT64_MAX;  // simulate()'s bound on them
    double total_s = 0;
};

// Compute segment duration on this device: the slower of its FLOPs and its memory traffic.
double compute_seconds(const Op& op, const Topology& t, DType dtype);

// What each op waits for in the overlapped mode: exactly schedule/ordering.hpp's wait_lists (the
// IR's deps and stream order), nothing of the engine's own. Each queue is one SimGrid actor that
// runs its ops in issue order. Where the schedule has host events (stage 3), one more actor runs
// the host: it walks the ops in IR order, spends the topology's host time on each event and each
// compute launch, waits where a FetchWait event waits, and an op starts only once the host has
// issued it. The synchronized mode runs every op after the previous one.
std::vector<std::vector<int64_t>> engine_wait_plan(const Schedule& s);

// Stage 3: the per-step gathered and gathered-ahead peaks (StepTiming) from the host timeline.
void summarise_gathered(const Schedule& s, Prediction& p);

// --zero-init: the per-parameter broadcasts of the model's construction under deepspeed.zero.Init,
// one after the other (start-up time apart from the steps and the engine start; not logged).
double zero_init_construction_seconds(const Schedule& s, const Topology& t);

// Host time the host lane spends before issuing op `op` (launching a compute segment's kernels).
double host_launch_seconds(const Op& op, const Topology& t);

// What fabric mode (timing/fabric.hpp) changes in a run: each collective's plan once planned (its
// bandwidth divided by the fabric's slowdown for its traffic), and compute segments' durations
// (times the slowest rank's slowdown). Without one the engine runs the representative mode.
struct EngineAdjust {
    std::function<void(const Op& op, CollectivePlan& plan)> collective;
    double compute_slowdown = 1.0;
};

// Checks the schedule fits the topology (world size against its GPUs) and simulates it.
// `gathered_budget_bytes` (stage 3's host timeline): device memory left for gathered parameters
// (the GPU's memory less the rest of the memory model); the host stalls before a gather that
// would pass it until freed buffers are reusable, as PyTorch's caching allocator makes it
// (docs/zero-comm.md "Stage 3 in time"). Without it the gathers are unbounded by memory.
Result<Prediction> simulate(const Schedule& s, const Topology& t, TimingMode mode,
                            int64_t gathered_budget_bytes = INT64_MAX, const EngineAdjust* adjust = nullptr);

// Several ranks' schedules simulated together, one SimGrid actor per stream of each rank on hosts and
// links of its own (a pipeline's stages: one rank of each, in stage order). A send meets its
// receive on the other rank (the k-th send from a to b the k-th receive at b from a) and crosses
// the sender's intra-node link when both ranks share a node, else its NIC share and the fabric; a
// collective whose group holds several of the ranks starts once all of them have reached it
// (OpTiming::wait_s). Ranks outside the set run as the representative mode runs them: the stages'
// data-parallel, tensor, sequence and expert groups are the same at every index, so one rank per
// stage stands for its stage. Returns one Prediction per schedule, in order; schedules whose sends
// and receives do not meet are an error naming the op that never ran.
Result<std::vector<Prediction>> simulate_ranks(const std::vector<const Schedule*>& ranks, const Topology& t, TimingMode mode,
                                               const EngineAdjust* adjust = nullptr);

// One collective alone on an idle platform, through the same engine (for `zerosim bench`).
// `only` restricts NCCL's tuner as NCCL_ALGO / NCCL_PROTO do.
double simulate_single_collective(const Topology& t, OpKind kind, double logged_bytes, int64_t world,
                                  CollectivePlan* plan_out = nullptr, const TunerChoice& only = {},
                                  const EngineAdjust* adjust = nullptr);

}  // namespace zerosim
