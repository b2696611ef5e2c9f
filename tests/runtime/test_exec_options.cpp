// The executor's typed options (executor/options.hpp) and its contract with the IR: zerorun refuses
// a schedule file whose ops disagree with its own partition layout before any rank executes it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "executor/options.hpp"
#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "runtime_test_helpers.hpp"
#include "schedule/schedule.hpp"

namespace {

using zerorun::ExecOptions;
using zerorun::OpTime;
using zerorun::TestHooks;

std::string error_of(const ExecOptions& o) {
    auto e = zerorun::check_exec_options(o);
    return e ? e->what() : "";
}

}  // namespace

TEST(ExecOptions, NamesRoundTripAndUnknownNamesAreRefused) {
    for (OpTime t : {OpTime::Rank, OpTime::SkewFree}) EXPECT_EQ(zerorun::op_time_from_name(zerorun::op_time_name(t)), t);
    EXPECT_STREQ(zerorun::op_time_name(OpTime::SkewFree), "skew-free");
    EXPECT_FALSE(zerorun::op_time_from_name("fastest"));
    for (auto m : {TestHooks::Mode::Exit, TestHooks::Mode::Hang, TestHooks::Mode::Delay})
        EXPECT_EQ(zerorun::test_fail_mode_from_name(zerorun::test_fail_mode_name(m)), m);
    EXPECT_FALSE(zerorun::test_fail_mode_from_name("crash"));
}

TEST(ExecOptions, NumbersOutOfRangeNameTheFlag) {
    ExecOptions o;
    EXPECT_EQ(error_of(o), "");
    o.compute_scale = 0;   // no GEMMs at all is allowed
    o.timeout_s = 0;       // no watchdog is allowed
    EXPECT_EQ(error_of(o), "");
    o.compute_scale = -0.5;
    EXPECT_EQ(error_of(o), "field '--compute-scale': expected a fraction >= 0");
    o.compute_scale = 1;
    o.timeout_s = -1;
    EXPECT_EQ(error_of(o), "field '--timeout': expected seconds >= 0 (0 turns the watchdog off)");
    o.timeout_s = 60;
    o.lr = 0;
    EXPECT_EQ(error_of(o), "field '--lr': expected a positive learning rate");
}

// --evict-before-op (issue 20): a size >= 0, and only with --sync-each-op, where no op overlaps the
// next (an eviction while an op is in flight would slow that op, not prepare the next).
TEST(ExecOptions, EvictBeforeOpNeedsSyncEachOp) {
    ExecOptions o;
    o.evict_before_op = 1 << 20;
    EXPECT_EQ(error_of(o), "field '--evict-before-op': needs --sync-each-op (an op overlapping the next would evict its caches)");
    o.sync_each_op = true;
    EXPECT_EQ(error_of(o), "");
    o.evict_before_op = -1;
    EXPECT_EQ(error_of(o), "field '--evict-before-op': expected a size >= 0");
    o.evict_before_op = 0;
    o.sync_each_op = false;
    EXPECT_EQ(error_of(o), "");
}

// A stage-1 schedule whose partition gather sends one element more than the layout's partition:
// every rank reads the same file, rank 0 says which op, zerorun exits 2 without executing.
TEST(ExecOptions, ZerorunRefusesAScheduleThatBreaksItsLayout) {
    auto cfg = zerosim::load_ds_config(zerorun_test::fixture("configs/z1.json"));
    auto model = zerosim::load_model(zerorun_test::fixture("tiny_model.json"));
    ASSERT_TRUE(cfg.ok() && model.ok());
    zerosim::ScheduleOptions o;
    o.world = 2;
    auto s = zerosim::build_schedule(model.value(), cfg.value(), o);
    ASSERT_TRUE(s.ok());
    int64_t k = -1;
    for (auto& op : s->ops)
        if (op.payload == zerosim::Payload::ParameterPartitions) {
            op.elements += 1;
            k = op.id;
            break;
        }
    ASSERT_GE(k, 0);
    std::string path = std::filesystem::path(::testing::TempDir()) / ("layout-broken-" + std::to_string(getpid()) + ".json");
    {
        std::ofstream f(path);
        zerosim::write_schedule_json(f, s.value());
    }
    auto r = zerorun_test::mpirun_program(2, ZERORUN_BINARY, "--schedule " + path);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: " + path + ": field 'ops[" + std::to_string(k) + "]': group 0's partition has"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(zerorun_test::count_lines_starting(r.out, "zerorun:"), 1) << r.out;
}
