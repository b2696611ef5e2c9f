// The topology's compute terms fitted to a real run's own timers (formats/wall_clock_log.hpp):
// `zerosim calibrate --deepspeed-log`.
//
// What is fitted, against the same spans of the schedule simulated on the topology
// (timing/phase_spans.hpp: what DeepSpeed's timers, events on the compute stream, would read):
//   - gpu.compute_efficiency (GEMMs) to forward plus backward's inner part (loss.backward());
//   - gpu.memory_efficiency (memory-bound kernels, Adam's step among them: the engine times a
//     step by its bytes read and written) to the optimizer step's span, where the log times the
//     step (step_microstep at the accumulation boundary, the step line's step, the profiler's
//     step latency) and the step moves with it: where communication or the host fills the step,
//     the term is not determined and is left as the topology has it, and the summary says why;
//   - with offload_optimizer, host.cpu_adam_gbs (DeepSpeed's CPU Adam, timed by the same bytes at
//     the host's rate, plus the partitions' PCIe copies) to the step instead, over [0.1, 10000] GB/s.
// Each is a bisection on its logarithm over [0.01, 1] (the spans fall as it rises), the two fitted
// in turn twice (the forward and backward hold memory-bound kernels too, the step its GEMM-free
// Adam). A log the GPU's peak cannot reach, or that 1% of it does not explain, is refused.
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
    double measured_step_ms = -1;          // the optimizer step's median; -1: the log does not time it
    double efficiency_before = 0, efficiency = 0;
    // The optimizer step's term: "gpu.memory_efficiency", or "host.cpu_adam_gbs" (GB/s) under
    // offload_optimizer; its value before and after.
    std::string step_term = "gpu.memory_efficiency";
    double mem_efficiency_before = 0, mem_efficiency = 0;
    bool mem_fitted = false;               // false: left as the topology has it; `mem_note` says why
    std::string mem_note;
    double predicted_fwd_ms_before = 0, predicted_bwd_ms_before = 0, predicted_step_ms_before = 0;
    double predicted_fwd_ms = 0, predicted_bwd_ms = 0, predicted_step_ms = 0;   // at the fitted terms
};

// `s` must be the schedule of the run that wrote the log (its config, model, world and layout);
// its last step's first micro step (and the step's optimizer step) is the one compared.
Result<ComputeFit> fit_compute_efficiency(const Schedule& s, const Topology& t, const WallClockLog& log);

// The fit's lines for the user: before and after, each phase's residual.
std::string compute_fit_summary(const ComputeFit& f);

}  // namespace zerosim
