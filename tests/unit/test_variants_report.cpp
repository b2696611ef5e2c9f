// The report's intra- vs inter-node traffic table (issue 17 part 5).
#include <gtest/gtest.h>

#include <array>
#include <regex>
#include <string>
#include <vector>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;

// The table's rows as {intra, inter, share} strings.
std::vector<std::array<std::string, 3>> traffic_rows(const std::string& zero, int nodes) {
    std::string cfg = zerosim::test::temp_file("traffic-" + std::to_string(nodes) + ".json",
                                               R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3)" + zero + "}}");
    std::string html = zerosim::test::temp_file("traffic.html", "");
    auto r = run_zerosim("report --deepspeed 0.14.2 --ds-config " + q(cfg) + " --model " + q(zerosim::test::config("models/tiny-gpt.json")) +
                         " --topology " + q(zerosim::test::config("../topologies/dgx-h100.json")) + " --nodes " +
                         std::to_string(nodes) + " -o " + q(html));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::string text = zerosim::test::read_file(html);
    auto at = text.find("<section id='traffic'>");
    EXPECT_NE(at, std::string::npos);
    std::string section = text.substr(at, text.find("</section>", at) - at);
    std::regex row("<tr><td>\\d+</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td></tr>");
    std::vector<std::array<std::string, 3>> rows;
    for (std::sregex_iterator it(section.begin(), section.end(), row), end; it != end; ++it)
        rows.push_back({(*it)[1], (*it)[2], (*it)[3]});
    return rows;
}

}  // namespace

// One node: nothing crosses a node boundary.
TEST(VariantsReport, OneNodeHasNoInterNodeTraffic) {
    auto rows = traffic_rows("", 1);
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& r : rows) {
        EXPECT_EQ(r[1], "0B");
        EXPECT_EQ(r[2], "0.0%");
    }
}

// Two nodes of 8: MiCS with shard groups of 8 keeps gathers and the reduce-scatter inside a node;
// only the replication all_reduce ({r, r+8}) crosses, so less crosses than under plain stage 3,
// and hpZ 8's first step moves every fetch gather inside the node too.
TEST(VariantsReport, ShardGroupsInsideANodeCutInterNodeTraffic) {
    auto share = [](const std::string& s) { return std::stod(s.substr(0, s.size() - 1)); };
    auto plain = traffic_rows("", 2), mics = traffic_rows(R"(, "mics_shard_size": 8)", 2), hpz = traffic_rows(R"(, "zero_hpz_partition_size": 8)", 2);
    ASSERT_TRUE(plain.size() == 2 && mics.size() == 2 && hpz.size() == 2);
    EXPECT_GT(share(plain[1][2]), 50.0);   // 8 of 15 peers are on the other node
    EXPECT_LT(share(mics[1][2]), share(plain[1][2]) / 2);
    EXPECT_LT(share(hpz[0][2]), share(plain[0][2]));
}
