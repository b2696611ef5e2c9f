// predict's "assumed" line (prediction/assumed.hpp): the figures a prediction used that the
// topology's sources call an assumption (or leave unsourced), and only those it used.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "prediction/assumed.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

Topology dgx_h100_with(const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(test::read_file(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json"));
    edit(j);
    auto t = parse_topology("t.json", j.dump());
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

std::vector<std::string> keys(const std::vector<AssumedFigure>& f) {
    std::vector<std::string> k;
    for (const auto& x : f) k.push_back(x.key + (x.unsourced ? " (unsourced)" : ""));
    return k;
}

}  // namespace

TEST(Assumed, ShippedTopologyAtStage3NamesEfficienciesLaunchAndHooks) {
    const Topology t = dgx_h100_with([](nlohmann::json&) {});
    ScheduleMeta meta;
    meta.stage = 3;
    EXPECT_EQ(keys(assumed_figures(t, meta)),
              (std::vector<std::string>{"gpu.compute_efficiency", "gpu.memory_efficiency (unsourced)", "host.kernel_launch_us",
                                        "host.hook_us"}));
    meta.stage = 2;   // no module hooks below stage 3
    EXPECT_EQ(keys(assumed_figures(t, meta)).size(), 3u);
    meta.offload_optimizer = true;   // offload: PCIe and CPU Adam are used, and assumed
    const auto off = keys(assumed_figures(t, meta));
    EXPECT_NE(std::find(off.begin(), off.end(), "host.pcie_gbps"), off.end());
    EXPECT_NE(std::find(off.begin(), off.end(), "host.cpu_adam_gbs"), off.end());
}

TEST(Assumed, AFittedOrSourcedFigureIsNotAssumed) {
    const Topology t = dgx_h100_with([](nlohmann::json& j) {
        j["sources"]["gpu.compute_efficiency"] = "fitted by zerosim calibrate --deepspeed-log run.log";
        j["sources"]["gpu.memory_efficiency"] = "measured: STREAM triad 2.7 TB/s of 3.35";
        j["sources"]["host"] = "measured: torch.profiler trace of one step";
    });
    ScheduleMeta meta;
    meta.stage = 3;
    EXPECT_TRUE(assumed_figures(t, meta).empty());
    EXPECT_EQ(assumed_line(t, assumed_figures(t, meta)), "");
}

TEST(Assumed, TheLineNamesEachFigureAndTheFile) {
    const Topology t = dgx_h100_with([](nlohmann::json&) {});
    ScheduleMeta meta;
    meta.stage = 1;
    EXPECT_EQ(assumed_line(t, assumed_figures(t, meta)),
              "assumed, fitted to no measurement: gpu.compute_efficiency 0.5, host.kernel_launch_us 10 us (t.json's sources "
              "say \"assumption\"); gpu.memory_efficiency 0.8 (no source)");
}

// Across nodes the bulk protocols' call cost is used: 0 and unsourced until calibrate fits it from
// nccl-tests (its "nics" section's source names the NICs, not this fit); one node never uses it.
TEST(Assumed, BulkCallCostAcrossNodesUntilCalibrated) {
    ScheduleMeta meta;
    meta.stage = 1;
    const Topology one = dgx_h100_with([](nlohmann::json&) {});
    for (const auto& k : keys(assumed_figures(one, meta))) EXPECT_EQ(k.find("nics.bulk_call_us"), std::string::npos);
    const Topology two = dgx_h100_with([](nlohmann::json& j) { j["nodes"] = 2; });
    auto k2 = keys(assumed_figures(two, meta));
    EXPECT_NE(std::find(k2.begin(), k2.end(), "nics.bulk_call_us (unsourced)"), k2.end());
    const Topology fitted = dgx_h100_with([](nlohmann::json& j) {
        j["nodes"] = 2;
        j["nics"]["bulk_call_us"] = 30;
        j["sources"]["nics.bulk_call_us"] = "fitted by zerosim calibrate from table.txt";
    });
    for (const auto& k : keys(assumed_figures(fitted, meta))) EXPECT_EQ(k.find("nics.bulk_call_us"), std::string::npos);
}

// The rings' channel ceiling across nodes: "none" (the rings reach the NICs) and unsourced until
// calibrate fits one from a ring table; a fitted one with its source is not named.
TEST(Assumed, RingChannelCeilingAcrossNodesSaysNoneUntilFitted) {
    ScheduleMeta meta;
    meta.stage = 1;
    const Topology two = dgx_h100_with([](nlohmann::json& j) { j["nodes"] = 2; });
    const std::string line = assumed_line(two, assumed_figures(two, meta));
    EXPECT_NE(line.find("nics.ring_channel_gbs none"), std::string::npos) << line;
    const Topology fitted = dgx_h100_with([](nlohmann::json& j) {
        j["nodes"] = 2;
        j["nics"]["ring_channel_gbs"] = 19.25;
        j["sources"]["nics.ring_channel_gbs"] = "fitted by zerosim calibrate from table.txt";
    });
    for (const auto& k : keys(assumed_figures(fitted, meta))) EXPECT_EQ(k.find("nics.ring_channel_gbs"), std::string::npos);
    const Topology one = dgx_h100_with([](nlohmann::json&) {});
    EXPECT_EQ(assumed_line(one, assumed_figures(one, meta)).find("ring_channel"), std::string::npos);
}
