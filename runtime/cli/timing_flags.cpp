// zerorun's flags of how the run times its ops, and of the bench rounds between its steps
// (calibration in the run's conditions, between_steps.hpp).
#include "flags.hpp"

namespace zerorun {

void add_timing_flags(CLI::App& app, RunArgs& ra) {
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
}

void add_between_steps_flags(CLI::App& app, RunArgs& ra) {
    BetweenStepsArgs& b = ra.bench_between;
    app.add_option("--bench-between-steps", b.prefix,
                   "With --sync-each-op: before each step and after the last, a fenced bench round of all_reduce, "
                   "all_gather, reduce_scatter and broadcast appended to PREFIX-<op>.txt (calibration in the run's conditions)")
        ->check(output_file());
    app.add_option("--bench-min", b.min, "Smallest size of a between-steps round")->capture_default_str();
    app.add_option("--bench-max", b.max, "Largest size of a between-steps round")->capture_default_str();
    app.add_option("--bench-factor", b.factor, "Size multiplier of a between-steps round")->capture_default_str()->check(integer_in(2));
    app.add_option("--bench-evict", b.evict,
                   "Bytes each rank writes over before every call of a round, so it finds cold caches (0: warm, as the "
                   "timed ops find them when no compute runs between them)")
        ->capture_default_str();
    app.add_flag("--bench-fresh-buffers", b.fresh_buffers,
                 "Give every call of a round buffers allocated, zeroed and filled just before it, as the run gives each "
                 "op of a step (with --bench-evict 0: the caches as the timed ops find them)");
    app.add_option("--bench-every", b.every, "A between-steps round before every N-th step (and after the last)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
    app.add_option("--bench-iters", b.iters, "Timed calls per size and column in each round (their median)")
        ->capture_default_str()
        ->check(integer_in(1, INT32_MAX));
}

}  // namespace zerorun
