// Writers for predicted timing: DeepSpeed comms_logger lines and summary with simulated times, a
// per-step summary, per-op JSON and CSV, a Chrome-trace timeline (Perfetto, chrome://tracing),
// and nccl-tests-style tables for `zerosim bench`.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "timing/engine.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct PredictReport {
    const Schedule& schedule;
    const Topology& topology;
    const Prediction& logged;       // synchronized timing: what the comms logger would print
    const Prediction& overlapped;   // as the hardware overlaps: the step times
};

void write_predicted_deepspeed(std::ostream& out, const PredictReport& r, bool log_summary);
void write_step_summary(std::ostream& out, const PredictReport& r, const std::string& prefix);
void write_predicted_json(std::ostream& out, const PredictReport& r);
void write_predicted_csv(std::ostream& out, const PredictReport& r);
// One process per group of identical ranks, one thread per stream.
void write_chrome_trace(std::ostream& out, const Schedule& s, const Prediction& p);

struct BenchRow {
    int64_t bytes = 0;          // nccl-tests' size column
    int64_t count = 0;
    double time_us = 0;
    double algbw_gbs = 0;
    double busbw_gbs = 0;
    std::string algorithm;      // NCCL's pick, "ring/LL128" (a comment line after the table)
};
void write_nccl_tests_table(std::ostream& out, const std::string& op, const std::string& header,
                            const std::vector<BenchRow>& rows);

}  // namespace zerosim
