// The order of the per-rank reduces of one flushed gradient bucket (stage 2, reduce_scatter,
// use_multi_rank_bucket_allreduce false), worked out by hand from DeepSpeed v0.14.2
// stage_1_and_2.py on the shared reference tiny GPT (../shared/reference/deepspeed-v0.14.2-cpu),
// with the z2_smallbucket_w4 settings (reduce_bucket_size 50000, overlap_comm, contiguous
// gradients) and the multi-rank all_reduce turned off.
//
// The DeepSpeed steps the expectations follow:
//  1. reduce_independent_p_g_buckets_and_remove_grads: a gradient joins the bucket; if
//     elements + numel > reduce_bucket_size the bucket is flushed first (an empty bucket too).
//  2. average_tensor: for each parameter of the bucket, in the order they joined, its
//     (partition id, grad_start_offset) pairs sorted by offset give its slices; a slice whose
//     owner is the previous slice's owner (across parameters too: prev_id) extends that entry of
//     rank_and_offsets, otherwise it starts a new one.
//  3. The entries go into a dict keyed by (dst, process group) in first-seen order; an owner's
//     non-adjacent entries share one list.
//  4. Each list goes through allreduce_no_retain: entries are appended and the list is sent
//     (allreduce_and_copy -> allreduce_bucket -> dist.reduce to dst) once the running count
//     passes reduce_bucket_size, the rest at the end.
//
// Reference model (model.json, registration order, numel): 0 wte 131072, 1 wpe 8192; block b
// (base 2 + 12b): ln1.w 128, ln1.b 128, qkv.w 49152, qkv.b 384, proj.w 16384, proj.b 128,
// ln2.w 128, ln2.b 128, fc1.w 65536, fc1.b 512, fc2.w 65536, fc2.b 128; 26 ln_f.w 128,
// 27 ln_f.b 128, 28 lm_head 131072. 667136 elements, a multiple of 2*world at 2 and 4 ranks, so
// no padding. Gradients become ready module by module in reverse forward order; inside a Linear
// bias then weight, inside a LayerNorm weight then bias (autograd's order, the generator's
// backward_plan): 28, 26, 27, 25, 24, 23, 22, 20, 21, 19, 18, 17, 16, 14, 15, 13, ..., 2, 3, 1, 0.
// Flushes, counted from 0 (flush 0 is lm_head's empty-bucket flush, no op):
//  1 [28]  2 [26 27 25]  3 [24]  4 [23]  5 [22]  6 [20 21 19 18 17]  7 [16 14 15 13]  8 [12]
//  9 [11]  10 [10]  11 [8 9 7 6 5]  12 [4 2 3]  13 [1]  14 [0]
// (e.g. flush 12: 4 joins after flush 11 since 17152 + 49152 > 50000; 2 and 3 make 49408; 1
// would make 57600 > 50000.)
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

struct ExpectedReduce {
    int root;
    std::vector<Segment> segments;
};

// The backward reduces of step 0's only micro-step, by flush.
// Pointers into `s`: keep the schedule alive while they are used.
std::map<int, std::vector<const Op*>> reduces_by_flush(const Schedule& s) {
    std::map<int, std::vector<const Op*>> out;
    for (const auto& op : s.ops)
        if (op.kind == OpKind::Reduce && op.phase == Phase::Backward && op.step == 0) out[op.bucket].push_back(&op);
    return out;
}

class FlushOrder : public ::testing::Test {
  protected:
    Schedule build(int64_t world, bool round_robin) {
        auto model = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
        EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().what());
        std::string cfg = R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2,
            "overlap_comm": true, "reduce_scatter": true, "contiguous_gradients": true,
            "reduce_bucket_size": 50000, "allgather_bucket_size": 50000,
            "use_multi_rank_bucket_allreduce": false, "round_robin_gradients": )" +
                          std::string(round_robin ? "true" : "false") + "}}";
        auto c = parse_ds_config("inline-ds.json", cfg);
        EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
        ScheduleOptions o;
        o.world = world;
        o.steps = 1;
        auto s = build_schedule(model.value(), c.value(), o);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
        return s.value();
    }

    static void expect_flush(const std::map<int, std::vector<const Op*>>& flushes, int bucket,
                             const std::vector<ExpectedReduce>& want) {
        auto it = flushes.find(bucket);
        ASSERT_NE(it, flushes.end()) << "no reduce in flush " << bucket;
        const auto& got = it->second;
        ASSERT_EQ(got.size(), want.size()) << "flush " << bucket;
        for (size_t i = 0; i < want.size(); ++i) {
            const Op& op = *got[i];
            EXPECT_EQ(op.root, want[i].root) << "flush " << bucket << " reduce " << i;
            int64_t n = 0;
            ASSERT_EQ(op.segments.size(), want[i].segments.size()) << "flush " << bucket << " reduce " << i;
            for (size_t k = 0; k < want[i].segments.size(); ++k) {
                const Segment& g = op.segments[k];
                const Segment& w = want[i].segments[k];
                EXPECT_EQ(g.param, w.param) << "flush " << bucket << " reduce " << i << " segment " << k;
                EXPECT_EQ(g.offset, w.offset) << "flush " << bucket << " reduce " << i << " segment " << k;
                EXPECT_EQ(g.numel, w.numel) << "flush " << bucket << " reduce " << i << " segment " << k;
                n += w.numel;
            }
            EXPECT_EQ(op.elements, n) << "flush " << bucket << " reduce " << i;
        }
    }
};

// World 2, round robin: _round_robin_reorder puts position i in list i % 2, so the flat buffer is
// the even parameters (656000 elements) then the odd ones (11136). Partitions of 333568.
// Even offsets: 0@0 2@131072 4@131200 6@180352 8@196736 10@196864 12@262400 14@327936
// 16@328064 (to 377216, across the boundary: 5504 in partition 0, 43648 in 1) 18@377216 ...;
// every odd parameter starts at or after 656000 -> partition 1.
TEST_F(FlushOrder, World2RoundRobinGroupsNonAdjacentSlicesPerOwnerInFirstSeenOrder) {
    const Schedule w2 = build(2, true);
    auto flushes = reduces_by_flush(w2);
    // Flush 7 = [16 14 15 13]. rank_and_offsets: 16 -> (0, @0, 5504), (1, @5504, 43648);
    // 14 -> (0, @49152, 128); 15 -> (1, @49280, 128); 13 -> owner 1 = prev_id, merged:
    // (1, @49280, 256). Dict, first seen: 0: [5504, 128], 1: [43648, 256]. Neither list passes
    // 50000, so one reduce each: dst 0 then dst 1.
    expect_flush(flushes, 7,
                 {{0, {{16, 0, 5504}, {14, 0, 128}}}, {1, {{16, 5504, 43648}, {15, 0, 128}, {13, 0, 128}}}});
    // Flush 12 = [4 2 3]: 4 -> (0, @0, 49152); 2 -> owner 0 = prev_id, merged (0, @0, 49280);
    // 3 -> (1, @49280, 128). Dict: 0: [49280] (not past 50000: one reduce), 1: [128].
    expect_flush(flushes, 12, {{0, {{4, 0, 49152}, {2, 0, 128}}}, {1, {{3, 0, 128}}}});
    // Flush 1 = [28] alone (131072 > 50000 after appending: sent as one reduce); 28 is even,
    // at 524928 -> partition 1.
    expect_flush(flushes, 1, {{1, {{28, 0, 131072}}}});
}

// World 4, round robin: lists i % 4 -> flat order 0 4 8 12 16 20 24 28 | 1 5 9 13 17 21 25 |
// 2 6 10 14 18 22 26 | 3 7 11 15 19 23 27. Partitions of 166784 (boundaries 166784, 333568,
// 500352). 4@131072 (to 180224: 35712 in partition 0, 13440 in 1); 24@295168 (to 360704: 38400
// in 1, 27136 in 2); 28@360704 -> 2; the list of 3, 7, ... starts at 665472 -> 3; 2@501248 -> 3.
TEST_F(FlushOrder, World4RoundRobinSplitsAParameterAcrossOwnersByOffset) {
    const Schedule w4 = build(4, true);
    auto flushes = reduces_by_flush(w4);
    // Flush 12 = [4 2 3]: 4's (partition, offset) pairs sorted by offset: (0, 0), (1, 35712) ->
    // (0, @0, 35712), (1, @35712, 13440); 2 -> (3, @49152, 128); 3 -> owner 3 = prev_id, merged
    // (3, @49152, 256). Dict: 0, 1, 3, one reduce each.
    expect_flush(flushes, 12, {{0, {{4, 0, 35712}}}, {1, {{4, 35712, 13440}}}, {3, {{2, 0, 128}, {3, 0, 128}}}});
    // Flush 3 = [24]: (1, @0, 38400), (2, @38400, 27136).
    expect_flush(flushes, 3, {{1, {{24, 0, 38400}}}, {2, {{24, 38400, 27136}}}});
    expect_flush(flushes, 1, {{2, {{28, 0, 131072}}}});
}

// Without round robin the flat buffer is registration order: 12@271872 (to 337408) and at
// world 4 24@470144 (to 535680), 4@139520 (to 188672).
TEST_F(FlushOrder, RegistrationOrderLayoutAtWorld2And4) {
    // World 2, partitions of 333568: flush 8 = [12] -> (0, @0, 61696), (1, @61696, 3840).
    const Schedule w2 = build(2, false);
    expect_flush(reduces_by_flush(w2), 8, {{0, {{12, 0, 61696}}}, {1, {{12, 61696, 3840}}}});
    // World 4, partitions of 166784 (boundaries 166784, 333568, 500352): flush 3 = [24] ->
    // (2, @0, 30208), (3, @30208, 35328); flush 12 = [4 2 3]: 4 -> (0, @0, 27264),
    // (1, @27264, 21888); 2 -> owner 0 (139264 < 166784), 3 -> owner 0. Dict: 0: [27264, 256]
    // (entries 4's first slice and the merged 2+3 entry), 1: [21888]. Dst 0 then 1: the
    // parameter's second slice goes out after later parameters' slices of its first owner.
    const Schedule w4 = build(4, false);
    auto flushes = reduces_by_flush(w4);
    expect_flush(flushes, 3, {{2, {{24, 0, 30208}}}, {3, {{24, 30208, 35328}}}});
    expect_flush(flushes, 12, {{0, {{4, 0, 27264}, {2, 0, 128}, {3, 0, 128}}}, {1, {{4, 27264, 21888}}}});
}

// Flushes whose first two owners come from a LayerNorm's weight and bias (weight ready first,
// docs/zero-comm.md §3). Were the bias ready first (reverse registration, as for a Linear), the
// first two reduces of each of these flushes would swap: world 2 flush 11 would go to ranks 1, 0,
// world 4 flushes 11 and 6 to 3, 1, 2 and 3, 1.
TEST_F(FlushOrder, LayerNormWeightBeforeBiasOrdersTheOwners) {
    // World 2 (layout above): flush 11 = [8 9 7 6 5]; even 8@196736 and 6@180352 -> partition 0,
    // odd 9, 7, 5 -> partition 1. Entries (0: 8), (1: 9 + 7), (0: 6), (1: 5); dict 0: [8 6] =
    // 16512, 1: [9 7 5] = 640: dst 0 first.
    const Schedule w2 = build(2, true);
    expect_flush(reduces_by_flush(w2), 11,
                 {{0, {{8, 0, 128}, {6, 0, 16384}}}, {1, {{9, 0, 128}, {7, 0, 128}, {5, 0, 384}}}});
    // World 4 (layout above): 8@180224 -> 1; 9@500352, exactly the start of partition 3
    // (start_index <= current_index: owner 3, offset 0); 7, 6 -> 3; 5@499968 ends exactly at
    // 500352 (no slice in 3: the straddle test is strict) -> owner 2. Flush 11 = [8 9 7 6 5]:
    // entries (1: 8), (3: 9 + 7 + 6), (2: 5); dict 1: [128], 3: [16640], 2: [384].
    const Schedule w4sched = build(4, true);
    auto w4 = reduces_by_flush(w4sched);
    expect_flush(w4, 11,
                 {{1, {{8, 0, 128}}}, {3, {{9, 0, 128}, {7, 0, 128}, {6, 0, 16384}}}, {2, {{5, 0, 384}}}});
    // Flush 6 = [20 21 19 18 17]: 20@295040 -> 1; 21@500992, 19, 18@583424, 17@500608 -> 3.
    // Entries (1: 20), (3: 21 + 19 + 18 + 17); dict 1: [128], 3: [17024].
    expect_flush(w4, 6,
                 {{1, {{20, 0, 128}}}, {3, {{21, 0, 128}, {19, 0, 128}, {18, 0, 16384}, {17, 0, 384}}}});
}

}  // namespace
