// What would settle an INCONCLUSIVE verdict when the prediction's own standard error (its
// calibration's) spans the tolerance: the repeats and calibration rounds grown together
// (validate/noise.cpp judge_repeats). Keys are set by hand so that every figure is derived here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "validate/noise.hpp"
#include "validate/prediction_error.hpp"

using namespace zerosim;

namespace {

// One key with no error, measured over 20 steps, whose measured part of the standard error is
// `paired_floor` / sqrt(20) (no per-op spread), predicted with standard error `pred_se` from
// `rounds` calibration rounds.
RepeatReport one_key(double paired_floor, double pred_se, size_t rounds) {
    RepeatReport r;
    r.logs = 1;
    r.repeats = 20;
    r.unit = "steps";
    r.tolerance = 0.15;
    RepeatKey k;
    k.op = "reduce_scatter_tensor";
    k.bytes = 2668544;
    k.ops = 20;
    k.repeats = 20;
    k.pred_ms = k.meas_ms = 2.0;
    k.paired_floor = paired_floor;
    k.pred_se = pred_se;
    k.pred_rounds = rounds;
    r.keys.push_back(k);
    r.prediction_error_given = true;
    judge_repeats(r);
    return r;
}

}  // namespace

TEST(NoiseSettle, CalibrationAloneLimitsThenStepsAndRoundsTogetherSettleIt) {
    // Measurement exact, prediction se 10% from 6 rounds. Half-width t(19) * 10% = 20.9% >
    // ln 1.15 = 13.98%: INCONCLUSIVE, and no number of steps alone settles it (the 10% stays).
    // Grown together by f = n / 20, the half-width is t(n-1) * 10% / sqrt(f): n = 41 gives
    // t(40) = 1.95996 + 2.3722/40 + 3.1/1600 = 2.0212, 2.0212 * 10% / sqrt(2.05) = 14.12% > 13.98%;
    // n = 42 gives t(41) = 2.0197, 2.0197 * 10% / sqrt(2.1) = 13.94%: settled (PASS side).
    // Rounds: ceil(2.1 * 6) = 13.
    RepeatReport r = one_key(0.0, 0.10, 6);
    EXPECT_EQ(r.verdict, "INCONCLUSIVE");
    EXPECT_EQ(r.repeats_needed, 0u);
    EXPECT_TRUE(r.needs_calibration);
    EXPECT_EQ(r.joint_repeats_needed, 42u);
    EXPECT_NEAR(r.calibration_factor, 2.1, 1e-12);
    EXPECT_EQ(r.calibration_rounds, 6u);
    EXPECT_EQ(r.calibration_rounds_needed, 13u);
    const std::string m = repeat_verdict_meaning(r);
    EXPECT_NE(m.find("no number of steps would settle it alone"), std::string::npos) << m;
    EXPECT_NE(m.find("about 42 steps with 13 calibration rounds (now 6) would"), std::string::npos) << m;
}

TEST(NoiseSettle, MeasurementAndPredictionShrinkTogether) {
    // Measured part 20% / sqrt(20) = 4.47%, prediction 10%: se = hypot(4.47%, 10%) = 10.95%,
    // t(19) * 10.95% = 22.9%: INCONCLUSIVE; steps alone leave t * 10% >= 19.6% > 13.98%.
    // Together: 10.95% * t(n-1) / sqrt(n / 20) <= 13.98% first at n = 50 (t(49) = 2.00966,
    // 2.00952 * 10.954% / sqrt(2.5) = 13.92%; n = 49: t(48) = 2.01073, / sqrt(2.45) = 14.07%).
    // Rounds ceil(2.5 * 6) = 15.
    RepeatReport r = one_key(0.20, 0.10, 6);
    EXPECT_EQ(r.verdict, "INCONCLUSIVE");
    EXPECT_TRUE(r.needs_calibration);
    EXPECT_EQ(r.joint_repeats_needed, 50u);
    EXPECT_EQ(r.calibration_rounds_needed, 15u);
}

TEST(NoiseSettle, StepsAloneSettleItWhenThePredictionIsExactEnough) {
    // Prediction se 2%: steps alone settle it (the existing count), nothing asked of the calibration.
    RepeatReport r = one_key(0.40, 0.02, 6);
    EXPECT_EQ(r.verdict, "INCONCLUSIVE");
    EXPECT_GT(r.repeats_needed, 20u);
    EXPECT_FALSE(r.needs_calibration);
    EXPECT_EQ(r.joint_repeats_needed, 0u);
    EXPECT_EQ(r.calibration_rounds_needed, 0u);
}

TEST(NoiseSettle, RoundsComeFromThePredictionErrorFileAndAFractionHasNone) {
    RepeatReport r = one_key(0.0, 0.0, 0);
    PredictionError pe;
    PredictionErrorRange small{"reduce_scatter", 0, 256 << 10, 0.02, 5, 6};
    PredictionErrorRange large{"reduce_scatter", 256 << 10, 0, 0.10, 5, 6};
    pe.ranges = {small, large};
    apply_prediction_error(r, pe);
    ASSERT_EQ(r.keys.size(), 1u);
    EXPECT_EQ(r.keys[0].pred_rounds, 6u);
    EXPECT_NEAR(r.keys[0].pred_se, 0.10, 1e-12);
    EXPECT_EQ(r.calibration_rounds_needed, 13u);   // as the first test
    // A uniform fraction has no rounds: the meaning gives the factor and the standard error
    // that would settle it (10% / sqrt(2.1) = 6.9%).
    PredictionError frac;
    frac.uniform = 0.10;
    apply_prediction_error(r, frac);
    EXPECT_EQ(r.keys[0].pred_rounds, 0u);
    EXPECT_EQ(r.calibration_rounds, 0u);
    EXPECT_EQ(r.joint_repeats_needed, 42u);
    const std::string m = repeat_verdict_meaning(r);
    EXPECT_NE(m.find("about 42 steps with a calibration 2.1x as many rounds (standard error 6.9%) would"), std::string::npos) << m;
}
