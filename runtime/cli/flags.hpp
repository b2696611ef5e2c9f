// zerorun's command line, one file per concern as zerosim's subcommands (sim/cli) are: what the
// run runs (run_flags.cpp), what it writes (output_flags.cpp), how it times (timing_flags.cpp),
// the process and its backend (process_flags.cpp), the bench subcommand (bench_command.cpp).
// main.cpp adds them in the order `zerorun --help` lists them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "run.hpp"

namespace zerorun {

// Range checks CLI11 runs on a flag's text before converting it (core/sizes.hpp's grammar, as
// zerosim's command.hpp): an integer in [min, max], a finite real at least (or above) min.
CLI::Validator integer_in(int64_t min, int64_t max = INT64_MAX);
CLI::Validator finite_at_least(double min, bool exclusive = false);
// The check on every output flag's text (core/output.hpp check_output_name): "" is refused.
CLI::Validator output_file();

// run_flags.cpp: the inputs and the schedule; the training and its checks; the hidden test hooks.
void add_input_flags(CLI::App& app, RunArgs& ra);
void add_training_flags(CLI::App& app, RunArgs& ra);
void add_test_hook_flags(CLI::App& app, RunArgs& ra);

// output_flags.cpp: the logs, the weight dump, the memory report.
void add_log_flags(CLI::App& app, RunArgs& ra);
void add_dump_flag(CLI::App& app, RunArgs& ra);
void add_quiet_flag(CLI::App& app, RunArgs& ra);

// timing_flags.cpp: how ops are timed, and the bench rounds between steps.
void add_timing_flags(CLI::App& app, RunArgs& ra);
void add_between_steps_flags(CLI::App& app, RunArgs& ra);

// process_flags.cpp: the backend and the host-memory policy, flags of both commands.
struct ProcessArgs {
    std::string backend;        // --backend; empty: the default
    bool return_freed = false;  // --return-freed-memory (host_memory.cpp)
};
void add_process_flags(CLI::App& app, ProcessArgs& pa);
// Starts the backend --backend names (default: NCCL when a GPU is visible; stderr says which),
// over the MPI one. Returns the backend to run on, or null with `exit_code` set.
Backend* start_backend(Backend& mpi, ProcessArgs& pa, double timeout_s, std::unique_ptr<Backend>& nccl, int& exit_code);

// bench_command.cpp: `zerorun bench`.
struct BenchArgs {
    std::string op = "all_reduce";
    std::string min = "8", max = "32M", dtype = "float", redop = "sum";
    int64_t factor = 2;
    int iters = 20, warmup = 5, root = 0;
    int check = 1;
    bool fenced = false;
    std::string evict = "64M";
    bool fresh_buffers = false;
    int corrupt_rank = -1;
    double timeout_s = 60.0;   // the watchdog's, as zerorun's own --timeout
};
CLI::App* add_bench_command(CLI::App& app, BenchArgs& ba, ProcessArgs& pa);
int run_bench_command(Backend& be, const BenchArgs& a);

}  // namespace zerorun
