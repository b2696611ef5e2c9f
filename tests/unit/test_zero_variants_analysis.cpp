// ZeRO++ / MiCS in `memory` and `explain` (issue 17 parts 3 and 4), hand-derived.
#include <gtest/gtest.h>

#include "analysis/explain.hpp"
#include "analysis/memory.hpp"
#include "inline_inputs.hpp"
#include "schedule/schedule.hpp"

using namespace zerosim;

namespace {

struct Built {
    Model model;
    DsConfig cfg;
    Schedule s;
};

Built build(const std::string& zero, int64_t world, int64_t gpn = 0, const char* shape = "[250]") {
    Built b{test::param_list(std::string(R"({"parameters": [{"name": "l.weight", "shape": )") + shape + "}]}"), {}, {}};
    auto c = parse_ds_config("inline-ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, )" + zero + "}}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    b.cfg = c.value();
    ScheduleOptions o;
    o.world = world;
    o.steps = 2;
    o.gpus_per_node = gpn;
    auto s = build_schedule(b.model, b.cfg, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    b.s = s.value();
    return b;
}

int64_t item(const MemoryEstimate& e, const std::string& name) {
    for (const auto& i : e.items)
        if (i.name == name) return i.bytes;
    return -1;
}

// hpZ: n = 4, k = 2, m = 250 fp32: the secondary partition ceil(250/4)·4/2 = 126 elements, 504 B.
TEST(ZeroVariantsAnalysis, HpzSecondaryCopyInMemory) {
    Built b = build(R"("zero_hpz_partition_size": 2)", 4);
    auto e = estimate_memory(b.model, b.cfg, b.s);
    EXPECT_EQ(item(e, "hpZ secondary partitions"), 504);
    EXPECT_EQ(item(e, "parameter partitions"), 63 * 4);
}

// MiCS s = 2 of 4: partitions of ceil(250/2) = 125 elements (500 B), not ceil(250/4) = 63.
TEST(ZeroVariantsAnalysis, MicsPartitionsAreShardGroupSized) {
    Built b = build(R"("mics_shard_size": 2)", 4);
    auto e = estimate_memory(b.model, b.cfg, b.s);
    EXPECT_EQ(item(e, "parameter partitions"), 500);
    EXPECT_EQ(item(e, "fp32 master partition, Adam m and v"), 125 * 12);
}

// qgZ, W = 8, L = 4, a 64x256 weight: the four exchanges in and out,
// 2 x (8192 + 1024 + 2048 + 256) = 23040 B.
TEST(ZeroVariantsAnalysis, QgzBuffersInMemory) {
    Built b = build(R"("zero_quantized_gradients": true)", 8, 4, "[64, 256]");
    auto e = estimate_memory(b.model, b.cfg, b.s);
    EXPECT_EQ(item(e, "qgZ int4 exchange buffers (peak)"), 23040);
}

// explain: each variant rule with its consequence, and the hpZ-size answer naming the node size.
TEST(ZeroVariantsAnalysis, ExplainAnswersTheHpzQuestion) {
    Built b = build(R"("zero_hpz_partition_size": 4, "zero_quantized_weights": true)", 16, 8, "[1024, 1024]");
    std::string text = explain_schedule(b.model, b.cfg, b.s);
    EXPECT_NE(text.find("[rule qwz.fetch_scales]"), std::string::npos);
    EXPECT_NE(text.find("zero_optimization.zero_quantized_weights = true (default false)"), std::string::npos);
    EXPECT_NE(text.find("What hpZ size"), std::string::npos);
    EXPECT_NE(text.find("k = 8 is the largest group inside one node"), std::string::npos) << text;
}

}  // namespace
