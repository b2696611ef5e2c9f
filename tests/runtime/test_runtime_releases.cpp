// zerorun runs the schedule of the release it is given (--deepspeed; the newest without it): the
// ops a newer release adds (stage 3's 0-byte and 8-byte trace broadcasts, the bf16 has_overflow
// all_reduce of v0.19.3) execute with real MPI collectives, none wrong, one log line per op.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/comms_log.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "runtime_test_helpers.hpp"
#include "schedule/schedule.hpp"

using json = nlohmann::json;
using zerorun_test::fixture;

namespace {

std::string text_of(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Runs `config_json` (2 ranks, 2 steps) with --deepspeed `release` and checks the run against the
// library's schedule for that release; with `log_dist_line`, every comms_logger line's prefix too.
void run_release(const std::string& release, const std::string& name, const std::string& config_json,
                 int log_dist_line = 0) {
    std::string dir = ::testing::TempDir() + "zerorun-release-" + name + "-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::string cfg = dir + "/ds.json";
    std::ofstream(cfg) << config_json;
    auto r = zerorun_test::mpirun_program(2, ZERORUN_BINARY,
                                          "--deepspeed " + release + " --ds-config " + cfg + " --model " +
                                              fixture("tiny_model.json") + " --steps 2 --compute-scale 0 --timeout 20 --quiet -o " +
                                              dir + "/m.log --json " + dir + "/m.json");
    ASSERT_EQ(r.code, 0) << r.out;
    auto c = zerosim::load_ds_config(cfg, zerosim::parse_release(release).value());
    auto model = zerosim::load_model(fixture("tiny_model.json"));
    ASSERT_TRUE(c.ok() && model.ok());
    zerosim::ScheduleOptions o;
    o.world = 2;
    o.steps = 2;
    auto s = zerosim::build_schedule(model.value(), c.value(), o);
    ASSERT_TRUE(s.ok());
    json j = json::parse(text_of(dir + "/m.json"));
    EXPECT_EQ(j.at("wrong").get<int64_t>(), 0);
    for (const auto& rank : j.at("ranks")) EXPECT_EQ(rank.at("ops").size(), s->ops.size());
    // rank 0's comms_logger lines: one per collective of the schedule, in its order.
    std::vector<std::string> logged;
    std::istringstream in(text_of(dir + "/m.log"));
    const std::string prefix = "[logging.py:" + std::to_string(log_dist_line) + ":log_dist]";
    for (std::string line; std::getline(in, line);)
        if (auto p = zerosim::parse_ds_verbose_line(line); p && p->op.record != "log_summary_barrier") {
            logged.push_back(p->op.record_key() + " " + p->op.size_text);
            if (log_dist_line) {
                EXPECT_NE(line.find(prefix), std::string::npos) << line;
            }
        }
    ASSERT_FALSE(logged.empty());
    std::vector<std::string> want;
    for (const auto& op : s->ops)
        if (zerosim::is_collective(op.kind))
            want.push_back(zerosim::ds_record_key(zerosim::op_record_name(op.kind), op.caller) + " " +
                           zerosim::ds_size_string(op.bytes()));
    EXPECT_EQ(logged, want);
}

}  // namespace

TEST(RuntimeReleases, Stage3TraceBroadcastsOfV0_19_5Execute) {
    // v0.19.5: step 0 opens with an 8-byte and a 0-byte broadcast, step 1 with six.
    run_release("0.19.5", "z3", text_of(fixture("configs/z3.json")));
}

TEST(RuntimeReleases, Bf16OverflowFlagOfV0_19_3Executes) {
    run_release("0.19.3", "z2bf16",
                R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})");
}

// The comms_logger prefix carries the release's logger line, as the real logs of those releases
// show it (../shared/reference: v0.14.2's runs [logging.py:96:log_dist], v0.16.2_z3t's
// [logging.py:128:log_dist]); until 2026-12-01 zerorun wrote v0.14.2's whatever --deepspeed said.
TEST(RuntimeReleases, LogPrefixIsTheReleasesLoggerLine) {
    run_release("0.14.2", "prefix-0142", text_of(fixture("configs/z3.json")), 96);
    run_release("0.16.2", "prefix-0162", text_of(fixture("configs/z3.json")), 128);
}
