// Long schedules streamed step by step (schedule/stream.hpp): every op, host event and written
// byte the same as the generator's whole schedule, and the op-count guard counting exactly the
// ops it writes. The whole schedule here is the generator run on every step (build_schedule); the
// stream is its first four steps, repeated. Equal output from the two is what the stream promises.
#include <filesystem>
#include <sstream>

#include "formats/schedule_json.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "schedule/stream.hpp"
#include "inline_inputs.hpp"
#include "stream_cases.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

using namespace stream_cases;

// Every writer's text for a schedule, whole or streamed.
template <typename S>
std::string written(const S& s) {
    std::ostringstream out;
    DeepSpeedLogOptions d;
    d.log_summary = true;
    write_schedule_deepspeed(out, s, d);
    TableOptions t;
    t.compute = true;
    write_schedule_table(out, s, t);
    write_schedule_json(out, s);
    return out.str();
}

TEST(ScheduleStream, EveryOpHostEventAndByteAsTheWholeSchedule) {
    int repeating = 0;
    for (const Case& c : cases()) {
        auto model = model_of(c);
        ASSERT_TRUE(model.ok()) << c.name << ": " << model.error().what();
        const DsConfig cfg = test::ds(c.config);
        for (int steps : {7, 9}) {
            SCOPED_TRACE(c.name + ", " + std::to_string(steps) + " steps");
            auto whole = build_schedule(model.value(), cfg, options(c, steps));
            ASSERT_TRUE(whole.ok()) << whole.error().what();
            auto stream = ScheduleStream::open(model.value(), cfg, options(c, steps));
            ASSERT_TRUE(stream.ok()) << stream.error().what();
            repeating += stream->repeats() ? 1 : 0;
            ASSERT_EQ(stream->op_count(), static_cast<int64_t>(whole->ops.size()));
            ASSERT_EQ(stream->host_event_count(), static_cast<int64_t>(whole->host.size()));
            size_t i = 0, bad = 0;
            stream->each_op([&](const Op& op) { bad += i < whole->ops.size() && op == whole->ops[i++] ? 0 : 1; });
            EXPECT_EQ(bad, 0u) << "ops unlike the whole schedule's";
            i = 0;
            stream->each_host_event([&](const HostEvent& e) { bad += i < whole->host.size() && e == whole->host[i++] ? 0 : 1; });
            EXPECT_EQ(bad, 0u) << "host events unlike the whole schedule's";
            EXPECT_EQ(written(stream.value()), written(whole.value()));
        }
    }
    // The stream must really repeat on these (a stream that always built whole would pass the above).
    EXPECT_EQ(repeating, 2 * static_cast<int>(cases().size()));
}

TEST(ScheduleStream, EveryShippedConfigRepeatsAndWritesTheSame) {
    auto model = load_model(test::config("models/tiny-gpt.json"));
    ASSERT_TRUE(model.ok());
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test::config("deepspeed"))) {
        auto cfg = load_ds_config(entry.path().string());
        ASSERT_TRUE(cfg.ok()) << entry.path();
        if (!resolve_batch(cfg.value(), 4)) continue;   // a train batch 4 ranks cannot make
        SCOPED_TRACE(entry.path().string());
        Case c{"shipped", "tiny-gpt.json", ""};
        auto whole = build_schedule(model.value(), cfg.value(), options(c, 8));
        ASSERT_TRUE(whole.ok()) << whole.error().what();
        auto stream = ScheduleStream::open(model.value(), cfg.value(), options(c, 8));
        ASSERT_TRUE(stream.ok()) << stream.error().what();
        EXPECT_TRUE(stream->repeats());
        EXPECT_EQ(written(stream.value()), written(whole.value()));
        ++checked;
    }
    EXPECT_GE(checked, 6);
}

TEST(ScheduleStream, OverflowStepsAndShortRunsAreBuiltWhole) {
    auto model = load_model(test::config("models/tiny-gpt.json"));
    ASSERT_TRUE(model.ok());
    const DsConfig cfg = test::ds(zero(2, "", R"("fp16": {"enabled": true}, )"));
    Case c{"fp16", "tiny-gpt.json", ""};
    ScheduleOptions o = options(c, 8);
    o.overflow_steps = {3};
    auto s = ScheduleStream::open(model.value(), cfg, o);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_FALSE(s->repeats());
    auto whole = build_schedule(model.value(), cfg, o);
    ASSERT_TRUE(whole.ok());
    EXPECT_EQ(written(s.value()), written(whole.value()));
    auto short_run = ScheduleStream::open(model.value(), cfg, options(c, kTemplateSteps));
    ASSERT_TRUE(short_run.ok());
    EXPECT_FALSE(short_run->repeats());
}

// The op lines of `zerosim schedule --format table --compute`: every line but the header and the
// "# init/steps" totals.
int64_t table_op_lines(const Schedule& s) {
    std::ostringstream out;
    TableOptions t;
    t.compute = true;
    write_schedule_table(out, s, t);
    std::istringstream in(out.str());
    int64_t n = 0;
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] != '#') ++n;
    return n;
}

TEST(ScheduleStream, TheOpGuardCountsTheLinesTheScheduleWrites) {
    for (const Case& c : cases()) {
        auto model = model_of(c);
        ASSERT_TRUE(model.ok());
        const DsConfig cfg = test::ds(c.config);
        SCOPED_TRACE(c.name);
        auto whole = build_schedule(model.value(), cfg, options(c, 9));
        ASSERT_TRUE(whole.ok()) << whole.error().what();
        const int64_t lines = table_op_lines(whole.value());
        // One op under the count is refused, naming the count; at the count it builds.
        ScheduleOptions o = options(c, 9);
        o.max_ops = lines - 1;
        auto refused = build_schedule(model.value(), cfg, o);
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.error().field, "--max-ops");
        EXPECT_NE(refused.error().message.find("would have " + std::to_string(lines) + " ops"), std::string::npos)
            << refused.error().message;
        o.max_ops = lines;
        EXPECT_TRUE(build_schedule(model.value(), cfg, o).ok());
        auto streamed = ScheduleStream::open(model.value(), cfg, o);
        ASSERT_TRUE(streamed.ok());
        EXPECT_EQ(streamed->count().ops, lines);
    }
}

// The issue's case: 1,000 steps of Llama-2-70B at stage 3 were estimated at 7.38M ops for 2.28M.
// One step's ops, counted here from a one-step schedule, times the steps (the first step and the
// engine start apart) is what the guard must say.
TEST(ScheduleStream, LongRunCountedExactlyFromItsSteps) {
    auto model = load_model(test::config("models/llama-2-70b.json"));
    ASSERT_TRUE(model.ok());
    const DsConfig cfg =
        test::ds(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})");
    Case c{"70b", "llama-2-70b.json", "", 4096};
    auto five = build_schedule(model.value(), cfg, options(c, 5));
    auto six = build_schedule(model.value(), cfg, options(c, 6));
    ASSERT_TRUE(five.ok() && six.ok());
    const int64_t per_step = static_cast<int64_t>(six->ops.size() - five->ops.size());
    auto stream = ScheduleStream::open(model.value(), cfg, options(c, 1000));
    ASSERT_TRUE(stream.ok()) << stream.error().what();
    EXPECT_TRUE(stream->repeats());
    EXPECT_EQ(stream->op_count(), static_cast<int64_t>(five->ops.size()) + 995 * per_step);
    EXPECT_LT(stream->op_count(), 5'000'000);   // under the default --max-ops: no flag needed
}

}  // namespace
}  // namespace zerosim
