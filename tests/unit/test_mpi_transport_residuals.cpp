// Calibration residuals per collective and size band (issue 20): the median over all rows can
// hide a misfit of the large rows, which are the ones the main job judges (ops >= 256 KiB).
#include <gtest/gtest.h>

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
