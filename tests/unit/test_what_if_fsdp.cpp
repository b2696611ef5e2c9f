// --what-if fsdp-full-shard, fsdp-shard-grad-op, hybrid-shard (schedule/what_if_fsdp.hpp), worked
// by hand for the reference model (deepspeed-v0.14.2-cpu/model.json, fp32, 4 ranks):
//   root unit  wte 131,072 + wpe 8,192 + ln_f 256 + lm_head 131,072          = 270,592 elements
//   blocks.0   ln1 256 + qkv 49,536 + proj 16,512 + ln2 256 + fc1 66,048 + fc2 65,664 = 198,272
//   blocks.1   the same                                                      = 198,272
//   Ψ = 667,136; every unit divides by 4 and by 2, so no padding.
// Per rank and step, ring convention (explain's): all_gather (n-1) x shard bytes = (n-1)/n x 4N,
// reduce_scatter (n-1)/n x 4N, all_reduce 2 (n-1)/n x its bytes.
//   full shard, n = 4: forward gathers all units 3/4 x 4Ψ = 2,001,408; backward re-gathers the two
//     blocks (the root is kept from forward, _post_forward_reshard) 3/4 x 4 x 396,544 = 1,189,632;
//     reduce_scatters 2,001,408. Sum 5,192,448 = the paper's 3Ψ (6,004,224) less the root's
//     backward gather (811,776).
//   shard-grad-op: one gather per unit and one reduce_scatter: 2 x 2,001,408 = 4,002,816 = 2Ψ.
//   hybrid, nodes of 2: gathers and reduce_scatters over 2 ranks (1/2 x 4N):
//     1,334,272 + 793,088 + 1,334,272, and the shard (N/2 elements, 2N bytes) all_reduced over the 2
//     nodes: 2 x 1/2 x 2N summed = 1,334,272; total 4,795,904, of which only the all_reduce crosses
//     nodes: 1,334,272 inter-node bytes (one member per node: all through the GPU's NIC).
#include <gtest/gtest.h>

#include <algorithm>

#include "analysis/explain.hpp"
#include "analysis/zero_variants.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/what_if.hpp"
#include "prediction/what_if_compare.hpp"
#include "schedule/what_if_fsdp.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

Schedule stage3(int64_t gpus_per_node = 0) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}})");
    EXPECT_TRUE(m.ok() && c.ok());
    ScheduleOptions o;
    o.world = 4;
    o.steps = 2;
    o.gpus_per_node = gpus_per_node;
    auto s = build_schedule(m.value(), c.value(), o);
    EXPECT_TRUE(s.ok());
    return s.value();
}

Schedule fsdp(const std::string& name, int64_t gpus_per_node = 0) {
    Schedule s = stage3(gpus_per_node);
    auto units = apply_what_if(name, s);
    EXPECT_TRUE(units.ok()) << (units.ok() ? "" : units.error().what());
    EXPECT_EQ(units.ok() ? units.value() : 0, 3);
    return s;
}

int count(const Schedule& s, int step, OpKind k, Phase p) {
    return static_cast<int>(std::count_if(s.ops.begin(), s.ops.end(),
                                          [&](const Op& op) { return op.step == step && op.kind == k && op.phase == p; }));
}

TEST(WhatIfFsdp, UnitsAreTheBlocksAndTheRoot) {
    auto units = fsdp_units(stage3());
    ASSERT_EQ(units.size(), 3u);
    EXPECT_EQ(units[0].numel, 270592);
    EXPECT_EQ(units[1].name, "blocks.0");
    EXPECT_EQ(units[1].numel, 198272);
    EXPECT_EQ(units[2].name, "blocks.1");
    EXPECT_EQ(units[2].numel, 198272);
}

TEST(WhatIfFsdp, FullShardSendsThreePsiLessTheRootsBackwardGather) {
    Schedule s = fsdp("fsdp-full-shard");
    EXPECT_NEAR(wire_bytes_per_rank(s, 1), 5192448.0, 0.5);
    // Op counts per step: a gather per unit in forward, per block in backward, a reduce_scatter per unit.
    for (int step : {0, 1}) {
        EXPECT_EQ(count(s, step, OpKind::AllGather, Phase::Forward), 3);
        EXPECT_EQ(count(s, step, OpKind::AllGather, Phase::Backward), 2);
        EXPECT_EQ(count(s, step, OpKind::ReduceScatter, Phase::Backward), 3);
        EXPECT_EQ(count(s, step, OpKind::AllReduce, Phase::Backward), 0);
    }
    EXPECT_TRUE(is_fsdp_schedule(s));
    // Shards as DeepSpeed logs them: all_gather one rank's shard, reduce_scatter the full input.
    for (const auto& op : s.ops) {
        if (op.kind == OpKind::AllGather) {
            EXPECT_TRUE(op.elements == 270592 / 4 || op.elements == 198272 / 4);
        }
        if (op.kind == OpKind::ReduceScatter) {
            EXPECT_TRUE(op.elements == 270592 || op.elements == 198272);
        }
    }
    // Root, block 0, block 1 and block 1 with block 0 prefetched: all of Ψ at once in backward.
    EXPECT_EQ(s.meta.stage3_peak_gathered_elements, 667136);
}

TEST(WhatIfFsdp, BackwardPrefetchIssuesTheNextGatherBeforeTheGradientComputation) {
    Schedule s = fsdp("fsdp-full-shard");
    // Step 1's backward: blocks.1's gather, then blocks.0's (BACKWARD_PRE), then blocks.1's gradients.
    std::vector<const Op*> bwd;
    for (const auto& op : s.ops)
        if (op.step == 1 && op.phase == Phase::Backward) bwd.push_back(&op);
    auto first = [&](auto pred) {
        return std::find_if(bwd.begin(), bwd.end(), [&](const Op* op) { return pred(*op); }) - bwd.begin();
    };
    auto unit_gather = [&](const char* prefix) {
        return first([&](const Op& op) {
            return op.kind == OpKind::AllGather && s.params[op.params[0]].name.rfind(prefix, 0) == 0;
        });
    };
    const auto grad_b1 = first([&](const Op& op) { return op.kind == OpKind::Compute && op.module_name.rfind("blocks.1", 0) == 0; });
    EXPECT_LT(unit_gather("blocks.1"), unit_gather("blocks.0"));
    EXPECT_LT(unit_gather("blocks.0"), grad_b1);
    // blocks.1's reduce_scatter after its last gradient computation, before blocks.0's.
    const auto rs_b1 = first([&](const Op& op) { return op.kind == OpKind::ReduceScatter && s.params[op.params[0]].name.rfind("blocks.1", 0) == 0; });
    const auto grad_b0 = first([&](const Op& op) { return op.kind == OpKind::Compute && op.module_name.rfind("blocks.0", 0) == 0; });
    EXPECT_GT(rs_b1, grad_b1);
    EXPECT_LT(rs_b1, grad_b0);
    // Streams: gathers on the unshard (fetch) stream, reductions on the post-backward (reduce) one.
    for (const auto* op : bwd) {
        if (op->kind == OpKind::AllGather) {
            EXPECT_EQ(op->stream, Stream::Fetch);
        }
        if (op->kind == OpKind::ReduceScatter) {
            EXPECT_EQ(op->stream, Stream::Reduce);
        }
    }
    // limit_all_gathers: some gather waits on the host for a free two back.
    EXPECT_TRUE(std::any_of(s.host.begin(), s.host.end(), [](const HostEvent& e) { return e.kind == HostKind::FetchWait; }));
}

TEST(WhatIfFsdp, ShardGradOpSendsTwoPsi) {
    Schedule s = fsdp("fsdp-shard-grad-op");
    EXPECT_NEAR(wire_bytes_per_rank(s, 1), 4002816.0, 0.5);
    EXPECT_EQ(count(s, 1, OpKind::AllGather, Phase::Forward), 3);
    EXPECT_EQ(count(s, 1, OpKind::AllGather, Phase::Backward), 0);
    EXPECT_EQ(count(s, 1, OpKind::ReduceScatter, Phase::Backward), 3);
    EXPECT_EQ(s.meta.stage3_peak_gathered_elements, 667136);   // every unit kept from forward to backward
    // Memory: shards Ψ/4 x (4 + 4 + 8) fp32 bytes + Ψ gathered x 4 + the root's unsharded gradient x 4.
    EXPECT_EQ(fsdp_model_state_bytes(s), 166784 * 16 + 667136 * 4 + 270592 * 4);
}

TEST(WhatIfFsdp, HybridShardAllReducesTheShardAcrossNodes) {
    Schedule s = fsdp("hybrid-shard", 2);
    EXPECT_NEAR(wire_bytes_per_rank(s, 1), 4795904.0, 0.5);
    EXPECT_NEAR(inter_node_bytes_per_rank(s, 1, 2), 1334272.0, 0.5);
    EXPECT_EQ(count(s, 1, OpKind::AllReduce, Phase::Backward), 3);
    EXPECT_EQ(s.meta.group_size(GroupKind::FsdpShard), 2);
    EXPECT_EQ(s.meta.group_size(GroupKind::FsdpReplica), 2);
    for (const auto& op : s.ops) {
        if (op.kind == OpKind::AllGather || op.kind == OpKind::ReduceScatter) {
            EXPECT_EQ(op.group, GroupKind::FsdpShard);
        }
        if (op.kind == OpKind::AllReduce && op.phase == Phase::Backward) {
            EXPECT_EQ(op.group, GroupKind::FsdpReplica);
        }
    }
    // Through the NICs per GPU: the all_reduce's group has one member per node, so all of it;
    // full shard over the 4 ranks on nodes of 2: 2 of each rank's 3 peers are off the node and the
    // node's 2 members share what enters it: 5,192,448 x 2/3 / 2.
    EXPECT_NEAR(nic_bytes_per_gpu(s, 1, 2), 1334272.0, 0.5);
    Schedule full = fsdp("fsdp-full-shard");
    EXPECT_NEAR(nic_bytes_per_gpu(full, 1, 2), 5192448.0 / 3, 0.5);
}

// Timed as predict times it (the host lane with FSDP's hooks and the rate limiter's waits): every
// op runs, a unit's compute starts after its gather, block 0's prefetched gather runs while block
// 1's gradients are computed (BACKWARD_PRE), and the step starts after the last reduce_scatter.
TEST(WhatIfFsdp, TimedThePrefetchOverlapsTheGradients) {
    Schedule s = fsdp("fsdp-full-shard");
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-a100.json");
    ASSERT_TRUE(t.ok());
    auto p = simulate(s, t.value(), TimingMode::Overlapped);
    ASSERT_TRUE(p.ok());
    const auto& ops = p->ops;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        EXPECT_TRUE(ops[i].simulated) << i;
        for (int64_t d : s.ops[i].deps) EXPECT_GE(ops[i].start_s, ops[static_cast<size_t>(d)].end_s - 1e-12) << i;
    }
    double b0_gather_start = -1, b1_grad_end = 0, last_reduce_end = 0, step_start = -1;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.step != 1) continue;
        const std::string first = op.params.empty() ? "" : s.params[op.params[0]].name;
        if (op.phase == Phase::Backward && op.kind == OpKind::AllGather && first.rfind("blocks.0", 0) == 0)
            b0_gather_start = ops[i].start_s;
        if (op.phase == Phase::Backward && op.kind == OpKind::Compute && op.module_name.rfind("blocks.1", 0) == 0)
            b1_grad_end = std::max(b1_grad_end, ops[i].end_s);
        if (op.kind == OpKind::ReduceScatter) last_reduce_end = std::max(last_reduce_end, ops[i].end_s);
        if (op.phase == Phase::Step && step_start < 0) step_start = ops[i].start_s;
    }
    ASSERT_GE(b0_gather_start, 0);
    EXPECT_LT(b0_gather_start, b1_grad_end);
    EXPECT_GE(step_start, last_reduce_end - 1e-12);
}

TEST(WhatIfFsdp, RefusedWhereItDoesNotApply) {
    Schedule s3 = stage3();
    auto r = apply_what_if("hybrid-shard", s3);   // no gpus per node
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().what().find("per node"), std::string::npos);
    Schedule odd = stage3(3);   // 4 ranks on nodes of 3
    EXPECT_FALSE(apply_what_if("hybrid-shard", odd).ok());
    EXPECT_TRUE(what_if_applies("fsdp-full-shard", 3));
    EXPECT_FALSE(what_if_applies("fsdp-full-shard", 2));
    EXPECT_TRUE(what_if_applies("reduce-scatter", 1));
}

}  // namespace
}  // namespace zerosim
