// The reader of zerorun's --json log ("format": "zerorun-log"; its writer is
// runtime/executor/run_log.cpp): what `zerosim memory --measured` sets beside its prediction.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/error.hpp"

namespace zerosim {

// zerorun's measured peak bytes per memory category (its own names: parameters, gradients,
// optimizer_states, buckets, verification, workspace), the largest over ranks, and the run's
// stage and world.
struct MeasuredMemory {
    int stage = -1;
    int64_t world = 0;
    std::map<std::string, int64_t> peak;
};

// Refuses a log of another format or version, a world below 1, a stage outside 0-3 and a negative
// peak.
Result<MeasuredMemory> read_zerorun_memory(const std::string& path);
// The same from text; `name` stands for the file in messages (the fuzz target's entry point).
Result<MeasuredMemory> parse_zerorun_memory(const std::string& text, const std::string& name);

}  // namespace zerosim
