// DeepSpeed's wall_clock_breakdown lines (engine.py ~2219: after every micro step,
// `timers.log(engine_timers.micro_timers)`; utils/timer.py SynchronizedWallClockTimer.log):
//   [Rank 0] time (ms) | fwd_microstep: 2433.78 | bwd_microstep: 2228.13 | bwd_inner_microstep: 2201.50 |
//            bwd_allreduce_microstep: 26.40 | step_microstep: 101.22
// The timers record CUDA events on the compute stream, so each figure is that stream's span of the
// phase: forward (engine.forward), backward (engine.backward: loss.backward = inner, plus the
// engine's own gradient all_reduce), step (engine.step; about 0 off the accumulation boundary).
// The per-step lines of the global timers ("fwd: ... | bwd: ... | step: ...") are read beside them.
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

struct WallClockMicroStep {
    int line = 0;                    // 1-based line of the log
    double fwd_ms = 0, bwd_ms = 0;   // fwd_microstep, bwd_microstep (both required)
    double bwd_inner_ms = -1;        // bwd_inner_microstep; -1: absent
    double bwd_allreduce_ms = -1;    // bwd_allreduce_microstep; -1: absent
    double step_ms = -1;             // step_microstep; -1: absent
};

struct WallClockLog {
    std::string source;
    std::vector<WallClockMicroStep> micro;
};

// Every micro-step line of the log, checked: each figure a finite, non-negative decimal; fwd and
// bwd present; the parts of backward (inner, allreduce) within it. A log with no such line, or a
// line that contradicts itself, is an error naming the file and the line.
Result<WallClockLog> parse_wall_clock_log(const std::string& file, const std::string& text);
Result<WallClockLog> read_wall_clock_log(const std::string& path);

}  // namespace zerosim
