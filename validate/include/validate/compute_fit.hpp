// The topology's GEMM efficiency (gpu.compute_efficiency) fitted to a real run's
// wall_clock_breakdown lines (formats/wall_clock_log.hpp): `zerosim calibrate --deepspeed-log`.
//
// What is fitted: the compute stream's span of forward plus backward's inner part, as DeepSpeed's
// timers measure them (CUDA events on that stream), against the same spans of the schedule
// simulated on the topology with the efficiency as the unknown: a bisection on it (the spans
// fall as it rises). What the log cannot determine is refused: the memory-bound efficiency (the
// spans hardly move with it when the layers are GEMM-bound) and the optimizer step's rate (one
// step_microstep per step and a host-side Adam the engine does not time apart) are left as the
// topology has them, and the summary says so.
#pragma once

#include <string>

#include "core/error.hpp"
#include "formats/wall_clock_log.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct ComputeFit {
    size_t lines = 0;                      // values used (the first step's left out when there are more)
    std::string from = "micro steps";      // which lines: "micro steps", "steps (...)", "the flops profiler's step"
    double measured_fwd_ms = 0, measured_bwd_ms = 0;   // medians; bwd: bwd_inner_microstep where given
    double efficiency_before = 0, efficiency = 0;
    double predicted_fwd_ms_before = 0, predicted_bwd_ms_before = 0;
    double predicted_fwd_ms = 0, predicted_bwd_ms = 0;   // at the fitted efficiency
};

// `s` must be the schedule of the run that wrote the log (its config, model, world and layout);
// its last step's first micro step is the one compared.
Result<ComputeFit> fit_compute_efficiency(const Schedule& s, const Topology& t, const WallClockLog& log);

// The fit's lines for the user: before and after, each phase's residual.
std::string compute_fit_summary(const ComputeFit& f);

}  // namespace zerosim
