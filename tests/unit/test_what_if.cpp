// --what-if reduce-scatter (schedule/what_if.hpp): stages 1 and 2 with each bucket
// reduce-scattered instead of all-reduced send the ZeRO paper's 2Ψ per step and rank, worked by
// hand for the reference model: Ψ = 667,136 fp32 parameters on n = 4 ranks, one 500M bucket:
// reduce_scatter (n-1)/n x 4Ψ bytes + all_gather of the updated partitions (n-1)/n x 4Ψ =
// 2 x 3/4 x 2,668,544 = 4,002,816 bytes (padding to 2N per group aside), against 1.5 times that
// for DeepSpeed's all_reduce.
#include <gtest/gtest.h>

#include "analysis/explain.hpp"
#include "inline_inputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/what_if.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

Schedule reference_schedule(int stage) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_TRUE(m.ok());
    return test::build(m.value(), test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": )" +
                                           std::to_string(stage) + "}}"),
                       4, 2);
}

TEST(WhatIf, ReduceScatterSendsThePapers2Psi) {
    for (int stage : {1, 2}) {
        Schedule s = reference_schedule(stage);
        const double paper = 2 * 667136.0 * 4 * 3 / 4;   // 4,002,816
        EXPECT_NEAR(wire_bytes_per_rank(s, 1), 1.5 * paper, 0.001 * paper);   // DeepSpeed: all_reduce + all_gather
        auto changed = apply_what_if("reduce-scatter", s);
        ASSERT_TRUE(changed.ok());
        EXPECT_EQ(changed.value(), 2);   // one bucket per step, two steps
        EXPECT_NEAR(wire_bytes_per_rank(s, 1), paper, 0.001 * paper) << "stage " << stage;
        for (const auto& op : s.ops) {
            if (op.kind == OpKind::ReduceScatter) {
                EXPECT_EQ(op.elements % 4, 0);
            }
        }
    }
}

TEST(WhatIf, RefusedWhereItDoesNotApply) {
    Schedule s3 = reference_schedule(3);
    auto r = apply_what_if("reduce-scatter", s3);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().what().find("stage 3"), std::string::npos);
    Schedule s2 = reference_schedule(2);
    EXPECT_FALSE(apply_what_if("fsdp-full-shard", s2).ok());
    EXPECT_FALSE(apply_what_if("no-such", s2).ok());
}

}  // namespace
}  // namespace zerosim
