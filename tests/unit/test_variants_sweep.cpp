// `sweep --set zero_optimization.zero_hpz_partition_size=1,2,4,8` (issue 17 part 5): the grid's
// stage is applied before the config is read, so hpZ (read at stage 3 only, refused below) is
// accepted at the stage-3 points, and each point carries hpZ's secondary copy, hand-derived.
#include <gtest/gtest.h>

#include "prediction/sweep.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

TEST(VariantsSweep, HpzSizesArePredictedWithTheirSecondaryCopy) {
    SweepSpec spec;
    spec.model = test::config("models/tiny-gpt.json");
    spec.topologies = {test::config("../topologies/dgx-h100.json")};
    spec.stages = {3};
    spec.nodes = {2};   // 16 ranks, 8 per node
    auto set = parse_sweep_setting("zero_optimization.zero_hpz_partition_size=1,2,4,8");
    ASSERT_TRUE(set.ok());
    spec.settings = {set.value()};
    auto in = load_sweep_inputs(spec);
    ASSERT_TRUE(in.ok()) << in.error().what();
    std::vector<SweepResult> rows;
    for (const char* k : {"1", "2", "4", "8"}) {
        SweepPoint p;
        p.topology = spec.topologies[0];
        p.nodes = 2;
        p.stage = 3;
        p.values = {k};
        rows.push_back(predict_point(spec, in.value(), p));
        ASSERT_EQ(rows.back().error, "") << "hpZ " << k;
        EXPECT_EQ(rows.back().world, 16);
    }
    // The secondary partition of p: ceil(m/16)*16/k elements per rank (partition_parameters.py
    // _partition_param_sec), in the model's dtype (fp32 under DeepSpeed's defaults).
    int64_t padded = 0;
    for (const auto& par : in->model.params) padded += (par.numel + 15) / 16 * 16;
    for (int i = 1; i < 4; ++i) {
        const int64_t k = int64_t{1} << i;
        EXPECT_EQ(rows[i].memory_bytes - rows[0].memory_bytes, padded / k * 4) << "hpZ " << k;
    }
}
