// zerorun: the real ZeRO runtime, one process per rank under mpirun.
//   mpirun -np 4 zerorun --ds-config ds.json --model model.json --steps 5 -o measured.log --json measured.json
//   mpirun -np 4 zerorun bench --op all_reduce --min 8 --max 256M
//   --backend nccl|mpi (default: nccl when a CUDA device is visible, else mpi; stderr says which).
// Exit codes, as zerosim's (README "Exit codes", core/output.hpp): 0 success, 2 bad input (one line
// naming file and field), 1 a failed result check, 3 a runtime fault (MPI error, a peer that died,
// the watchdog's timeout, out of memory, an output that cannot be written).
// The flags are added in one file per concern (flags.hpp), in the order --help lists them.
#include <iostream>
#include <optional>

#include "core/cli_integers.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "flags.hpp"
#include "host_memory.hpp"

using namespace zerorun;

namespace {

struct Command {
    RunArgs run;
    BenchArgs bench;
    ProcessArgs process;
    CLI::App* bench_command = nullptr;
};

void add_flags(CLI::App& app, Command& c) {
    app.require_subcommand(0, 1);
    app.set_version_flag("--version", "zerorun 0.1.0 (DeepSpeed releases 0.14.2 to 0.19.5, default 0.19.5; backend mpi)");
    add_input_flags(app, c.run);
    add_log_flags(app, c.run);
    add_timing_flags(app, c.run);
    add_training_flags(app, c.run);
    add_dump_flag(app, c.run);
    add_process_flags(app, c.process);
    add_quiet_flag(app, c.run);
    add_between_steps_flags(app, c.run);
    add_test_hook_flags(app, c.run);
    c.bench_command = add_bench_command(app, c.bench, c.process);
    zerosim::decimal_integer_options(app);
}

// Parses the command line; an exit code where the command ends here (--help and --version are
// requests, exit 0; anything else is the one error line, exit 2).
std::optional<int> parse(CLI::App& app, int argc, char** argv, Backend& be) {
    try {
        app.parse(argc, argv);
        return std::nullopt;
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) {
            if (be.rank() == 0) app.exit(e);
            return zerosim::check_standard_output("zerorun");
        }
        return zerosim::print_input_error("zerorun", zerosim::command_line_error(e.what()), be.rank() == 0);
    }
}

// The command on the started backend; a fault past the inputs aborts every rank.
int run_command(Backend& be, const Command& c) {
    try {
        if (c.bench_command->parsed()) return run_bench_command(be, c.bench);
        return run_zero(be, c.run);
    } catch (const std::bad_alloc&) {
        std::cerr << "zerorun: error: rank " << be.rank() << ": out of memory\n";
        be.abort(zerosim::kExitRuntimeFault);
    } catch (const std::exception& e) {
        std::cerr << "zerorun: error: rank " << be.rank() << ": " << e.what() << '\n';
        be.abort(zerosim::kExitRuntimeFault);
    }
    return zerosim::kExitRuntimeFault;   // not reached: abort ends every rank
}

}  // namespace

int main(int argc, char** argv) {
    // MPI always: it starts the job, and the NCCL backend runs over it (unique id, barrier, logs).
    std::unique_ptr<Backend> mpi_be = make_mpi_backend(&argc, &argv);
    std::unique_ptr<Backend> nccl_be;
    CLI::App app{"zerorun: the real ZeRO runtime (run it under mpirun, one process per rank)"};
    Command c;
    add_flags(app, c);
    if (auto code = parse(app, argc, argv, *mpi_be)) {
        finalize_mpi();
        return *code;
    }
    if (!c.process.return_freed) keep_freed_host_memory();
    int code = 1;
    Backend* be = start_backend(*mpi_be, c.process, c.run.timeout_s, nccl_be, code);
    if (be) code = run_command(*be, c);
    int out_rc = !be || code ? 0 : zerosim::check_standard_output("zerorun");
    nccl_be.reset();
    finalize_mpi();
    return code ? code : out_rc;
}
