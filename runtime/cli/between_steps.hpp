// zerorun --bench-between-steps PREFIX: bench rounds of the collectives inside the run, before each
// training step and after the last, so that a calibration (zerosim calibrate PREFIX-*.txt) and the
// timed steps share the machine's moment (issue 20). Each round is one fenced, unchecked sweep per
// collective, appended by rank 0 to PREFIX-<op>.txt as an nccl-tests table.
#pragma once

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/error.hpp"

namespace zerorun {

struct BetweenStepsArgs {
    std::string prefix;                 // "" = off
    std::string min = "1K", max = "8M";
    int64_t factor = 2;
    int iters = 3;                      // timed calls per size and column in each round
    int every = 1;                      // a round before every N-th step (and after the last)
    std::string evict = "64M";          // bytes written over before each call (0: warm caches)
    bool fresh_buffers = false;         // each call's buffers allocated and filled just before it, as a step's op
};

// The hook for ExecOptions::between_steps, and the files it appends to (opened on rank 0, each
// checked as an output that is none of `inputs` and none of the run's `outputs`, -o and --json:
// core/output.hpp check_outputs). An error names the flag.
struct BetweenSteps {
    std::vector<std::unique_ptr<std::ofstream>> files;
    std::function<void(int)> hook;
};
zerosim::Result<std::shared_ptr<BetweenSteps>> make_between_steps(Backend& be, const BetweenStepsArgs& a,
                                                                  const std::vector<std::string>& inputs,
                                                                  const std::vector<zerosim::OutputPath>& outputs);

}  // namespace zerorun
