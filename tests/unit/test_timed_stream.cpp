// A long run timed by period (prediction/timed_stream.hpp) against the same run with every step
// simulated: the independent way to the same figures is the engine run on the whole schedule.
// Every op's start and end in both timings, every step's figures and the run's totals must agree
// to a nanosecond; a template whose timing has not settled, or whose steps overlap, is refused.
#include <cmath>
#include <sstream>

#include "prediction/gathered_budget.hpp"
#include "prediction/predict_outputs.hpp"
#include "prediction/timed_stream.hpp"
#include "schedule/stream.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"
#include "inline_inputs.hpp"
#include "stream_cases.hpp"

namespace zerosim {
namespace {

using namespace stream_cases;

constexpr double kNs = 1e-9;

Topology topology(const std::string& name = "dgx-h100", int64_t nodes = 0) {
    auto t = load_topology(test::config("../topologies/" + name + ".json"), nodes);
    EXPECT_TRUE(t.ok());
    return t.value();
}

struct Timed {
    Prediction logged, overlapped;
};

Timed time_whole(const Schedule& s, const Topology& t, int64_t budget) {
    auto lg = simulate(s, t, TimingMode::Synchronized);
    auto ov = simulate(s, t, TimingMode::Overlapped, budget);
    EXPECT_TRUE(lg.ok() && ov.ok());
    return {lg.value(), ov.value()};
}

void expect_same_timing(const OpTiming& a, const OpTiming& b, const char* mode, int64_t id, int& bad) {
    const bool same = std::fabs(a.start_s - b.start_s) <= kNs && std::fabs(a.end_s - b.end_s) <= kNs &&
                      a.algorithm == b.algorithm && a.protocol == b.protocol && a.simulated == b.simulated;
    if (!same && ++bad <= 3)
        ADD_FAILURE() << mode << " op " << id << ": " << a.start_s << ".." << a.end_s << " by period, " << b.start_s << ".."
                      << b.end_s << " with every step simulated";
}

void expect_same_steps(const Prediction& run, const Prediction& whole) {
    ASSERT_EQ(run.steps.size(), whole.steps.size());
    for (size_t k = 0; k < run.steps.size(); ++k) {
        const StepTiming &a = run.steps[k], &b = whole.steps[k];
        EXPECT_EQ(a.step, b.step);
        EXPECT_NEAR(a.start_s, b.start_s, kNs) << "step " << b.step;
        EXPECT_NEAR(a.end_s, b.end_s, kNs) << "step " << b.step;
        EXPECT_NEAR(a.compute_s, b.compute_s, kNs) << "step " << b.step;
        EXPECT_NEAR(a.exposed_comm_s, b.exposed_comm_s, kNs) << "step " << b.step;
        EXPECT_EQ(a.gathered_peak_bytes, b.gathered_peak_bytes) << "step " << b.step;
    }
    EXPECT_NEAR(run.total_s, whole.total_s, kNs);
    EXPECT_NEAR(run.allocator_stall_s, whole.allocator_stall_s, kNs);
    EXPECT_EQ(run.resident_peak_bytes, whole.resident_peak_bytes);
}

// One case timed both ways on `t`.
void check_case(const Case& c, int steps, int64_t budget, const Topology& t = topology()) {
    auto model = model_of(c);
    ASSERT_TRUE(model.ok()) << model.error().what();
    const DsConfig cfg = test::ds(c.config);
    auto stream = ScheduleStream::open(model.value(), cfg, options(c, steps));
    ASSERT_TRUE(stream.ok()) << stream.error().what();
    ASSERT_TRUE(stream->repeats());
    const Timed held = time_whole(stream->held(), t, budget);
    auto timed = time_by_period(stream.value(), held.logged, held.overlapped);
    ASSERT_TRUE(timed.ok()) << timed.error().what();
    auto whole = build_schedule(model.value(), cfg, options(c, steps));
    ASSERT_TRUE(whole.ok());
    const Timed every = time_whole(whole.value(), t, budget);
    size_t i = 0;
    int bad = 0;
    timed->each_op([&](const Op& op, const OpTiming& lg, const OpTiming& ov) {
        ASSERT_LT(i, whole->ops.size());
        EXPECT_TRUE(op == whole->ops[i]) << "op " << i;
        expect_same_timing(lg, every.logged.ops[i], "synchronized", op.id, bad);
        expect_same_timing(ov, every.overlapped.ops[i], "overlapped", op.id, bad);
        ++i;
    });
    EXPECT_EQ(i, whole->ops.size());
    EXPECT_EQ(bad, 0);
    expect_same_steps(timed->logged_run, every.logged);
    expect_same_steps(timed->overlapped_run, every.overlapped);
}

TEST(TimedStream, EveryOpAndStepAsEveryStepSimulated) {
    for (const Case& c : cases()) {
        if (c.pipe > 1) continue;   // a pipeline's stages are simulated together, whole (predict's choice)
        for (int steps : {7, 12}) {
            SCOPED_TRACE(c.name + ", " + std::to_string(steps) + " steps");
            check_case(c, steps, INT64_MAX);
        }
    }
}

TEST(TimedStream, HostStallsOnTheGatheredBudgetAddUpAsEveryStepSimulated) {
    // Llama-2-70B at stage 3 on four A100-40GB nodes, as predict budgets it: no room on the GPU for
    // gathered parameters beside the rest of the memory model, so each gather waits for the buffers
    // before it and the host stalls in every step (checked on the whole run's last step, so that the
    // case means something).
    const Case c{"stage3-70b", "llama-2-70b.json",
                 R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})", 32};
    const Topology t = topology("aws-p4d", 4);
    auto model = model_of(c);
    ASSERT_TRUE(model.ok());
    const DsConfig cfg = test::ds(c.config);
    auto whole = build_schedule(model.value(), cfg, options(c, 8));
    ASSERT_TRUE(whole.ok());
    const int64_t budget = gathered_parameter_budget(model.value(), cfg, whole.value(), t);
    auto every = simulate(whole.value(), t, TimingMode::Overlapped, budget);
    ASSERT_TRUE(every.ok());
    ASSERT_GT(every->steps.back().allocator_stall_s, 0.0) << "the budget should make the host stall in the last step";
    check_case(c, 8, budget, t);
}

// A template whose fourth step is not its third moved by a period, or whose steps overlap, is
// refused: the run cannot be told from it.
TEST(TimedStream, ATemplateNotSettledOrWithOverlappingStepsIsRefused) {
    const Case c = cases()[3];   // stage 2
    auto model = model_of(c);
    ASSERT_TRUE(model.ok());
    auto stream = ScheduleStream::open(model.value(), test::ds(c.config), options(c, 10));
    ASSERT_TRUE(stream.ok());
    const Timed held = time_whole(stream->held(), topology(), INT64_MAX);
    ASSERT_TRUE(time_by_period(stream.value(), held.logged, held.overlapped).ok());

    const auto step4 = static_cast<size_t>(stream->template_step_start(kTemplateSteps - 2));
    Timed drifting = held;
    drifting.overlapped.ops[step4 + 1].end_s += 1e-6;   // one op of step 4 a microsecond longer
    auto a = time_by_period(stream.value(), drifting.logged, drifting.overlapped);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("not settled"), std::string::npos) << a.error().message;

    Timed overlapping = held;   // the last step's first op starts before step 4 has ended
    const auto step5 = static_cast<size_t>(stream->template_step_start(kTemplateSteps - 1));
    overlapping.logged.ops[step5].start_s = overlapping.logged.ops[step5 - 1].end_s - 1e-3;
    EXPECT_FALSE(time_by_period(stream.value(), overlapping.logged, overlapping.overlapped).ok());
}

// The writers take each op once, in order: the CSV by period has the whole run's rows and ids.
TEST(TimedStream, TheCsvWriterHasEveryOpOfTheRun) {
    const Case c = cases()[5];   // stage 3
    auto model = model_of(c);
    ASSERT_TRUE(model.ok());
    const Topology t = topology();
    auto stream = ScheduleStream::open(model.value(), test::ds(c.config), options(c, 20));
    ASSERT_TRUE(stream.ok());
    const Timed held = time_whole(stream->held(), t, INT64_MAX);
    auto timed = time_by_period(stream.value(), held.logged, held.overlapped);
    ASSERT_TRUE(timed.ok());
    PredictReport r{stream->held(), t, timed->logged_run, timed->overlapped_run, nullptr, ""};
    r.timed = &timed.value();
    std::ostringstream out;
    write_predicted_csv(out, r);
    std::istringstream in(out.str());
    std::string line;
    std::getline(in, line);   // the header
    int64_t rows = 0;
    while (std::getline(in, line)) {
        EXPECT_EQ(line.substr(0, line.find(',')), std::to_string(rows)) << "row " << rows;
        ++rows;
    }
    EXPECT_EQ(rows, stream->op_count());
    EXPECT_GT(rows, 2 * static_cast<int64_t>(stream->held().ops.size()));   // past the template
}

}  // namespace
}  // namespace zerosim
