// calibrate --deepspeed-log (validate/compute_fit.hpp, formats/wall_clock_log.hpp): the GEMM
// efficiency recovered from wall_clock_breakdown lines whose times are worked out by hand for a
// known efficiency, and the logs it must refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "inline_inputs.hpp"
#include "test_helpers.hpp"
#include "validate/compute_fit.hpp"

using namespace zerosim;

namespace {

// Four layers of one 8192 x 8192 weight: GEMM-bound on an H100 (2·tokens·h² FLOPs against 2·h² bytes).
Model square_layers() {
    std::string params;
    for (int k = 0; k < 4; ++k)
        params += std::string(k ? "," : "") + R"({"name": "layers.)" + std::to_string(k) + R"(.fc.weight", "shape": [8192, 8192]})";
    return test::param_list(R"({"seq_len": 1024, "parameters": [)" + params + "]}");
}

// By hand, at efficiency e on dgx-h100's bf16 peak (989.4 TFLOP/s): forward 4 layers x 2 x 4096
// tokens x 8192² FLOPs, backward twice that.
std::string log_at(double e, int steps) {
    const double fwd_ms = 4 * 2.0 * 4096 * 8192.0 * 8192.0 / (989.4e12 * e) * 1e3;
    std::string log = "[2026-12-01 10:00:00,000] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to cuda\n";
    char line[512];
    for (int s = 0; s < steps; ++s) {
        std::snprintf(line, sizeof line,
                      "[2026-12-01 10:00:0%d,000] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: %.2f | "
                      "bwd_microstep: %.2f | bwd_inner_microstep: %.2f | bwd_allreduce_microstep: 0.00 | step_microstep: 3.10\n",
                      s, fwd_ms * (s == 0 ? 3 : 1), 2 * fwd_ms + 1.5, 2 * fwd_ms);
        log += line;
    }
    return log;
}

Topology dgx_h100() {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json", 1);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

}  // namespace

TEST(ComputeFit, RecoversTheEfficiencyTheLogWasMadeAt) {
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
    const Schedule s = test::build(square_layers(), c, 8, 2);
    for (double e : {0.35, 0.62}) {
        SCOPED_TRACE("efficiency " + std::to_string(e));
        auto log = parse_wall_clock_log("run.log", log_at(e, 4));
        ASSERT_TRUE(log.ok()) << log.error().what();
        auto fit = fit_compute_efficiency(s, dgx_h100(), log.value());   // the topology says 0.5
        ASSERT_TRUE(fit.ok()) << fit.error().what();
        EXPECT_EQ(fit->lines, 3u);   // the first step's warm-up line left out
        EXPECT_DOUBLE_EQ(fit->efficiency_before, 0.5);
        EXPECT_NEAR(fit->efficiency, e, 0.02 * e);
        EXPECT_NEAR(fit->predicted_fwd_ms, fit->measured_fwd_ms, 0.02 * fit->measured_fwd_ms);
        EXPECT_NEAR(fit->predicted_bwd_ms, fit->measured_bwd_ms, 0.02 * fit->measured_bwd_ms);
    }
}

TEST(ComputeFit, MissingOrContradictoryLinesAreOneLineRefusals) {
    auto none = parse_wall_clock_log("run.log", "[INFO] step 1 loss 2.3\n");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(std::string(none.error().what()).find("wall_clock_breakdown"), std::string::npos);
    auto inner_over = parse_wall_clock_log(
        "run.log", "x\n[Rank 0] time (ms) | fwd_microstep: 10.00 | bwd_microstep: 20.00 | bwd_inner_microstep: 25.00\n");
    ASSERT_FALSE(inner_over.ok());
    EXPECT_NE(std::string(inner_over.error().what()).find("line 2"), std::string::npos) << inner_over.error().what();
    auto no_bwd = parse_wall_clock_log("run.log", "[Rank 0] time (ms) | fwd_microstep: 10.00 | step_microstep: 1.00\n");
    ASSERT_FALSE(no_bwd.ok());
    EXPECT_NE(std::string(no_bwd.error().what()).find("bwd_microstep"), std::string::npos);
    for (const char* bad : {"nan", "-3.00", "1,5", "12.00ms"}) {
        auto r = parse_wall_clock_log("run.log", std::string("[Rank 0] time (ms) | fwd_microstep: ") + bad + " | bwd_microstep: 2.00\n");
        EXPECT_FALSE(r.ok()) << bad;
    }
    // A log faster than the GPU's peak allows is not of this model: refused, not fitted to e > 1.
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
    const Schedule s = test::build(square_layers(), c, 8, 2);
    auto fast = parse_wall_clock_log("run.log", log_at(1.6, 3));
    ASSERT_TRUE(fast.ok());
    auto fit = fit_compute_efficiency(s, dgx_h100(), fast.value());
    ASSERT_FALSE(fit.ok());
    EXPECT_NE(std::string(fit.error().what()).find("peak"), std::string::npos) << fit.error().what();
}

// By hand: stage 0 on one rank, the optimizer step is Adam over all 4 x 8192² fp32 elements, 28
// bytes each (read weight, gradient, two moments; write weight and moments), memory-bound: at
// memory efficiency 0.6 of the H100's 3350 GB/s, 4 x 8192² x 28 / (3350e9 x 0.6) = 3.739 ms. A log
// whose step_microstep says so gives 0.6 back (within 2%: the kernel launches add microseconds);
// one whose step is below what even full bandwidth allows leaves the term as it was, saying why.
TEST(ComputeFit, TheMemoryBoundEfficiencyFromTheOptimizerStep) {
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}})");
    const Schedule s = test::build(square_layers(), c, 1, 2);
    const double step_ms = 4 * 8192.0 * 8192.0 * 28 / (3350e9 * 0.6) * 1e3;
    auto with_step = [&](double ms) {
        std::string log = log_at(0.4, 4);
        std::string out;
        size_t at = 0, hit;
        char v[32];
        std::snprintf(v, sizeof v, "%.2f", ms);
        while ((hit = log.find("step_microstep: 3.10", at)) != std::string::npos) {
            out += log.substr(at, hit - at) + "step_microstep: " + v;
            at = hit + 20;
        }
        return out + log.substr(at);
    };
    auto log = parse_wall_clock_log("run.log", with_step(step_ms));
    ASSERT_TRUE(log.ok()) << log.error().what();
    auto fit = fit_compute_efficiency(s, dgx_h100(), log.value());
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_NEAR(fit->efficiency, 0.4, 0.02 * 0.4);
    ASSERT_TRUE(fit->mem_fitted) << fit->mem_note;
    EXPECT_DOUBLE_EQ(fit->mem_efficiency_before, 0.8);
    EXPECT_NEAR(fit->mem_efficiency, 0.6, 0.02 * 0.6);

    auto fast = parse_wall_clock_log("run.log", with_step(step_ms * 0.5));   // faster than 3350 GB/s allows
    ASSERT_TRUE(fast.ok());
    auto none = fit_compute_efficiency(s, dgx_h100(), fast.value());
    ASSERT_TRUE(none.ok()) << none.error().what();
    EXPECT_FALSE(none->mem_fitted);
    EXPECT_DOUBLE_EQ(none->mem_efficiency, 0.8);
    EXPECT_NE(none->mem_note.find("outside"), std::string::npos);
}

// By hand, ZeRO-Offload (stage 2, offload_optimizer, one rank, bf16): the step is DeepSpeed's CPU
// Adam over the 4 x 8192² elements at the host's rate (28 bytes each) plus the partition's PCIe
// copies (fp32 gradients down, bf16 weights up: 6 bytes an element at dgx-h100's 400 Gb/s):
// at 10 GB/s, 4 x 8192² x (28 / 10e9 + 6 / 50e9) = 783.8 ms. The fit gives 10 GB/s back within 2%.
TEST(ComputeFit, TheHostsCpuAdamRateFromAnOffloadedStep) {
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})");
    const Schedule s = test::build(square_layers(), c, 1, 2);
    const double e = 4 * 8192.0 * 8192.0;
    const double step_ms = e * (28 / 10e9 + 6 / 50e9) * 1e3;
    std::string log = log_at(0.4, 4);
    char v[64];
    std::snprintf(v, sizeof v, "step_microstep: %.2f", step_ms);
    for (size_t at; (at = log.find("step_microstep: 3.10")) != std::string::npos;) log.replace(at, 20, v);
    auto parsed = parse_wall_clock_log("run.log", log);
    ASSERT_TRUE(parsed.ok()) << parsed.error().what();
    auto fit = fit_compute_efficiency(s, dgx_h100(), parsed.value());
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_EQ(fit->step_term, "host.cpu_adam_gbs");
    ASSERT_TRUE(fit->mem_fitted) << fit->mem_note;
    EXPECT_DOUBLE_EQ(fit->mem_efficiency_before, 20.0);
    EXPECT_NEAR(fit->mem_efficiency, 10.0, 0.02 * 10.0);
}
