// Reproduces real DeepSpeed v0.14.2 comms_logger logs (../shared/reference) op for op: record
// name, caller, printed message size, order, and the training phase each op falls in, plus the
// log_summary table's rows. Every folder with a rank0.log is picked up, so more real runs in
// the same form are checked without changing this file.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "formats/schedule_outputs.hpp"
#include "schedule/schedule.hpp"
#include "reference_log_ops.hpp"
#include "test_helpers.hpp"

using namespace zerosim;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> reference_runs() {
    std::vector<std::string> runs;
    fs::path root = test::reference("deepspeed-v0.14.2-cpu");
    if (!fs::exists(root)) return runs;
    for (const auto& e : fs::directory_iterator(root))
        if (e.is_directory() && fs::exists(e.path() / "rank0.log")) runs.push_back(e.path().filename().string());
    std::sort(runs.begin(), runs.end());
    return runs;
}

using test::RealOp;
using test::real_ops;

std::string phase_of(const Op& op) {
    if (op.step < 0) return "initialize";
    // Step ops happen after the boundary micro-step's backward, in the script's "step" phase.
    std::string micro = op.phase == Phase::Step ? "*" : std::to_string(op.micro);
    return "step" + std::to_string(op.step) + ".micro" + micro + "." +
           (op.phase == Phase::Forward ? "forward" : op.phase == Phase::Backward ? "backward" : "step");
}

// The summary table: (record line, size, count) rows.
std::vector<std::string> summary_rows(const std::string& log) {
    std::vector<std::string> rows;
    std::istringstream in(log);
    std::string line, record;
    bool in_table = false;
    while (std::getline(in, line)) {
        if (line.rfind("Comm. Op", 0) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        if (line.find("comm op:") != std::string::npos || line.rfind("#####", 0) == 0) break;
        if (!line.empty() && line[0] != ' ') {
            record = line;
            continue;
        }
        // Columns are 20 characters wide: blank, size, count, ...
        std::string size = line.substr(20, 20), count = line.substr(40, 20);
        auto trim = [](std::string s) { return s.substr(0, s.find_last_not_of(' ') + 1); };
        rows.push_back(record + " / " + trim(size) + " / " + trim(count));
    }
    return rows;
}

class ReferenceLog : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        dir = test::reference("deepspeed-v0.14.2-cpu/" + GetParam());
        auto run = nlohmann::json::parse(test::read_file(dir + "/run.json"));
        world = run.at("world_size").get<int64_t>();
        steps = run.at("steps").get<int>();
        auto cfg = load_ds_config(dir + "/ds_config.json");
        ASSERT_TRUE(cfg.ok()) << cfg.error().what();
        auto model = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
        ASSERT_TRUE(model.ok()) << model.error().what();
        ScheduleOptions opt;
        opt.world = world;
        opt.steps = steps;
        auto s = build_schedule(model.value(), cfg.value(), opt);
        ASSERT_TRUE(s.ok()) << s.error().what();
        schedule = std::move(s).value();
        log = test::read_file(dir + "/rank0.log");
    }
    std::string dir, log;
    int64_t world = 0;
    int steps = 0;
    Schedule schedule;
};

TEST_P(ReferenceLog, SameOpsInTheSameOrder) {
    auto real = real_ops(log);
    ASSERT_FALSE(real.empty());
    std::vector<const Op*> ours;
    for (const auto& op : schedule.ops)
        if (is_collective(op.kind)) ours.push_back(&op);
    ASSERT_EQ(ours.size(), real.size()) << "number of logged collectives";
    for (size_t i = 0; i < real.size(); ++i) {
        LoggedOp l;
        l.record = op_record_name(ours[i]->kind);
        l.caller = ours[i]->caller;
        SCOPED_TRACE("op " + std::to_string(i) + " (rule " + rule_name(ours[i]->rule) + ")");
        EXPECT_EQ(l.record_key(), real[i].key);
        EXPECT_EQ(ds_size_string(ours[i]->bytes()), real[i].size);
        std::string expected_phase = real[i].phase;
        std::string our_phase = phase_of(*ours[i]);
        if (our_phase.find(".micro*.") != std::string::npos) {
            // A step op lands in the phase marker of the last micro-step.
            auto star = our_phase.find('*');
            our_phase.replace(star, 1, std::to_string(schedule.meta.grad_accum - 1));
        }
        EXPECT_EQ(our_phase, expected_phase);
    }
}

TEST_P(ReferenceLog, SameSummaryTable) {
    std::ostringstream out;
    DeepSpeedLogOptions o;
    o.log_summary = true;
    write_schedule_deepspeed(out, schedule, o);
    auto real = summary_rows(log);
    ASSERT_FALSE(real.empty());
    EXPECT_EQ(summary_rows(out.str()), real);
}

INSTANTIATE_TEST_SUITE_P(DeepSpeed0142, ReferenceLog, ::testing::ValuesIn(reference_runs()),
                         [](const auto& info) { return info.param; });

TEST(ReferenceData, IsPresent) {
    // Guards against silently testing nothing when ../shared is missing.
    EXPECT_GE(reference_runs().size(), 3u);
}

}  // namespace
