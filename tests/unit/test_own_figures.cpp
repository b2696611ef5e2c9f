// DeepSpeed's own figures (formats/wall_clock_log.hpp), what its timers would read of a timed
// schedule (timing/phase_spans.hpp) and the verdict on them (validate/phase_times.hpp): real
// throughput lines from ../shared/reference, a profiler summary laid out as profiler.py prints it,
// spans and intervals worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "formats/wall_clock_log.hpp"
#include "test_helpers.hpp"
#include "timing/phase_spans.hpp"
#include "validate/phase_times.hpp"

using namespace zerosim;

namespace {

std::string line_of(const std::string& path, int n) {
    std::ifstream in(path);
    std::string line;
    for (int i = 0; i < n && std::getline(in, line); ++i) {
    }
    return line;
}

}  // namespace

// z1_seed_w4/rank0.log line 235, read by eye: the one throughput line of the three-step run.
TEST(OwnFigures, RealThroughputLineReadsAndWritesBackAsDeepSpeedPrintedIt) {
    const std::string path = test::reference("deepspeed-v0.14.2-cpu/z1_seed_w4/rank0.log");
    auto log = read_deepspeed_figures(path);
    ASSERT_TRUE(log) << log.error().what();
    EXPECT_TRUE(log->micro.empty());   // wall_clock_breakdown false in its config
    ASSERT_EQ(log->throughput.size(), 1u);
    const ThroughputLine& t = log->throughput[0];
    EXPECT_EQ(t.line, 235);
    EXPECT_EQ(t.epoch, 0);
    EXPECT_EQ(t.micro_step, 3);
    EXPECT_EQ(t.global_step, 3);
    EXPECT_DOUBLE_EQ(t.samples_per_s, 36.93766340417896);
    EXPECT_DOUBLE_EQ(t.running_avg_samples_per_s, 36.93766340417896);
    EXPECT_DOUBLE_EQ(t.mem_allocated_gib, 0.29);
    EXPECT_DOUBLE_EQ(t.max_mem_allocated_gib, 0.29);
    // The writer gives back the text after the logger's prefix, character for character.
    const std::string real = line_of(path, 235);
    const std::string tail = real.substr(real.find("epoch="));
    EXPECT_EQ(throughput_text(t), tail);
}

TEST(OwnFigures, TimerLinesOfBothKindsAndTheProfilerSummary) {
    const std::string text =
        "[2026-12-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 76.67 | bwd_microstep: "
        "108.02 | bwd_inner_microstep: 100.00 | bwd_allreduce_microstep: 8.00 | step_microstep: 0.03\n"
        "[2026-12-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd: 76.67 | bwd: 108.02 | bwd_inner: 100.00 "
        "| bwd_allreduce: 8.00 | step: 0.03\n"
        "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n"
        "Profile Summary at step 10:\n"
        "Notations:\ndata parallel size (dp_size), model parallel size(mp_size),\n\n"
        "world size:                                                             1       \n"
        "data parallel size:                                                     1       \n"
        "batch size per GPU:                                                     80      \n"
        "params per GPU:                                                         336.23 M\n"
        "fwd MACs per GPU:                                                       3139.93 GMACs\n"
        "fwd flops per GPU:                                                      6279.86 G\n"
        "fwd latency:                                                            76.67 ms\n"
        "fwd FLOPS per GPU = fwd flops per GPU / fwd latency:                    81.9 TFLOPS\n"
        "bwd latency:                                                            108.02 ms\n"
        "step latency:                                                           34.09 us\n"
        "iter latency:                                                           184.73 ms\n"
        "samples/second:                                                         433.07  \n"
        "[Rank 0] time (ms) | batch_input: 1.20 | pipe_send_output: 0.50\n";
    auto log = parse_deepspeed_figures("run.log", text);
    ASSERT_TRUE(log) << log.error().what();
    ASSERT_EQ(log->micro.size(), 1u);
    EXPECT_DOUBLE_EQ(log->micro[0].bwd_inner_ms, 100.0);
    EXPECT_DOUBLE_EQ(log->micro[0].step_ms, 0.03);
    ASSERT_EQ(log->steps.size(), 1u);
    EXPECT_DOUBLE_EQ(log->steps[0].bwd_allreduce_ms, 8.0);
    ASSERT_EQ(log->profiles.size(), 1u);
    const FlopsProfile& p = log->profiles[0];
    EXPECT_EQ(p.step, 10);
    EXPECT_EQ(p.world, 1);
    EXPECT_EQ(p.batch_per_gpu, 80);
    EXPECT_NEAR(p.params_per_gpu, 336.23e6, 1);
    EXPECT_NEAR(p.fwd_flops_per_gpu, 6279.86e9, 1e3);
    EXPECT_DOUBLE_EQ(p.fwd_ms, 76.67);
    EXPECT_DOUBLE_EQ(p.bwd_ms, 108.02);
    EXPECT_NEAR(p.step_ms, 0.03409, 1e-12);
    EXPECT_DOUBLE_EQ(p.iter_ms, 184.73);
    EXPECT_DOUBLE_EQ(p.samples_per_s, 433.07);
    // The pipeline engine's timers are named, not dropped.
    ASSERT_EQ(log->other_timers.size(), 2u);
    EXPECT_EQ(log->other_timers[0], "batch_input");
}

TEST(OwnFigures, ContradictoryOrUnreadableFiguresAreOneLineRefusals) {
    const std::string tput = "[INFO] [timer.py:260:stop] epoch=0/micro_step=3/global_step=3, RunningAvgSamplesPerSec=";
    auto nan = parse_deepspeed_figures("run.log", tput + "nan, CurrSamplesPerSec=1.0, MemAllocated=1.0GB, MaxMemAllocated=2.0GB\n");
    ASSERT_FALSE(nan);
    EXPECT_NE(nan.error().what().find("RunningAvgSamplesPerSec"), std::string::npos);
    auto peak = parse_deepspeed_figures("run.log", tput + "1.0, CurrSamplesPerSec=1.0, MemAllocated=3.0GB, MaxMemAllocated=2.0GB\n");
    ASSERT_FALSE(peak);
    EXPECT_NE(peak.error().what().find("MaxMemAllocated"), std::string::npos);
    auto unit = parse_deepspeed_figures("run.log", tput + "1.0, CurrSamplesPerSec=1.0, MemAllocated=3.0, MaxMemAllocated=4.0GB\n");
    ASSERT_FALSE(unit);
    auto part = parse_deepspeed_figures("run.log", "time (ms) | fwd: 1.00 | bwd: 2.00 | bwd_inner: 5.00\n");
    ASSERT_FALSE(part);
    auto latency = parse_deepspeed_figures("run.log", "----- DeepSpeed Flops Profiler -----\nfwd latency: 76.67 parsecs\n");
    ASSERT_FALSE(latency);
    EXPECT_NE(latency.error().what().find("fwd latency"), std::string::npos);
    auto none = parse_deepspeed_figures("run.log", "[INFO] step 1 loss 2.3\n");
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());
    EXPECT_FALSE(parse_wall_clock_log("run.log", "[INFO] step 1 loss 2.3\n"));
}

// By hand: forward compute 0-10 ms; the host issued a backward gather ahead (5-12 ms on the fetch
// stream); backward compute 12-30 ms; its last reduction 25-34 ms on the reduce stream; the step
// 34-40 ms. fwd = 10; bwd starts when the compute stream is done with the forward (10, not the
// gather's 5): inner 10..30 = 20, whole 10..34 = 24; step 6.
TEST(PhaseSpans, WhatTheTimersReadOfOneMicroStep) {
    auto op = [](Phase ph, Stream st, OpKind k) {
        Op o;
        o.kind = k;
        o.phase = ph;
        o.stream = st;
        o.step = 0;
        o.micro = ph == Phase::Step ? -1 : 0;
        return o;
    };
    auto at = [](double a_ms, double b_ms) {
        OpTiming t;
        t.start_s = a_ms / 1e3;
        t.end_s = b_ms / 1e3;
        t.simulated = true;
        return t;
    };
    std::vector<MicroStepSpans> got;
    PhaseSpanCounter c([&](const MicroStepSpans& m) { got.push_back(m); });
    c.add(op(Phase::Forward, Stream::Compute, OpKind::Compute), at(0, 10));
    c.add(op(Phase::Backward, Stream::Fetch, OpKind::AllGather), at(5, 12));
    c.add(op(Phase::Backward, Stream::Compute, OpKind::Compute), at(12, 30));
    c.add(op(Phase::Backward, Stream::Reduce, OpKind::ReduceScatter), at(25, 34));
    c.add(op(Phase::Step, Stream::Compute, OpKind::Compute), at(34, 40));
    Op next = op(Phase::Forward, Stream::Compute, OpKind::Compute);
    next.step = 1;
    c.add(next, at(40, 50));
    ASSERT_EQ(got.size(), 1u);   // the second micro step is still open
    EXPECT_NEAR(got[0].fwd_ms, 10.0, 1e-9);
    EXPECT_NEAR(got[0].bwd_inner_ms, 20.0, 1e-9);
    EXPECT_NEAR(got[0].bwd_ms, 24.0, 1e-9);
    EXPECT_NEAR(got[0].step_ms, 6.0, 1e-9);
    EXPECT_TRUE(got[0].last_micro);
    c.finish();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].step, 1);
    EXPECT_NEAR(got[1].fwd_ms, 10.0, 1e-9);
}

namespace {

// A log of micro-step lines, one per step, forward times as given (backward 2x).
WallClockLog timers(const std::string& name, const std::vector<double>& fwd) {
    WallClockLog log;
    log.source = name;
    int line = 0;
    for (double f : fwd) {
        WallClockMicroStep m;
        m.line = ++line;
        m.fwd_ms = f;
        m.bwd_ms = 2 * f;
        log.micro.push_back(m);
    }
    return log;
}

}  // namespace

// Worked by hand, tolerance 15%, the first step of each log left out:
//   the same times: error 0, PASS;
//   measured 1.3x the prediction every step: error 1/1.3 - 1 = -23.08%, no spread, FAIL;
//   measured 100 e^{+0.1}, 100, 100 e^{-0.1} against 100: mean log ratio 0, sd 0.1, se 0.1/sqrt 3,
//   t(2) = 4.303: half-width 0.2484, interval [e^-0.2484 - 1, e^0.2484 - 1] = [-22.0%, +28.2%],
//   INCONCLUSIVE.
TEST(PhaseVerdict, PassFailAndInconclusiveFromTheStepsByHand) {
    auto same = compare_phases(timers("p", {500, 100, 100, 100}), timers("m", {900, 100, 100, 100}), 0.15);
    ASSERT_TRUE(same) << same.error().message;
    EXPECT_EQ(same->verdict, "PASS");
    EXPECT_EQ(same->warmup_steps, 1u);
    ASSERT_GE(same->rows.size(), 2u);
    EXPECT_EQ(same->rows[0].quantity, "fwd_microstep");
    EXPECT_EQ(same->rows[0].repeats, 3u);

    auto slow = compare_phases(timers("p", {500, 100, 100, 100}), timers("m", {900, 130, 130, 130}), 0.15);
    ASSERT_TRUE(slow);
    EXPECT_EQ(slow->verdict, "FAIL");
    EXPECT_NEAR(slow->rows[0].error, -0.230769, 1e-5);

    const double e = std::exp(0.1);
    auto noisy = compare_phases(timers("p", {500, 100, 100, 100}), timers("m", {900, 100 * e, 100, 100 / e}), 0.15);
    ASSERT_TRUE(noisy);
    EXPECT_EQ(noisy->verdict, "INCONCLUSIVE");
    EXPECT_NEAR(noisy->rows[0].error, 0.0, 1e-9);
    EXPECT_NEAR(noisy->rows[0].lo, -0.2200, 2e-4);
    EXPECT_NEAR(noisy->rows[0].hi, 0.2820, 2e-4);
}

TEST(PhaseVerdict, NothingInCommonIsARefusalNamingWhatEachLogHolds) {
    WallClockLog pred = timers("pred.log", {100, 100});
    WallClockLog meas;
    meas.source = "run.log";
    ThroughputLine t;
    t.samples_per_s = 10;
    meas.throughput.push_back(t);
    auto r = compare_phases(pred, meas, 0.15);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("1 throughput lines"), std::string::npos);
    EXPECT_NE(r.error().message.find("2 micro-step timer lines"), std::string::npos);
}

// pipe/engine.py's progress line, with an additional loss between (its agg_additional_losses).
TEST(OwnFigures, ThePipelineEnginesProgressLine) {
    auto log = parse_deepspeed_figures("run.log", "steps: 10 loss: 2.3456 moe_loss: 0.0120 iter time (s): 1.234 samples/sec: 414.911\n");
    ASSERT_TRUE(log) << log.error().what();
    ASSERT_EQ(log->pipe_progress.size(), 1u);
    EXPECT_EQ(log->pipe_progress[0].step, 10);
    EXPECT_DOUBLE_EQ(log->pipe_progress[0].iter_s, 1.234);
    EXPECT_DOUBLE_EQ(log->pipe_progress[0].samples_per_s, 414.911);
    auto bad = parse_deepspeed_figures("run.log", "steps: 10 loss: 2.3 iter time (s): -1.0 samples/sec: 4.0\n");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().what().find("iter time"), std::string::npos);
    PipeProgressLine p;
    p.step = 20, p.iter_s = 40.6877, p.samples_per_s = 37.7509;
    EXPECT_EQ(pipe_progress_text(p), "steps: 20 loss: nan iter time (s): 40.688 samples/sec: 37.751");
}
