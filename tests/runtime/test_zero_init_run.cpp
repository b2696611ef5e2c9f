// zerorun on a --zero-init stage-3 schedule (issue 15): no engine-start broadcast brings rank 0's
// model to the others, because deepspeed.zero.Init broadcast each parameter as it was built; the
// run starts every rank from the real model and every collective's result checks out. The
// schedule file also carries the fetch throttle (ordering rule O7) in its deps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "runtime_test_helpers.hpp"
#include "schedule/schedule.hpp"

TEST(ZeroInitRun, StartsFromTheRealModelOnEveryRank) {
    auto cfg = zerosim::load_ds_config(zerorun_test::fixture("configs/z3.json"));
    auto model = zerosim::load_model(zerorun_test::fixture("tiny_model.json"));
    ASSERT_TRUE(cfg.ok() && model.ok());
    zerosim::ScheduleOptions o;
    o.world = 2;
    o.steps = 2;
    o.zero_init = true;
    auto s = zerosim::build_schedule(model.value(), cfg.value(), o);
    ASSERT_TRUE(s.ok()) << s.error().what();
    for (const auto& op : s->ops) ASSERT_NE(op.payload, zerosim::Payload::ParameterBroadcast) << op.id;
    std::string path = std::filesystem::path(::testing::TempDir()) / ("zero-init-" + std::to_string(getpid()) + ".json");
    {
        std::ofstream f(path);
        zerosim::write_schedule_json(f, s.value());
    }
    auto r = zerorun_test::mpirun_program(2, ZERORUN_BINARY, "--schedule " + path + " --compute-scale 0 --quiet -o /dev/null");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out.find("check failed"), std::string::npos) << r.out;
}
