// zerorun's run command (no subcommand): its flags as given, and the whole command.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.hpp"
#include "between_steps.hpp"
#include "schedule/bounds.hpp"

namespace zerorun {

// The flags, as strings and numbers the way CLI11 fills them; run_zero checks them and turns the
// execution ones into the executor's typed ExecOptions.
struct RunArgs {
    std::string ds_config, model, schedule;
    std::string deepspeed;              // --deepspeed VERSION; "" = the newest release the rules cover
    int steps = 2;
    int64_t seq_len = 0;
    int64_t max_ops = zerosim::kDefaultMaxOps;   // schedule bounds (schedule/bounds.hpp); max_memory "" = the default
    std::string max_memory;
    // --pp, --tp, --sp, --ep: the 3D layout, as zerosim's flags (issue 29); each MPI rank builds
    // its own rank's program. 1 = that axis off.
    int64_t pp = 1, tp = 1, sp = 1, ep = 1;
    int64_t gpus_per_node = 0;          // --gpus-per-node: ranks per node DeepSpeed sees (qgZ's groups)
    std::string output;                 // comms_logger lines (rank 0); "" = standard output
    std::string json;                   // JSON log of all ranks (rank 0)
    std::string rank_logs;              // --rank-logs DIR: each rank's comms_logger lines, DIR/rank<R>.log
    double compute_scale = 1.0;
    bool sync_each_op = false;
    std::string op_time = "rank";       // rank | skew-free (executor/options.hpp OpTime)
    double timeout_s = 60.0;
    float lr = 1e-3f;
    uint64_t seed = 1;
    bool no_verify = false;
    std::string evict_before_op = "0";  // --evict-before-op SIZE
    std::string dump_weights;
    bool quiet = false;
    BetweenStepsArgs bench_between;     // --bench-between-steps and its sweep
    int test_fail_rank = -1;
    int64_t test_fail_op = -1;
    std::string test_fail_mode = "exit";   // exit | hang | delay (400 ms, then go on)
};

// The whole `zerorun` run command: inputs, schedule, execution, logs. Returns the exit code.
int run_zero(Backend& be, const RunArgs& args);

}  // namespace zerorun
