// calibrate --deepspeed-log's flags and run (calibrate_compute.cpp), beside calibrate's tables.
#pragma once

#include "command.hpp"
#include "timing/topology.hpp"

namespace zerosim::cli {

struct CalibrateComputeArgs {
    std::string log;        // --deepspeed-log
    ScheduleArgs sched;     // the run's --ds-config, --model, --world (calibrate's own), --seq-len
    std::string topology;
    int64_t nodes = 0;
    std::string output;
};

// A topology to calibrate, read once: parsed (scaled to `nodes`) and kept as JSON, since a
// calibrated topology is the input plus what was fitted.
struct TopologyDocument {
    Topology topology;
    Json doc;
};
Result<TopologyDocument> read_topology_document(const std::string& path, int64_t nodes);

void add_calibrate_compute_flags(CLI::App* sub, CalibrateComputeArgs& a);
int run_calibrate_compute(const CalibrateComputeArgs& a);

}  // namespace zerosim::cli
