// `zerosim sweep`: rows equal single predictions of the same points, and the plot. Shards, per-point
// errors and bad grids: tests/cli/cases/sweep-*.case.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;

std::string root() { return std::string(ZEROSIM_CONFIGS_DIR) + "/.."; }
std::string model() { return zerosim::test::reference("deepspeed-v0.14.2-cpu/model.json"); }

std::string sweep_args(const std::string& extra) {
    return "sweep --deepspeed 0.14.2 --model " + q(model()) + " --topology " + q(root() + "/topologies/dgx-a100.json") +
           " --stages 1,3 --nodes 1,2 --set zero_optimization.reduce_bucket_size=50000,500000000 --jobs 2 " + extra;
}

std::vector<std::string> csv_lines(const std::string& path) {
    std::vector<std::string> out;
    std::istringstream in(zerosim::test::read_file(path));
    std::string l;
    while (std::getline(in, l)) out.push_back(l);
    return out;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> f;
    std::stringstream ss(s);
    std::string x;
    while (std::getline(ss, x, ',')) f.push_back(x);
    return f;
}

TEST(Sweep, RowsEqualSinglePredictions) {
    auto csv = zerosim::test::temp_file("sweep.csv", "");
    auto r = run_zerosim(sweep_args("-o " + q(csv)));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto lines = csv_lines(csv);
    ASSERT_EQ(lines.size(), 1u + 2 * 2 * 2);  // header + stages x bucket sizes x nodes
    // Row for stage 3, bucket 50000, 2 nodes (16 ranks) against zerosim predict of that point.
    std::string ds = zerosim::test::temp_file(
        "point.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "reduce_bucket_size": 50000}})");
    auto p = run_zerosim("predict --deepspeed 0.14.2 --ds-config " + q(ds) + " --model " + q(model()) + " --topology " +
                         q(root() + "/topologies/dgx-a100.json") + " --nodes 2 --steps 2 --format json");
    ASSERT_EQ(p.exit_code, 0) << p.out;
    auto j = nlohmann::json::parse(p.out.substr(p.out.find('{')));  // after the progress line
    double step_ms = j["steps"].back()["step_ms"].get<double>();
    bool found = false;
    for (const auto& l : lines) {
        auto f = split(l);
        if (f.size() > 5 && f[1] == "2" && f[3] == "3" && f[4] == "50000") {
            EXPECT_NEAR(std::stod(f[5]), step_ms, 1e-5);
            EXPECT_EQ(f[2], "16");
            found = true;
        }
    }
    EXPECT_TRUE(found);
}

// Shards concatenating to the whole: tests/cli/cases/sweep-shards-concatenate.case.

TEST(Sweep, WritesAnSvgPlot) {
    auto svg = zerosim::test::temp_file("sweep.svg", "");
    auto r = run_zerosim(sweep_args("--plot " + q(svg) + " -o /dev/null"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string text = zerosim::test::read_file(svg);
    EXPECT_EQ(text.rfind("<svg", 0), 0u);
    EXPECT_NE(text.find("step time (ms)"), std::string::npos);
    EXPECT_NE(text.find("stage 3"), std::string::npos);
    EXPECT_GE(std::count(text.begin(), text.end(), 'M'), 8);  // one path per series and panel
}

// A node design without NICs at 2 nodes, and bad grids: tests/cli/cases/sweep-*.case.

}  // namespace
