// `zerosim need`: the value of one quantity (per-GPU inter-node bandwidth, node count, a bucket
// size) at which a target is met: exposed communication at most X% of the step, or the step at
// most T ms. A bisection over full predictions (schedule, then the overlapped simulation), which
// assumes the metric is monotone in the quantity over the range; the curve printed around the
// answer shows whether it is.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "core/error.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/sweep_network.hpp"
#include "schedule/bounds.hpp"
#include "timing/topology.hpp"

namespace zerosim {

enum class NeedQuantity {
    InterNodeBandwidth,   // per GPU, GB/s per direction, line rate: NIC bandwidth x NICs / GPUs per node
    Nodes,                // the node design scaled (--nodes), micro batch per GPU fixed (weak scaling)
    ReduceBucketSize,     // zero_optimization.reduce_bucket_size, elements
    PrefetchBucketSize,   // zero_optimization.stage3_prefetch_bucket_size, elements
};
enum class NeedTarget { ExposedPercent, StepMs };

struct NeedProblem {
    Model model;
    DsConfig cfg;
    Topology topology;            // the node design as read
    int64_t nodes = 0;            // 0: the file's (ignored when solving for nodes)
    int steps = 2;                // the last step is measured (stage 3's steady state)
    int64_t seq_len = 0;
    bool zero_init = false;
    NeedQuantity quantity = NeedQuantity::InterNodeBandwidth;
    NeedTarget target = NeedTarget::ExposedPercent;
    double target_value = 5;      // percent, or milliseconds
    double lo = 0, hi = 0;        // the range searched (0, 0: the quantity's default range)
    double tolerance = 0.01;      // relative, on the quantity (nodes: exact)
    // What predict takes too, at every probe: checkpointing (the recomputed forward in the step, the
    // activations in the fit), a what-if schedule, fabric mode, fp16 overflow steps, the op limits.
    bool activation_checkpointing = false;
    std::string what_if;
    SweepFabric fabric;
    std::vector<int> overflow_steps;
    int64_t max_ops = kDefaultMaxOps, max_bytes = kDefaultMaxScheduleBytes;
    // A GPT-NeoX config (--solve layout): DeepSpeed's pipeline engine at every candidate, even at one
    // stage, cut by its pipe-partition-method.
    bool pipe_engine = false;
    std::string pp_partition = "parameters";
};

// One prediction at value x of the quantity.
struct NeedPoint {
    double x = 0;
    int64_t world = 0;
    double step_ms = 0, compute_ms = 0, comm_ms = 0, exposed_ms = 0;
    double exposed_percent() const { return step_ms > 0 ? 100 * exposed_ms / step_ms : 0; }
    // The collective (comms-logger name) whose time outside compute is the largest in the step,
    // and that time: what the target is waiting on.
    std::string binding;
    double binding_exposed_ms = 0;
    double uncovered_ms = 0;       // every collective's time outside compute, summed (streams may overlap)
    FitEstimate fit;               // the probe's memory per rank against its GPU (predict's fit line)
};

enum class NeedOutcome {
    Boundary,      // met on one side of `answer`, not on the other
    MetEverywhere, // met at both ends of the range: the boundary lies outside it
};

struct NeedAnswer {
    NeedOutcome outcome = NeedOutcome::Boundary;
    double answer = 0;             // the least (or greatest) value meeting the target
    bool met_above = true;         // the target is met for values >= answer (else <= answer)
    NeedPoint at;                  // the prediction at the answer
    std::vector<NeedPoint> curve;  // around the answer, in increasing x
    bool monotone = true;          // the curve's metric never turns back
    int predictions = 0;
    double lo = 0, hi = 0;
    // Nodes under a config that fixes train_batch_size: the node counts in the range whose world
    // the batch allows (inputs/ds_config.hpp resolve_batch), which the search probes alone; empty:
    // every count.
    std::vector<double> allowed_nodes;
};

// The quantity's name, unit and default range; "inter-node-bandwidth" etc. on the command line.
const char* need_quantity_name(NeedQuantity q);
const char* need_quantity_unit(NeedQuantity q);
void need_default_range(NeedQuantity q, double& lo, double& hi);

// A prediction at x (the topology or config changed as the quantity says).
Result<NeedPoint> need_evaluate(const NeedProblem& p, double x);
// The bisection. A target met at neither end of the range is an error naming --target and both
// ends' values.
Result<NeedAnswer> solve_need(const NeedProblem& p);

void write_need_text(std::ostream& out, const NeedProblem& p, const NeedAnswer& a);

}  // namespace zerosim
