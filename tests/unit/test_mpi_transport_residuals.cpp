// Calibration residuals per collective and size band (issue 20): the median over all rows can
// hide a misfit of the large rows, which are the ones the main job judges (ops >= 256 KiB).
#include <gtest/gtest.h>

#include "timing/topology.hpp"
#include "validate/calibrate.hpp"

using namespace zerosim;

TEST(CalibrationResidualBands, MediansBelowAndFromTheSplit) {
    FitResult f;
    // Three rows below 256 KiB (|r| 0.10, 0.30, 0.05: upper median 0.10) and two from it (0.20,
    // 0.50: upper median 0.50, as fit_topology's median_abs_error takes v[n / 2]).
    f.residuals = {0.10, -0.30, 0.05, 0.50, -0.20};
    f.residual_logged_bytes = {8192, 65536, 131072, 524288, 4194304};
    ResidualBands b = residual_bands(f, kResidualBandSplitBytes);
    EXPECT_EQ(b.rows_below, 3u);
    EXPECT_EQ(b.rows_from, 2u);
    EXPECT_DOUBLE_EQ(b.below, 0.10);
    EXPECT_DOUBLE_EQ(b.from, 0.50);
    // The split is inclusive from 256 KiB on.
    f.residual_logged_bytes[2] = 262144;
    b = residual_bands(f, kResidualBandSplitBytes);
    EXPECT_EQ(b.rows_below, 2u);
    EXPECT_DOUBLE_EQ(b.below, 0.30);
    EXPECT_DOUBLE_EQ(b.from, 0.20);
}

TEST(CalibrationResidualBands, EmptyBandIsZeroRows) {
    FitResult f;
    f.residuals = {0.1, 0.2};
    f.residual_logged_bytes = {8192, 16384};
    ResidualBands b = residual_bands(f, kResidualBandSplitBytes);
    EXPECT_EQ(b.rows_from, 0u);
    EXPECT_DOUBLE_EQ(b.from, 0.0);
    EXPECT_DOUBLE_EQ(b.below, 0.2);
}

// The rendezvous latency's own scale (docs/mpi-collectives.md). all_gather on 2 ranks of
// localhost.json is one step of S/2 (two_proc): by hand, with latency x1.5, rendezvous x2.5 and
// bandwidth x0.8, t(S) = 1.5 (5 + 2) + [S/2 >= 4096] 2.5 x 10 + (S/2) / (5000 B/us x 0.8) us.
// Rows on both sides of the eager limit give the three scales back; rows above it only tie the
// rendezvous scale to the latency scale (rendezvous_scale 0).
TEST(CalibrationRendezvous, ThreeScalesFromRowsOnBothSidesOfTheEagerLimit) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(t.ok()) << t.error().what();
    auto by_hand = [](double s, double a, double r, double bw) {
        return a * 7.0 + (s / 2 >= 4096 ? r * 10.0 : 0.0) + (s / 2) / (5000.0 * bw);
    };
    std::vector<Measurement> rows;
    for (int64_t s = 1024; s <= 65536; s *= 2) rows.push_back({OpKind::AllGather, s, by_hand(s, 1.5, 2.5, 0.8), 2, "by hand"});
    auto fit = fit_topology(t.value(), rows);
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_NEAR(fit->latency_scale, 1.5, 1.5e-6);
    EXPECT_NEAR(fit->rendezvous_scale, 2.5, 2.5e-6);
    EXPECT_NEAR(fit->bandwidth_scale, 0.8, 0.8e-6);
    EXPECT_LT(fit->median_abs_error, 1e-9);

    std::vector<Measurement> above;
    for (int64_t s = 8192; s <= 65536; s *= 2) above.push_back({OpKind::AllGather, s, by_hand(s, 1.5, 1.5, 0.8), 2, "by hand"});
    auto tied = fit_topology(t.value(), above);
    ASSERT_TRUE(tied.ok()) << tied.error().what();
    EXPECT_EQ(tied->rendezvous_scale, 0.0);
    EXPECT_NEAR(tied->latency_scale, 1.5, 1.5e-6);
    EXPECT_NEAR(tied->bandwidth_scale, 0.8, 0.8e-6);
}

// A third scale that comes out non-physical (rendezvous rows faster than the eager ones say: a
// noisy round) is refused, and the rendezvous latency is scaled with the others instead of the
// calibration failing; the fit says why.
TEST(CalibrationRendezvous, NegativeRendezvousScaleFallsBackToTheTiedFit) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(t.ok()) << t.error().what();
    std::vector<Measurement> rows;
    for (int64_t s = 1024; s <= 65536; s *= 2) {
        const double us = 10.5 + (s / 2 >= 4096 ? -5.0 : 0.0) + (s / 2) / 4000.0;   // 5 us less above the limit
        rows.push_back({OpKind::AllGather, s, us, 2, "by hand"});
    }
    auto fit = fit_topology(t.value(), rows);
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_EQ(fit->rendezvous_scale, 0.0);
    EXPECT_NE(fit->rendezvous_tied_why.find("rendezvous scale -"), std::string::npos) << fit->rendezvous_tied_why;
    EXPECT_GT(fit->latency_scale, 0.0);
    EXPECT_GT(fit->bandwidth_scale, 0.0);
}

// The bandwidth beyond the cache fitted on its own: all_gather on 2 ranks, 1 KiB-8 MiB, made by
// hand with latency x1.5, rendezvous x2.5, bandwidth x0.8 and x0.4 beyond the cache. A buffer S
// touches 1.5 S; from S = 2 MiB on, the share 1 - 2 MiB / 1.5 S of the S/2 bytes is beyond
// (2 MiB: 1/3; 4 MiB: 2/3; 8 MiB: 5/6), so e.g. t(4 MiB) = 10.5 + 25 + (2/3 MiB) / 4000 +
// (4/3 MiB) / 2000 us = 35.5 + 174.76 + 699.05 = 909.3 us.
TEST(CalibrationRendezvous, MemoryScaleFromRowsBeyondTheCache) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(t.ok()) << t.error().what();
    const double cache = 2097152;
    auto by_hand = [&](double s) {
        const double bytes = s / 2, set = 1.5 * s, beyond = set > cache ? bytes * (1 - cache / set) : 0;
        return 1.5 * 7.0 + (bytes >= 4096 ? 25.0 : 0.0) + (bytes - beyond) / 4000.0 + beyond / 2000.0;
    };
    EXPECT_NEAR(by_hand(4194304), 909.31, 0.01);
    std::vector<Measurement> rows;
    for (int64_t s = 1024; s <= (8 << 20); s *= 2) rows.push_back({OpKind::AllGather, s, by_hand(s), 2, "by hand"});
    auto fit = fit_topology(t.value(), rows);
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_NEAR(fit->latency_scale, 1.5, 1.5e-6);
    EXPECT_NEAR(fit->rendezvous_scale, 2.5, 2.5e-6);
    EXPECT_NEAR(fit->bandwidth_scale, 0.8, 0.8e-6);
    EXPECT_NEAR(fit->memory_scale, 0.4, 0.4e-6);
    EXPECT_TRUE(fit->memory_tied_why.empty()) << fit->memory_tied_why;
}
