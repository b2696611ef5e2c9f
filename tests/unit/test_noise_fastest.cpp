// A FAIL whose fastest calls match the prediction (validate/noise.cpp fast_error): the slow calls
// are the machine's (a preempted rank holds its peers until the scheduler runs it again), which
// the verdict's meaning says; a prediction off for every call gets no such sentence. Logs built
// by hand, figures derived here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "formats/measured_logs.hpp"
#include "validate/noise.hpp"

using namespace zerosim;

namespace {

// 20 steps of 2 all_reduce calls of 1 MiB; `time_of(i)` the i-th call's time in ms.
MeasuredLog two_calls_per_step(const std::function<double(int)>& time_of, const std::string& path) {
    MeasuredLog l;
    l.path = path;
    for (int i = 0; i < 40; ++i) {
        LoggedOp o;
        o.record = "all_reduce";
        o.bytes = 1 << 20;
        o.size_text = ds_size_string(o.bytes);
        o.time_ms = time_of(i);
        o.phase = "step" + std::to_string(i / 2) + ".micro0.backward";
        o.line = i + 1;
        l.ops.push_back(o);
    }
    return l;
}

}  // namespace

TEST(NoiseFastest, PreemptedCallsFailButTheFastestMatch) {
    // Calls with i % 10 in {0, 1, 2} take the predicted 1 ms, the others 3 ms. Per step (calls
    // 2s, 2s+1) the median is 1, 2, 3, 3, 3 ms for s % 5 = 0..4: log ratios 0, ln 2, ln 3 x 3,
    // mean 0.7978, error exp(-0.7978) - 1 = -55.0%; sd over the 20 steps 0.4398, se 0.0984,
    // t(19) 2.093: |error| in [44.7%, 63.3%], above 15%: FAIL. The 10th percentile of the 40 calls'
    // ratios is the 5th smallest, a 1 ms call: fast error 0.
    MeasuredLog pred = two_calls_per_step([](int) { return 1.0; }, "pred");
    MeasuredLog meas = two_calls_per_step([](int i) { return i % 10 < 3 ? 1.0 : 3.0; }, "meas");
    RepeatReport r = repeat_stats(pred, {&meas}, 0.15);
    ASSERT_EQ(r.keys.size(), 1u);
    EXPECT_EQ(r.verdict, "FAIL");
    EXPECT_NEAR(r.keys[0].error, std::exp(-0.79779) - 1, 1e-4);
    EXPECT_NEAR(r.error_lo, 0.447, 0.002);
    EXPECT_NEAR(r.error_hi, 0.633, 0.002);
    EXPECT_DOUBLE_EQ(r.fast_error, 0.0);
    EXPECT_TRUE(r.fast_explains);
    const std::string m = repeat_verdict_meaning(r);
    EXPECT_NE(m.find("the model is off for this machine's state; yet its fastest calls are within 15.0% (error 0.0%)"),
              std::string::npos)
        << m;
}

TEST(NoiseFastest, APredictionOffForEveryCallGetsNoExcuse) {
    // Every call 3 ms against 1 ms predicted: error and fast error both 1/3 - 1 = -66.7%.
    MeasuredLog pred = two_calls_per_step([](int) { return 1.0; }, "pred");
    MeasuredLog meas = two_calls_per_step([](int) { return 3.0; }, "meas");
    RepeatReport r = repeat_stats(pred, {&meas}, 0.15);
    EXPECT_EQ(r.verdict, "FAIL");
    EXPECT_NEAR(r.fast_error, -2.0 / 3.0, 1e-12);
    EXPECT_FALSE(r.fast_explains);
    EXPECT_EQ(repeat_verdict_meaning(r).find("fastest"), std::string::npos);
    // Predicted too slow (measured faster everywhere): the fastest calls cannot excuse that either.
    MeasuredLog fast = two_calls_per_step([](int i) { return i % 10 < 3 ? 0.3 : 1.0 / 3.0; }, "fast");
    RepeatReport q = repeat_stats(pred, {&fast}, 0.15);
    EXPECT_EQ(q.verdict, "FAIL");
    EXPECT_FALSE(q.fast_explains);
}
