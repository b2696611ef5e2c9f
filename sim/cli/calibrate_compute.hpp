// calibrate --deepspeed-log's flags and run (calibrate_compute.cpp), beside calibrate's tables.
#pragma once

#include "command.hpp"

namespace zerosim::cli {

struct CalibrateComputeArgs {
    std::string log;        // --deepspeed-log
    ScheduleArgs sched;     // the run's --ds-config, --model, --world (calibrate's own), --seq-len
    std::string topology;
    int64_t nodes = 0;
    std::string output;
};

void add_calibrate_compute_flags(CLI::App* sub, CalibrateComputeArgs& a);
int run_calibrate_compute(const CalibrateComputeArgs& a);

}  // namespace zerosim::cli
