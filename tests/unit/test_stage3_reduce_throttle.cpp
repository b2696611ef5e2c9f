// Stage 3's gradient-reduce throttle on the host (rule O8), derived by hand on six equal layers
// with reduce_bucket_size = one layer's gradient. DeepSpeed v0.14.2 stage3.py: backward hands the
// gradients over l6..l1; reduce_independent_p_g_buckets_and_remove_grads flushes the bucket before
// each gradient that would overflow it, so flush 0 (l6) runs in l5's gradient hook, ..., flush 4
// (l2) in l1's, flush 5 (l1) in the epilogue. __reduce_and_partition_ipg_grads synchronize()s on
// the oldest param_reduce_events while more than max_param_reduce_events (2) are outstanding: flush
// k waits for the reduce of flush k - 3. independent_gradient_partition_epilogue synchronize()s
// reduce_and_partition_stream: the host waits for flush 5's reduce.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "inline_inputs.hpp"
#include "stage3_six_layers.hpp"
#include "schedule/check.hpp"
#include "schedule/ordering.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

using test::kSixLayers;
using test::slow_link;
using test::Timed;

Timed timed() {
    const std::string ds = R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
      "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0, "reduce_bucket_size": 1000}})";
    Timed t{test::build(test::param_list(kSixLayers), test::ds(ds), 4, 1), {}};
    auto p = simulate(t.s, slow_link(), TimingMode::Overlapped);
    EXPECT_TRUE(p.ok());
    t.p = p.value();
    return t;
}

bool is_reduce(const Op& op) { return is_collective(op.kind) && op.phase == Phase::Backward && op.bucket >= 0; }

}  // namespace

TEST(Stage3ReduceThrottle, FlushKWaitsForTheReduceOfFlushKMinusThree) {
    Timed t = timed();
    std::map<int, int64_t> reduce_of;   // flush (bucket) -> its reduce op
    for (const auto& op : t.s.ops)
        if (op.step == 0 && is_reduce(op)) reduce_of[op.bucket] = op.id;
    ASSERT_EQ(reduce_of.size(), 6u);
    // Bucket k holds layer 6 - k's gradient.
    for (const auto& [k, id] : reduce_of) EXPECT_EQ(t.s.ops[static_cast<size_t>(id)].params, std::vector<int>{5 - k});
    std::vector<std::vector<int64_t>> flush_waits;
    std::vector<int> flush_module;
    std::vector<int64_t> sync_waits;
    for (const auto& e : t.s.host) {
        if (e.step != 0) continue;
        if (e.kind == HostKind::GradientFlush) {
            flush_waits.push_back(e.waits);
            flush_module.push_back(e.module);
        }
        if (e.kind == HostKind::ReduceSync) sync_waits = e.waits;
    }
    std::vector<std::vector<int64_t>> want = {{}, {}, {}, {reduce_of[0]}, {reduce_of[1]}, {reduce_of[2]}};
    EXPECT_EQ(flush_waits, want);
    EXPECT_EQ(flush_module, (std::vector<int>{4, 3, 2, 1, 0, -1}));   // l5's hook .. l1's, the epilogue
    EXPECT_EQ(sync_waits, std::vector<int64_t>{reduce_of[5]});
    EXPECT_FALSE(check_schedule(t.s, "six").has_value());
}

// O8 in deps and on the timeline: l1's backward gather (issued in l1's pre-backward hook, after
// flush 3 in l2's gradient hook) waits for flush 0's reduce, which O2 holds behind l5's backward.
TEST(Stage3ReduceThrottle, BackwardGatherWaitsForComputeThroughTheReduce) {
    Timed t = timed();
    int64_t gather_l1 = -1, backward_l5 = -1, reduce0 = -1;
    for (const auto& op : t.s.ops) {
        if (op.step != 0 || op.phase != Phase::Backward) continue;
        if (op.stream == Stream::Fetch && op.params == std::vector<int>{0}) gather_l1 = op.id;
        if (op.kind == OpKind::Compute && op.module == 4) backward_l5 = op.id;
        if (is_reduce(op) && op.bucket == 0) reduce0 = op.id;
    }
    ASSERT_GE(gather_l1, 0);
    ASSERT_GE(backward_l5, 0);
    ASSERT_GE(reduce0, 0);
    auto clocks = queue_clocks(t.s, wait_lists(t.s));
    EXPECT_GE(clocks[static_cast<size_t>(gather_l1)][static_cast<int>(queue_of(t.s.ops[static_cast<size_t>(reduce0)].stream))], reduce0);
    EXPECT_GE(clocks[static_cast<size_t>(gather_l1)][static_cast<int>(Queue::Default)], backward_l5);
    EXPECT_GE(t.p.ops[static_cast<size_t>(gather_l1)].start_s, t.p.ops[static_cast<size_t>(reduce0)].end_s - 1e-12);
    EXPECT_GE(t.p.ops[static_cast<size_t>(gather_l1)].start_s, t.p.ops[static_cast<size_t>(backward_l5)].end_s - 1e-12);
}

// The epilogue's synchronize: the host leaves it only once the last reduce has finished, and
// issues the optimizer step after it.
TEST(Stage3ReduceThrottle, EpilogueWaitsForTheLastReduce) {
    Timed t = timed();
    for (size_t e = 0; e < t.s.host.size(); ++e) {
        const HostEvent& ev = t.s.host[e];
        if (ev.kind != HostKind::ReduceSync) continue;
        ASSERT_EQ(ev.waits.size(), 1u);
        EXPECT_GE(t.p.host[e].end_s, t.p.ops[static_cast<size_t>(ev.waits[0])].end_s - 1e-12);
        for (size_t i = static_cast<size_t>(ev.first_op); i < t.s.ops.size(); ++i)
            EXPECT_GE(t.p.ops[i].start_s, t.p.ops[static_cast<size_t>(ev.waits[0])].end_s - 1e-12) << i;
    }
}
