// `zerorun bench`: one collective swept over sizes (collbench/bench.hpp), its flags and their checks.
#include <atomic>
#include <iostream>

#include "collbench/bench.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "executor/watchdog.hpp"
#include "flags.hpp"

namespace zerorun {

namespace {

// Every rank reads the same flags and fails the same way; rank 0 says it once.
int bench_flag_error(Backend& be, const zerosim::Error& e) { return zerosim::print_input_error("zerorun", e, be.rank() == 0); }

// The flags as CLI11 filled them, checked, as the harness's options; or the error naming the flag.
zerosim::Result<BenchOptions> bench_options(Backend& be, const BenchArgs& a) {
    BenchOptions o;
    if (!bench_op_known(a.op))
        return zerosim::Error{"", "--op", "expected all_reduce, all_gather, reduce_scatter, broadcast or reduce, found '" + a.op + "'"};
    o.op = a.op;
    auto mn = zerosim::parse_size(a.min, "--min");
    if (!mn) return mn.error();
    auto mx = zerosim::parse_size(a.max, "--max");
    if (!mx) return mx.error();
    if (*mx < *mn) return zerosim::Error{"", "--max", "is smaller than --min"};
    auto dt = parse_bench_dtype(a.dtype);
    if (!dt) return dt.error();
    if (a.redop != "sum" && a.redop != "max") return zerosim::Error{"", "--redop", "expected sum or max, found '" + a.redop + "'"};
    if (a.root < 0 || a.root >= be.world()) return zerosim::Error{"", "--root", "expected a rank below " + std::to_string(be.world())};
    if (a.iters < 1 || a.warmup < 0) return zerosim::Error{"", "--iters", "expected at least 1 iteration"};
    if (a.factor < 2) return zerosim::Error{"", "--step-factor", "expected a factor of at least 2"};
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
    if (a.fresh_buffers && !a.fenced) return zerosim::Error{"", "--fresh-buffers", "needs --fenced (single calls)"};
    o.fresh_buffers = a.fresh_buffers;
    if (a.evict == "0") {
        o.evict_bytes = 0;   // warm caches
    } else {
        auto ev = zerosim::parse_size(a.evict, "--evict");
        if (!ev) return ev.error();
        o.evict_bytes = ev.value();
    }
    o.test_corrupt_rank = a.corrupt_rank;
    return o;
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchArgs& ba, ProcessArgs& pa) {
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
    bench->add_option("--timeout", ba.timeout_s,
                      "Seconds without a finished call before every rank is stopped (a peer that stopped)")
        ->capture_default_str()
        ->check(finite_at_least(0, true));
    add_process_flags(*bench, pa);
    bench->add_option("--test-corrupt-rank", ba.corrupt_rank)->group("")->check(integer_in(-1, INT32_MAX));
    return bench;
}

int run_bench_command(Backend& be, const BenchArgs& a) {
    auto o = bench_options(be, a);
    if (!o) return bench_flag_error(be, o.error());
    // The run's watchdog (executor/watchdog.hpp): a peer that stops answering leaves this rank in a
    // call; after --timeout seconds with no call finished every rank is stopped, exit 3.
    install_termination_report(be.rank());
    std::atomic<int64_t> bytes{0};
    Watchdog dog(be, a.timeout_s, [&] { return "bench " + a.op + " of " + std::to_string(bytes.load()) + " bytes"; });
    o->on_call = [&](int64_t b) {
        bytes.store(b);
        dog.progress();
    };
    set_current_op(-1, "bench");
    auto rows = run_bench(be, o.value(), std::cout);
    dog.stop();
    return bench_wrong_total(rows) ? 1 : 0;
}

}  // namespace zerorun
