// Verdicts that know the measurement's noise (issue 20): synthetic measured logs of known bias and
// noise, from a seeded generator, over many seeds so that a rule that judged noise as error (or
// error as noise) would fail here. Noise "s" is the relative standard deviation of a single op's
// time; each run also drifts as a whole by s / 3 (another moment of the machine).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>

#include "formats/measured_logs.hpp"
#include "validate/diff.hpp"
#include "validate/noise.hpp"

using namespace zerosim;

namespace {

// One configuration: per step, 2 ops of each of 4 keys (op kind, bytes, true time in ms).
struct KeySpec {
    const char* record;
    int64_t bytes;
    double ms;
};
const KeySpec kKeys[] = {{"all_reduce", 1 << 20, 1.0}, {"all_reduce", 2 << 20, 1.8}, {"all_gather", 512 << 10, 0.6},
                         {"reduce_scatter", 4 << 20, 3.0}};

MeasuredLog make_log(int steps, const std::function<double(double)>& time_of, const std::string& path) {
    MeasuredLog l;
    l.path = path;
    for (int s = 0; s < steps; ++s)
        for (int rep = 0; rep < 2; ++rep)
            for (const auto& k : kKeys) {
                LoggedOp o;
                o.record = k.record;
                o.bytes = k.bytes;
                o.size_text = ds_size_string(k.bytes);
                o.time_ms = time_of(k.ms);
                o.phase = "step" + std::to_string(s) + ".micro0.backward";
                o.line = static_cast<int>(l.ops.size() + 1);
                l.ops.push_back(o);
            }
    return l;
}

// The predicted log (true times x (1 + bias)) and `runs` measured ones of `steps` steps each.
RepeatReport judge(double bias, double noise, unsigned seed, int runs = 5, int steps = 4, double tolerance = 0.15) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> z(0.0, 1.0);
    MeasuredLog pred = make_log(steps, [&](double ms) { return ms * (1 + bias); }, "pred");
    std::vector<MeasuredLog> meas;
    for (int r = 0; r < runs; ++r) {
        double drift = std::max(0.2, 1 + noise / 3 * z(rng));
        meas.push_back(make_log(steps, [&](double ms) { return ms * drift * std::max(0.05, 1 + noise * z(rng)); },
                                "run" + std::to_string(r)));
    }
    std::vector<const MeasuredLog*> ptrs;
    for (const auto& m : meas) ptrs.push_back(&m);
    return repeat_stats(pred, ptrs, tolerance);
}

struct Tally {
    int pass = 0, fail = 0, inconclusive = 0;
};
Tally tally(double bias, double noise, int seeds, int runs = 5) {
    Tally t;
    for (int s = 0; s < seeds; ++s) {
        std::string v = judge(bias, noise, 1000u + static_cast<unsigned>(s), runs).verdict;
        (v == "PASS" ? t.pass : v == "FAIL" ? t.fail : t.inconclusive)++;
    }
    return t;
}

}  // namespace

TEST(NoiseVerdict, TwentyPercentBiasUnderFivePercentNoiseFails) {
    // Ten runs of four steps pin the medians within about 2%: the 20% error is the model's.
    Tally t = tally(0.20, 0.05, 100, 10);
    EXPECT_EQ(t.pass, 0);
    EXPECT_GE(t.fail, 97) << t.inconclusive << " inconclusive";
    // Five runs: never a PASS, mostly a FAIL already.
    Tally five = tally(0.20, 0.05, 100, 5);
    EXPECT_EQ(five.pass, 0);
    EXPECT_GE(five.fail, 60);
}

TEST(NoiseVerdict, NoBiasUnderThirtyPercentNoiseIsInconclusiveNeverPass) {
    // Three runs of four steps: the medians are known to about +-25%, wider than the tolerance.
    Tally t = tally(0.0, 0.30, 200, 3);
    EXPECT_EQ(t.pass, 0);
    EXPECT_EQ(t.fail, 0);
    EXPECT_EQ(t.inconclusive, 200);
    // Five runs pin the medians to about +-16%, at the tolerance's edge: still not a PASS but in
    // the rare draw whose spread came out small (a 95% interval is wrong 1 time in 40 per side).
    Tally five = tally(0.0, 0.30, 200, 5);
    EXPECT_LE(five.pass, 4);
    EXPECT_EQ(five.fail, 0);
}

TEST(NoiseVerdict, NoBiasUnderThreePercentNoisePasses) {
    for (int runs : {5, 10}) {
        Tally t = tally(0.0, 0.03, 100, runs);
        EXPECT_GE(t.pass, 98) << runs << " runs";
        EXPECT_EQ(t.fail, 0) << runs << " runs";
    }
}

TEST(NoiseVerdict, InconclusiveSaysHowManyRepeatsWouldSettleIt) {
    // 5% bias under 30% noise: 3 runs cannot tell.
    RepeatReport r = judge(0.05, 0.30, 7, 3);
    ASSERT_EQ(r.verdict, "INCONCLUSIVE");
    EXPECT_GT(r.repeats_needed, r.repeats);
    EXPECT_NE(repeat_verdict_meaning(r).find("would settle it"), std::string::npos);
    // Measured that many times, the same configuration is settled in most seeds.
    int settled = 0;
    for (unsigned s = 0; s < 20; ++s)
        if (judge(0.05, 0.30, 300 + s, static_cast<int>(r.repeats_needed)).verdict != "INCONCLUSIVE") ++settled;
    EXPECT_GE(settled, 10);
}

TEST(NoiseVerdict, FloorAndSpreadMeasureTheNoiseThatWasInjected) {
    // Per-op spread: MAD of a normal = 0.6745 sd; floor: the run drift (sd/3) plus the median's
    // own noise over 8 ops (1.2533 sd / sqrt(8)), combined in quadrature.
    RepeatReport r = judge(0.0, 0.10, 42, 30, 4);
    EXPECT_NEAR(r.mad, 0.6745 * 0.10, 0.015);
    double expect_floor = std::hypot(0.10 / 3, 1.2533 * 0.10 / std::sqrt(8.0));
    EXPECT_NEAR(r.floor, expect_floor, 0.4 * expect_floor);
    EXPECT_EQ(r.repeats, 30u);
    EXPECT_EQ(r.unit, "runs");
}

TEST(NoiseVerdict, OneLogsStepsAreTheRepeats) {
    std::mt19937_64 rng(5);
    std::normal_distribution<double> z(0.0, 1.0);
    MeasuredLog pred = make_log(12, [](double ms) { return ms; }, "pred");
    MeasuredLog meas = make_log(12, [&](double ms) { return ms * (1 + 0.03 * z(rng)); }, "meas");
    RepeatReport r = repeat_stats(pred, {&meas}, 0.15);
    EXPECT_EQ(r.unit, "steps");
    EXPECT_EQ(r.repeats, 12u);
    EXPECT_EQ(r.verdict, "PASS");
    // Through the diff report: the repeats' verdict is the report's, and the row carries it.
    DiffReport d = diff_logs(pred, meas, 0.15, DiffScope::All);
    d.repeats = r;
    EXPECT_TRUE(d.pass());
    std::ostringstream row;
    write_diff_row(row, d);
    EXPECT_NE(row.str().find("\tPASS\t12\t"), std::string::npos) << row.str();
}

TEST(NoiseVerdict, StudentQuantilesFollowTheTable) {
    EXPECT_NEAR(student_t975(1), 12.706, 1e-3);
    EXPECT_NEAR(student_t975(4), 2.776, 1e-3);
    EXPECT_NEAR(student_t975(40), 2.021, 2e-3);
    EXPECT_NEAR(student_t975(120), 1.980, 2e-3);
    EXPECT_TRUE(std::isinf(student_t975(0)));
}

TEST(NoiseVerdict, APredictionThatFollowsTheMeasurementCarriesNoneOfItsNoise) {
    // A noisy log against itself (no error at all) and against itself doubled (100% everywhere):
    // the comparison is paired per repeat, so the log's own 30% noise makes neither uncertain.
    std::mt19937_64 rng(11);
    std::normal_distribution<double> z(0.0, 1.0);
    MeasuredLog meas = make_log(4, [&](double ms) { return ms * std::max(0.05, 1 + 0.30 * z(rng)); }, "meas");
    MeasuredLog doubled = meas;
    for (auto& o : doubled.ops) o.time_ms *= 2;
    RepeatReport same = repeat_stats(meas, {&meas}, 0.15);
    EXPECT_EQ(same.verdict, "PASS");
    EXPECT_DOUBLE_EQ(same.error, 0.0);
    RepeatReport twice = repeat_stats(doubled, {&meas}, 0.15);
    EXPECT_EQ(twice.verdict, "FAIL");
    EXPECT_NEAR(twice.error, 1.0, 1e-9);
    EXPECT_NEAR(twice.error_lo, 1.0, 1e-9);
}
