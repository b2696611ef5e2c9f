// The report's timeline for stage 3 (issue 15): gathers interleaved with compute, not a block ahead
// of it, once the host issues each gather at its module's hook and the fetch throttle holds the
// host back. Six equal layers on a slow link without prefetch: each gather takes milliseconds,
// compute microseconds, so after each gather the module's compute runs before the gather three
// fetch events later has finished. The bars are read back from the HTML (the Chromium test in
// test_report.cpp checks that the page, the host track and the gathered counter render).
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "test_helpers.hpp"

using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;

TEST(ReportTimeline, Stage3GathersInterleaveWithCompute) {
    std::string model = zerosim::test::temp_file("six-layers.json", R"({"parameters": [
      {"name": "l1.weight", "shape": [1000]}, {"name": "l2.weight", "shape": [1000]}, {"name": "l3.weight", "shape": [1000]},
      {"name": "l4.weight", "shape": [1000]}, {"name": "l5.weight", "shape": [1000]}, {"name": "l6.weight", "shape": [1000]}]})");
    std::string cfg = zerosim::test::temp_file("z3-noprefetch.json", R"({"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0,
      "stage3_max_reuse_distance": 0}})");
    std::string topo = zerosim::test::temp_file("slow-link.json", R"({"name": "slow", "nodes": 1, "gpus_per_node": 4,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 0.001, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 0.001},
      "host": {"hook_us": 50, "kernel_launch_us": 10}})");
    std::string html = zerosim::test::temp_file("report-timeline.html", "");
    auto r = run_zerosim("report --ds-config " + q(cfg) + " --model " + q(model) + " --topology " + q(topo) +
                         " --world 4 --steps 2 -o " + q(html));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string text = zerosim::test::read_file(html);
    auto timeline = text.substr(text.find("<section id='timeline'>"));
    timeline = timeline.substr(0, timeline.find("</section>"));
    EXPECT_NE(timeline.find("<svg id='gathered'"), std::string::npos);  // host track and gathered counter
    // Bars of the compute lane (y 20) and the fetch lane (y 122), in time order.
    std::regex bar("<rect x='([0-9.]+)' y='(20|122)' width='([0-9.]+)'[^>]*><title>([a-z_]+)");
    std::vector<std::pair<double, char>> bars;
    for (auto it = std::sregex_iterator(timeline.begin(), timeline.end(), bar); it != std::sregex_iterator(); ++it)
        bars.push_back({std::stod((*it)[1]), (*it)[2] == "20" ? 'c' : 'f'});
    std::sort(bars.begin(), bars.end());
    std::string lanes;
    for (const auto& b : bars) lanes += b.second;
    // 12 gathers (6 forward, 6 backward) and 12 compute segments (plus the optimizer step).
    EXPECT_EQ(std::count(lanes.begin(), lanes.end(), 'f'), 12) << lanes;
    int switches = 0;
    for (size_t i = 1; i < lanes.size(); ++i) switches += lanes[i] != lanes[i - 1];
    EXPECT_GE(switches, 20) << lanes;  // f c f c ...: each gather's compute before the next-but-two gather ends
}

}  // namespace
