// zerorun: the real ZeRO runtime, one process per rank under mpirun.
//   mpirun -np 4 zerorun --ds-config ds.json --model model.json --steps 5 -o measured.log --json measured.json
//   mpirun -np 4 zerorun bench --op all_reduce --min 8 --max 256M
//   --backend nccl|mpi (default: nccl when a CUDA device is visible, else mpi; stderr says which).
// Exit codes, as zerosim's (README "Exit codes", core/output.hpp): 0 success, 2 bad input (one line
// naming file and field), 1 a failed result check, 3 a runtime fault (MPI error, a peer that died,
// the watchdog's timeout, out of memory, an output that cannot be written).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include "backends/backend.hpp"
#include "collbench/bench.hpp"
#include "host_memory.hpp"
#include "run.hpp"
#include "backends/nccl_backend.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"

using namespace zerorun;

namespace {

// Every rank reads the same inputs and fails the same way; rank 0 says it once.
int input_error(Backend& be, const zerosim::Error& e) { return zerosim::print_input_error("zerorun", e, be.rank() == 0); }

// Range checks CLI11 runs on a flag's text before converting it (core/sizes.hpp's grammar, as
// zerosim's command.hpp): an integer in [min, max], a finite real at least (or above) min.
CLI::Validator integer_in(int64_t min, int64_t max = INT64_MAX) {
    return CLI::Validator(
        [min, max](std::string& text) {
            auto v = zerosim::parse_int_flag(text, "", min, max);
            return v ? std::string() : v.error().message;
        },
        "");
}
CLI::Validator finite_at_least(double min, bool exclusive = false) {
    return CLI::Validator(
        [min, exclusive](std::string& text) {
            auto v = zerosim::parse_real_flag(text, "", min, exclusive);
            return v ? std::string() : v.error().message;
        },
        "");
}

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
};

int run_bench_cmd(Backend& be, const BenchArgs& a) {
    BenchOptions o;
    if (!bench_op_known(a.op))
        return input_error(be, {"", "--op", "expected all_reduce, all_gather, reduce_scatter, broadcast or reduce, found '" + a.op + "'"});
    o.op = a.op;
    auto mn = zerosim::parse_size(a.min, "--min");
    if (!mn) return input_error(be, mn.error());
    auto mx = zerosim::parse_size(a.max, "--max");
    if (!mx) return input_error(be, mx.error());
    if (*mx < *mn) return input_error(be, {"", "--max", "is smaller than --min"});
    auto dt = parse_bench_dtype(a.dtype);
    if (!dt) return input_error(be, dt.error());
    if (a.redop != "sum" && a.redop != "max") return input_error(be, {"", "--redop", "expected sum or max, found '" + a.redop + "'"});
    if (a.root < 0 || a.root >= be.world()) return input_error(be, {"", "--root", "expected a rank below " + std::to_string(be.world())});
    if (a.iters < 1 || a.warmup < 0) return input_error(be, {"", "--iters", "expected at least 1 iteration"});
    if (a.factor < 2) return input_error(be, {"", "--step-factor", "expected a factor of at least 2"});
    o.min_bytes = mn.value();
    o.max_bytes = mx.value();
    o.dtype = dt.value();
    o.redop = a.redop == "max" ? ReduceOp::Max : ReduceOp::Sum;
    o.factor = a.factor;
    o.iters = a.iters;
    o.warmup = a.warmup;
    o.root = a.root;
    o.check = a.check != 0;
    o.fenced = a.fenced;
    if (a.fresh_buffers && !a.fenced) return input_error(be, {"", "--fresh-buffers", "needs --fenced (single calls)"});
    o.fresh_buffers = a.fresh_buffers;
    if (a.evict == "0") {
        o.evict_bytes = 0;   // warm caches
    } else {
        auto ev = zerosim::parse_size(a.evict, "--evict");
        if (!ev) return input_error(be, ev.error());
        o.evict_bytes = ev.value();
    }
    o.test_corrupt_rank = a.corrupt_rank;
    auto rows = run_bench(be, o, std::cout);
    return bench_wrong_total(rows) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    // MPI always: it starts the job, and the NCCL backend runs over it (unique id, barrier, logs).
    std::unique_ptr<Backend> mpi_be = make_mpi_backend(&argc, &argv);
    std::unique_ptr<Backend> nccl_be;
    Backend* be = mpi_be.get();
    auto finish = [&] {
        nccl_be.reset();
        finalize_mpi();
    };
    std::string backend;   // --backend; empty: the default

    CLI::App app{"zerorun: the real ZeRO runtime (run it under mpirun, one process per rank)"};
    app.require_subcommand(0, 1);
    app.set_version_flag("--version", "zerorun 0.1.0 (DeepSpeed releases 0.14.2 to 0.19.5, default 0.19.5; backend mpi)");

    RunArgs ra;
    app.add_option("--ds-config", ra.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize");
    app.add_option("--model", ra.model, "Hugging Face config.json or a parameter-list JSON");
    app.add_option("--deepspeed", ra.deepspeed, "DeepSpeed release whose schedule to run, 0.14.2 to 0.19.5 (default: 0.19.5)");
    app.add_option("--schedule", ra.schedule, "Run this schedule IR (zerosim schedule --format json) instead of building one");
    app.add_option("--steps", ra.steps, "Optimizer steps to run")->capture_default_str()->check(integer_in(1, INT32_MAX));
    app.add_option("--seq-len", ra.seq_len, "Sequence length for compute segments (default: the model's, else 1024)")
        ->check(integer_in(1));
    app.add_option("--gpus-per-node", ra.gpus_per_node, "Ranks per node DeepSpeed sees (device_count()): qgZ's node groups")
        ->check(integer_in(1));
    app.add_option("-o,--output", ra.output, "rank 0's comms_logger lines and summary (default: standard output)");
    app.add_option("--json", ra.json, "JSON log of every op on every rank (written by rank 0)");
    app.add_option("--compute-scale", ra.compute_scale, "Fraction of each compute segment's FLOPs run as real GEMMs (0: none)")
        ->capture_default_str()
        ->check(finite_at_least(0));
    app.add_flag("--sync-each-op", ra.sync_each_op, "Finish every op before the next starts (DeepSpeed comms_logger timing)");
    app.add_option("--evict-before-op", ra.evict_before_op,
                   "With --sync-each-op: bytes each rank writes over before each collective prepares its buffers, so "
                   "the op finds the host caches as a training step's compute leaves them (0: off)")
        ->capture_default_str();
    app.add_option("--op-time", ra.op_time,
                   "Op time in the comms_logger lines: rank (rank 0's own call, as DeepSpeed logs it) or skew-free "
                   "(shortest call over ranks: the collective without waiting for late ranks)")
        ->capture_default_str();
    app.add_option("--timeout", ra.timeout_s, "Seconds without progress before every rank is stopped")
        ->capture_default_str()
        ->check(finite_at_least(0, true));
    // --lr is a float: a finite double past FLT_MAX would become inf in it.
    app.add_option("--lr", ra.lr, "Adam learning rate")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& text) {
                auto v = zerosim::parse_real_flag(text, "", 0, false);
                if (!v) return v.error().message;
                if (*v > std::numeric_limits<float>::max()) return "expected a number a float holds (at most 3.4e38), found '" + text + "'";
                return std::string();
            },
            ""));
    app.add_option("--seed", ra.seed, "Seed of initial weights and loss targets")->capture_default_str()->check(integer_in(0));
    app.add_option("--max-ops", ra.max_ops, "Refuse a schedule estimated to hold more ops than this")
        ->capture_default_str()
        ->check(integer_in(1));
    app.add_option("--max-memory", ra.max_memory, "Refuse a schedule estimated to take more memory than this (default 4G)");
    app.add_flag("--no-verify", ra.no_verify, "Skip checking collective results (no full-model reference state)");
    app.add_option("--dump-weights", ra.dump_weights, "Each rank writes its fp32 master partition to PREFIX.rank<N>.bin");
    app.add_option("--backend", backend, "nccl or mpi (default: nccl when a CUDA device is visible, else mpi)")
        ->check(CLI::IsMember({"nccl", "mpi"}));
    bool return_freed = false;   // --return-freed-memory (host_memory.cpp)
    const char* return_freed_help =
        "Let the C library return freed host memory to the kernel (its default); without it zerorun keeps it, so no "
        "collective times page faults on its scratch (docs/runtime.md)";
    app.add_flag("--return-freed-memory", return_freed, return_freed_help);
    app.add_flag("--quiet", ra.quiet, "No memory report on standard output");
    app.add_option("--bench-between-steps", ra.bench_between.prefix,
                   "With --sync-each-op: before each step and after the last, a fenced bench round of all_reduce, "
                   "all_gather, reduce_scatter and broadcast appended to PREFIX-<op>.txt (calibration in the run's conditions)");
    app.add_option("--bench-min", ra.bench_between.min, "Smallest size of a between-steps round")->capture_default_str();
    app.add_option("--bench-max", ra.bench_between.max, "Largest size of a between-steps round")->capture_default_str();
    app.add_option("--bench-factor", ra.bench_between.factor, "Size multiplier of a between-steps round")
        ->capture_default_str()
        ->check(integer_in(2));
    app.add_option("--bench-evict", ra.bench_between.evict,
                   "Bytes each rank writes over before every call of a round, so it finds cold caches (0: warm, as the "
                   "timed ops find them when no compute runs between them)")
        ->capture_default_str();
    app.add_flag("--bench-fresh-buffers", ra.bench_between.fresh_buffers,
                 "Give every call of a round buffers allocated, zeroed and filled just before it, as the run gives each "
                 "op of a step (with --bench-evict 0: the caches as the timed ops find them)");
    app.add_option("--bench-every", ra.bench_between.every, "A between-steps round before every N-th step (and after the last)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
    app.add_option("--bench-iters", ra.bench_between.iters, "Timed calls per size and column in each round (their median)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
    // Hidden (empty group): make one rank fail on purpose, for the fault tests.
    app.add_option("--test-fail-rank", ra.test_fail_rank)->group("")->check(integer_in(-1, INT32_MAX));
    app.add_option("--test-fail-op", ra.test_fail_op)->group("")->check(integer_in(-1));
    app.add_option("--test-fail-mode", ra.test_fail_mode)->group("");

    BenchArgs ba;
    auto* bench = app.add_subcommand("bench", "Sweep one collective over sizes; print an nccl-tests table");
    bench->add_option("--op", ba.op, "all_reduce, all_gather, reduce_scatter, broadcast or reduce")->capture_default_str();
    bench->add_option("-b,--min", ba.min, "Smallest size in bytes (K, M, G suffixes)")->capture_default_str();
    bench->add_option("-e,--max", ba.max, "Largest size in bytes")->capture_default_str();
    bench->add_option("-f,--step-factor", ba.factor, "Size multiplier between rows")->capture_default_str()->check(integer_in(2));
    bench->add_option("-n,--iters", ba.iters, "Timed calls per size")->capture_default_str()->check(integer_in(1, INT32_MAX));
    bench->add_option("-w,--warmup", ba.warmup, "Untimed calls per size")->capture_default_str()->check(integer_in(0, INT32_MAX));
    bench->add_option("-d,--dtype", ba.dtype, "float, half, bfloat16, double, int64, uint8")->capture_default_str();
    bench->add_option("-o,--redop", ba.redop, "sum or max")->capture_default_str();
    bench->add_option("-r,--root", ba.root, "Root of broadcast and reduce")->capture_default_str()->check(integer_in(0, INT32_MAX));
    bench->add_option("-c,--check", ba.check, "Check every result (1) or not (0)")->capture_default_str()->check(integer_in(0, 1));
    bench->add_flag("--fenced", ba.fenced,
                    "Time single calls each after a barrier, as zerorun --sync-each-op does (default: back-to-back, as nccl-tests)");
    bench->add_option("--evict", ba.evict,
                      "With --fenced: bytes each rank writes over before every call, so it finds cold caches as an op "
                      "inside a training step does (0: warm)")
        ->capture_default_str();
    bench->add_flag("--fresh-buffers", ba.fresh_buffers,
                    "With --fenced: allocate, zero and fill each call's buffers just before it, as zerorun gives each op "
                    "of a step (after --evict's writes); no warm-up call and the column DeepSpeed calls timed first, so each "
                    "timed call is the first at its size (--check 0: the check's own call would come before it)");
    bench->add_option("--backend", backend, "nccl or mpi (default: nccl when a CUDA device is visible, else mpi)")
        ->check(CLI::IsMember({"nccl", "mpi"}));
    bench->add_flag("--return-freed-memory", return_freed, return_freed_help);
    bench->add_option("--test-corrupt-rank", ba.corrupt_rank)->group("")->check(integer_in(-1, INT32_MAX));

    int code = 1;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version are requests; anything else is the one error line, exit 2.
        int c = 0;
        if (e.get_exit_code() == 0) {
            if (be->rank() == 0) app.exit(e);
            c = zerosim::check_standard_output("zerorun");
        } else {
            c = zerosim::print_input_error("zerorun", zerosim::command_line_error(e.what()), be->rank() == 0);
        }
        finalize_mpi();
        return c;
    }
    if (!return_freed) keep_freed_host_memory();
    // The backend: as asked, else NCCL when a GPU is visible. One line on stderr says which.
    std::string why_default;
    if (backend.empty()) {
        std::string no_gpu = gpu_unavailable_reason();
        backend = no_gpu.empty() ? "nccl" : "mpi";
        why_default = no_gpu.empty() ? "default: a CUDA device is visible" : "default: " + no_gpu;
    }
    if (be->rank() == 0)
        std::cerr << "# zerorun: backend " << backend << " (" << (why_default.empty() ? "--backend" : why_default) << ")\n";
    if (backend == "nccl") {
        try {
            nccl_be = make_nccl_backend(*mpi_be, ra.timeout_s);
            be = nccl_be.get();
        } catch (const NcclInitError& e) {
            if (*e.what()) std::cerr << "zerorun: error: --backend nccl: " << e.what() << '\n';
            std::cerr.flush();
            finish();
            return 2;
        } catch (const std::exception& e) {
            std::cerr << "zerorun: error: rank " << be->rank() << ": --backend nccl: " << e.what() << '\n';
            be->abort(2);
        }
    }
    try {
        if (app.got_subcommand(bench)) code = run_bench_cmd(*be, ba);
        else code = run_zero(*be, ra);
    } catch (const std::bad_alloc&) {
        std::cerr << "zerorun: error: rank " << be->rank() << ": out of memory\n";
        be->abort(zerosim::kExitRuntimeFault);
    } catch (const std::exception& e) {
        std::cerr << "zerorun: error: rank " << be->rank() << ": " << e.what() << '\n';
        be->abort(zerosim::kExitRuntimeFault);
    }
    int out_rc = code ? 0 : zerosim::check_standard_output("zerorun");
    finish();
    return code ? code : out_rc;
}
