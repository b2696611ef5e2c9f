// The timing engine: a discrete-event simulation of a schedule on SimGrid.
//
// Ranks are symmetric (every rank runs the same ops, and the topology's nodes are identical), so
// one representative rank is simulated exactly: its streams are SimGrid actors, each collective is
// a latency followed by at most two flows (its bytes over the rank's intra-node link, and over its
// share of the NICs and the fabric above them), and collectives that overlap in time share those
// links by SimGrid's flow-level max-min sharing. The cost is per op, independent of world size.
#pragma once

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
    double step_s() const { return end_s - start_s; }
};

struct Prediction {
    TimingMode mode = TimingMode::Overlapped;
    std::vector<OpTiming> ops;      // indexed like Schedule::ops
    std::vector<StepTiming> steps;
    double init_s = 0;              // engine start (deepspeed.initialize)
    double total_s = 0;
};

// Compute segment duration on this device: the slower of its FLOPs and its memory traffic.
double compute_seconds(const Op& op, const Topology& t, DType dtype);

// What each op waits for in the overlapped mode: exactly schedule/ordering.hpp's wait_lists (the
// IR's deps and stream order), nothing of the engine's own. Each queue is one SimGrid actor that
// runs its ops in issue order. The synchronized mode runs every op after the previous one.
std::vector<std::vector<int64_t>> engine_wait_plan(const Schedule& s);

// Checks the schedule fits the topology (world size against its GPUs) and simulates it.
Result<Prediction> simulate(const Schedule& s, const Topology& t, TimingMode mode);

// One collective alone on an idle platform, through the same engine (for `zerosim bench`).
// `only` restricts NCCL's tuner as NCCL_ALGO / NCCL_PROTO do.
double simulate_single_collective(const Topology& t, OpKind kind, double logged_bytes, int64_t world,
                                  CollectivePlan* plan_out = nullptr, const TunerChoice& only = {});

}  // namespace zerosim
