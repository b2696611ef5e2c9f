// Writers for predicted timing: DeepSpeed comms_logger lines and summary with simulated times, a
// per-step summary, per-op JSON and CSV, a Chrome-trace timeline (Perfetto, chrome://tracing),
// and nccl-tests-style tables for `zerosim bench`.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "analysis/memory_report.hpp"
#include "formats/nccl_tests.hpp"
#include "prediction/stage_time.hpp"
#include "prediction/timed_stream.hpp"
#include "timing/engine.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct PredictReport {
    const Schedule& schedule;
    const Topology& topology;
    const Prediction& logged;       // synchronized timing: what the comms logger would print
    const Prediction& overlapped;   // as the hardware overlaps: the step times
    const FitEstimate* fit = nullptr;   // memory per rank against the GPU (analysis/fit.hpp), if known
    std::string what_if_json;           // --what-if: the side-by-side figures (prediction/what_if_compare.hpp), JSON "what_if"
    const std::vector<StageTime>* stages = nullptr;   // a pipeline: each stage's step (prediction/stage_time.hpp)
    // A 3D layout: each stage's memory and fit (analysis/memory_report.hpp layout_fit), printed in
    // place of the one fit line.
    const std::vector<StageFit>* stage_fits = nullptr;
    // A long run timed by period (prediction/timed_stream.hpp): the deepspeed and CSV writers take
    // its ops from here, op by op, and `schedule` is its template; `logged` and `overlapped` are
    // its run figures (steps and totals, no ops).
    const TimedStream* timed = nullptr;
    // DeepSpeed's own figures, written among the comm op lines as the config makes a run print
    // them (formats/wall_clock_log.hpp; the deepspeed format only): the wall-clock timer lines
    // (wall_clock_breakdown or the flops profiler), and steps_per_print's throughput line with
    // the fit's memory (0: none). Not under the pipeline engine (GPT-NeoX uses it even at one
    // stage), whose timers and throughput line are its own (pipe/engine.py ~380-410).
    struct OwnFigures {
        bool timers = false;
        int64_t steps_per_print = 0;
        int64_t train_batch = 0;   // train_batch_size: the samples of one step, all ranks
    } figures;
};

void write_predicted_deepspeed(std::ostream& out, const PredictReport& r, bool log_summary);
void write_step_summary(std::ostream& out, const PredictReport& r, const std::string& prefix);
void write_predicted_json(std::ostream& out, const PredictReport& r);
void write_predicted_csv(std::ostream& out, const PredictReport& r);
// One process per group of identical ranks, one thread per stream; stage 3 adds the host's thread
// and a counter track of the gathered parameters.
void write_chrome_trace(std::ostream& out, const Schedule& s, const Prediction& p);
// A pipeline's ranks simulated together (timing/engine.hpp simulate_ranks): one process per stage.
void write_chrome_trace_stages(std::ostream& out, const std::vector<const Schedule*>& stages,
                               const std::vector<const Prediction*>& timings);
// The memory model's peak of gathered parameters (analysis/memory.hpp counts the same), bytes.
int64_t gathered_peak_by_memory_model(const Schedule& s);

// A predicted nccl-tests row (bytes, count, time, algbw, busbw; the writer fills the rest) and the
// algorithm/protocol NCCL's tuner is predicted to pick for it, "ring/LL128", which the table names
// in a comment line after it.
struct BenchRow : NcclTestsRow {
    std::string algorithm;
};
// `zerosim bench`'s table (formats/nccl_tests.hpp's writer): both columns show the prediction,
// #wrong is N/A.
void write_nccl_tests_table(std::ostream& out, const std::string& op, const std::string& header,
                            const std::vector<BenchRow>& rows);

}  // namespace zerosim
