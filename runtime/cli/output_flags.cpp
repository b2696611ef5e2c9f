// zerorun's flags of what the run writes: the comms_logger and JSON logs, the weight dump, the
// memory report.
#include "flags.hpp"

namespace zerorun {

void add_log_flags(CLI::App& app, RunArgs& ra) {
    app.add_option("-o,--output", ra.output, "rank 0's comms_logger lines and summary (default: standard output)")
        ->check(output_file());
    app.add_option("--rank-logs", ra.rank_logs,
                   "Directory: each rank writes its own comms_logger lines to DIR/rank<R>.log, as zerosim schedule --rank all "
                   "-o DIR/ predicts them (zerosim validate reads the directory)");
    app.add_option("--json", ra.json, "JSON log of every op on every rank (written by rank 0)")->check(output_file());
}

void add_dump_flag(CLI::App& app, RunArgs& ra) {
    app.add_option("--dump-weights", ra.dump_weights, "Each rank writes its fp32 master partition to PREFIX.rank<N>.bin")
        ->check(output_file());
}

void add_quiet_flag(CLI::App& app, RunArgs& ra) { app.add_flag("--quiet", ra.quiet, "No memory report on standard output"); }

}  // namespace zerorun
