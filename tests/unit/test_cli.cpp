// The zerosim command line, run as a real process, where its output is checked against something
// computed independently: the real reference log's broadcasts, the reference model's size. What
// it prints (messages, exit codes, -o safety) is in the expected-output cases, tests/cli/cases.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_helpers.hpp"

using zerosim::test::read_file;
using zerosim::test::reference;
using zerosim::test::run_zerosim;

namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string ref_model() { return reference("deepspeed-v0.14.2-cpu/model.json"); }
std::string ref_z1() { return reference("deepspeed-v0.14.2-cpu/z1_seed_w4/ds_config.json"); }

std::string schedule_args(const std::string& ds, const std::string& model, const std::string& extra = "--world 4") {
    return "schedule --deepspeed 0.14.2 --ds-config " + quote(ds) + " --model " + quote(model) + " " + extra;
}

int count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
    return n;
}

}  // namespace

// The reference z1 run: DeepSpeed broadcasts each of the 29 parameter tensors once at
// initialize (_broadcast_model); the real rank0.log has 29 "comm op: broadcast" lines.
TEST(Cli, ReferenceZ1DeepSpeedFormat) {
    auto r = run_zerosim(schedule_args(ref_z1(), ref_model(), "--world 4 --format deepspeed"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count(r.out, "comm op: broadcast"), 29) << r.out;
    EXPECT_EQ(count(read_file(reference("deepspeed-v0.14.2-cpu/z1_seed_w4/rank0.log")), "comm op: broadcast"), 29);
    EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;  // every key of that config is known
}

// --format json is the schedule IR: valid JSON tagged "zerosim-schedule", with the run's world and stage.
TEST(Cli, JsonFormatParses) {
    auto r = run_zerosim(schedule_args(ref_z1(), ref_model(), "--world 4 --format json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 500);
    EXPECT_EQ(j.value("format", ""), "zerosim-schedule");
    ASSERT_TRUE(j.contains("meta"));
    EXPECT_EQ(j["meta"]["world"], 4);
    EXPECT_EQ(j["meta"]["stage"], 1);
    EXPECT_EQ(j["meta"]["total_params"], 667136);
    ASSERT_TRUE(j["ops"].is_array());
    EXPECT_FALSE(j["ops"].empty());
}
