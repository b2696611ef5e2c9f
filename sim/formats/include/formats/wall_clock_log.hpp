// DeepSpeed's own figures of a training run, as its log prints them beside the comms logger's
// lines: the wall-clock timers, the throughput timer and the flops profiler's summary. One reader
// and one writer for all three (the writer makes a predicted log read as a real one).
//
// 1. wall_clock_breakdown (engine.py ~2219: after every micro step `timers.log(micro_timers)`,
//    and ~2233 at the accumulation boundary `timers.log(global_timers)`; utils/timer.py
//    SynchronizedWallClockTimer.log prints "{:.2f}"):
//      [Rank 0] time (ms) | fwd_microstep: 2433.78 | bwd_microstep: 2228.13 | bwd_inner_microstep: 2201.50 |
//               bwd_allreduce_microstep: 26.40 | step_microstep: 101.22
//      [Rank 0] time (ms) | fwd: 2433.78 | bwd: 2228.13 | bwd_inner: 2201.50 | bwd_allreduce: 26.40 | step: 101.22
//    The timers record events on the compute stream, so each figure is that stream's span of the
//    phase: forward (engine.forward), backward (engine.backward: loss.backward = inner, plus the
//    engine's own gradient reduction), step (engine.step; about 0 off the accumulation boundary).
//    The per-step ("global") figures are the sums over the step's micro steps.
// 2. steps_per_print's throughput line (utils/timer.py ThroughputTimer.stop ~256, v0.14.2; printed
//    at a global step divisible by steps_per_print, from the third step on: the timer starts
//    counting at start_step = 2):
//      epoch=0/micro_step=3/global_step=3, RunningAvgSamplesPerSec=123.43, CurrSamplesPerSec=123.42,
//      MemAllocated=0.28GB, MaxMemAllocated=0.28GB
//    samples = train_batch_size (all ranks); MemAllocated/MaxMemAllocated are
//    torch.cuda.memory_allocated()/max_memory_allocated() of rank 0 in GiB, rounded to 0.01.
// 2b. The pipeline engine's progress line instead (pipe/engine.py v0.14.2 ~385, print() on global
//    rank 0 when global_steps % steps_per_print == 0; iter time = the train_batch timer over the
//    last steps_per_print steps, their mean; samples = train_batch_size):
//      steps: 10 loss: 2.3456 iter time (s): 1.234 samples/sec: 414.911
// 3. The flops profiler's summary (profiling/flops_profiler/profiler.py print_model_profile ~323,
//    print(), so without a log prefix): "fwd latency:", "bwd latency:", "step latency:", "iter
//    latency:" of its profile step (bwd and step only under wall_clock_breakdown), "fwd flops per
//    GPU:", "params per GPU:", "samples/second:"; numbers as its number_to_string writes them
//    ("76.67 ms", "6.28 T", "336.23 M").
#pragma once

#include <cstdint>
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

// One accumulation boundary's global timers; -1: absent from the line.
struct WallClockStep {
    int line = 0;
    double fwd_ms = -1, bwd_ms = -1, bwd_inner_ms = -1, bwd_allreduce_ms = -1, step_ms = -1;
};

struct ThroughputLine {
    int line = 0;
    int64_t epoch = 0, micro_step = 0, global_step = 0;
    double running_avg_samples_per_s = 0;   // RunningAvgSamplesPerSec
    double samples_per_s = 0;               // CurrSamplesPerSec: this step's
    double mem_allocated_gib = 0;           // MemAllocated (GiB, as DeepSpeed's "GB")
    double max_mem_allocated_gib = 0;       // MaxMemAllocated
};

struct PipeProgressLine {
    int line = 0;
    int64_t step = 0;        // global_steps when printed
    double iter_s = 0;       // iter time (s)
    double samples_per_s = 0;
};

// The flops profiler's summary; -1 (or 0 for counts) where it did not print the figure.
struct FlopsProfile {
    int line = 0;                    // of "Profile Summary at step N:"
    int64_t step = -1;
    int64_t world = 0, batch_per_gpu = 0;
    double params_per_gpu = -1, fwd_flops_per_gpu = -1;
    double fwd_ms = -1, bwd_ms = -1, step_ms = -1, iter_ms = -1;
    double samples_per_s = -1;
};

struct WallClockLog {
    std::string source;
    std::vector<WallClockMicroStep> micro;
    std::vector<WallClockStep> steps;
    std::vector<ThroughputLine> throughput;
    std::vector<PipeProgressLine> pipe_progress;
    std::vector<FlopsProfile> profiles;
    // Timer names on "time (ms) |" lines that are none of the above (the pipeline engine's
    // forward_microstep, batch_input, ...): read past, named once so nothing is dropped silently.
    std::vector<std::string> other_timers;
    bool empty() const {
        return micro.empty() && steps.empty() && throughput.empty() && pipe_progress.empty() && profiles.empty();
    }
};

// Every line of the three kinds, checked: each figure a finite, non-negative decimal; a micro-step
// line with fwd and bwd; the parts of backward (inner, allreduce) within it; a throughput line
// whole. A line that contradicts itself is an error naming the file, the line and the field. A log
// with none of them gives an empty log.
Result<WallClockLog> parse_deepspeed_figures(const std::string& file, const std::string& text);
Result<WallClockLog> read_deepspeed_figures(const std::string& path);
// The same, for a reader that needs the micro-step lines (calibrate --deepspeed-log): a log
// without any is an error saying how to get them.
Result<WallClockLog> parse_wall_clock_log(const std::string& file, const std::string& text);
Result<WallClockLog> read_wall_clock_log(const std::string& path);

// The lines as DeepSpeed prints them after the prefix (`ds_line_prefix`, formats/comms_log.hpp):
// "time (ms) | fwd_microstep: ... " (the parts of m that are >= 0), "time (ms) | fwd: ...", and
// the throughput line. Python's repr of a float is matched with 17 significant digits.
std::string wall_clock_micro_text(const WallClockMicroStep& m);
std::string wall_clock_step_text(const WallClockStep& s);
std::string throughput_text(const ThroughputLine& t);
// "steps: 10 loss: nan iter time (s): 1.234 samples/sec: 414.911": a prediction has no loss.
std::string pipe_progress_text(const PipeProgressLine& p);

}  // namespace zerosim
