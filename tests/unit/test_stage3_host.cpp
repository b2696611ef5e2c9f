// Stage 3's host timeline (issue 15), derived by hand on a six-layer model of equal layers:
// DeepSpeed v0.14.2 partitioned_param_coordinator.py fetch_sub_module issues a module's gather in
// that module's pre-forward/pre-backward hook, waits on it with the __max_ongoing_fetch_events (2)
// throttle, then prefetches min(max_live_parameters - n_available, prefetch_bucket_size) elements
// once the trace is complete. tests/unit/test_stage3_memory.cpp checks the gathered bytes against
// the memory model; test_stage3_zero_init.cpp the --zero-init engine start.
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

std::string z3(const std::string& zero_extra) {
    return R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
      "stage3_param_persistence_threshold": 0)" + zero_extra + "}}";
}

Timed timed(const std::string& zero_extra, int steps = 2) {
    Timed t{test::build(test::param_list(kSixLayers), test::ds(z3(zero_extra)), 4, steps), {}};
    auto p = simulate(t.s, slow_link(), TimingMode::Overlapped);
    EXPECT_TRUE(p.ok());
    t.p = p.value();
    return t;
}

bool is_pre_hook(const HostEvent& e) { return e.kind == HostKind::PreForward || e.kind == HostKind::PreBackward; }
bool is_training_gather(const Op& op) { return op.step >= 0 && op.stream == Stream::Fetch && op.kind == OpKind::AllGather; }

// The host event after which the host issues op `id` (the last one with first_op <= id).
size_t issuing_event(const Schedule& s, int64_t id, bool (*pred)(const HostEvent&)) {
    size_t found = s.host.size();
    for (size_t e = 0; e < s.host.size() && s.host[e].first_op <= id; ++e)
        if (pred(s.host[e])) found = e;
    return found;
}

TEST(Stage3Host, HooksInModuleOrderOneGatherEach) {
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 0)", 1);
    // Step 0: pre-forward l1..l6 then pre-backward l6..l1, each with its own gather.
    std::vector<int> order;
    for (const auto& e : t.s.host)
        if (is_pre_hook(e) && e.step == 0 && e.module >= 0) order.push_back(e.module);
    std::vector<int> want = {0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0};
    EXPECT_EQ(order, want);
}

TEST(Stage3Host, WithoutPrefetchNoGatherStartsBeforeItsModulesHook) {
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 0, "stage3_max_reuse_distance": 0)");
    int checked = 0;
    for (const auto& op : t.s.ops) {
        if (!is_training_gather(op)) continue;
        EXPECT_EQ(op.rule, RuleId::Stage3Fetch) << op.id;  // no prefetch at all
        size_t e = issuing_event(t.s, op.id, is_pre_hook);
        ASSERT_LT(e, t.s.host.size()) << op.id;
        // The hook that issues it is its own module's: op.params is that module's weight.
        ASSERT_EQ(op.params.size(), 1u);
        EXPECT_EQ(t.s.host[e].module, op.params[0]) << op.id;
        // And it starts only once the host has run that hook (50 us of it).
        EXPECT_GE(t.p.ops[op.id].start_s, t.p.host[e].start_s + 50e-6 - 1e-12) << op.id;
        ++checked;
    }
    EXPECT_EQ(checked, 24);  // 2 steps x (6 forward + 6 backward): nothing is kept between modules
}

// The host's fetch events in record order: each FetchWait records fetch_events of them, each on
// the latest fetch-stream op issued before it.
std::vector<std::pair<size_t, int64_t>> fetch_events(const Schedule& s) {
    std::vector<std::pair<size_t, int64_t>> ev;   // (FetchWait event, fetch op)
    int64_t last = -1;
    size_t next = 0;
    for (size_t e = 0; e < s.host.size(); ++e) {
        for (; next < s.ops.size() && static_cast<int64_t>(next) < s.host[e].first_op; ++next)
            if (s.ops[next].stream == Stream::Fetch) last = static_cast<int64_t>(next);
        if (s.host[e].kind == HostKind::FetchWait)
            for (int k = 0; k < s.host[e].fetch_events; ++k) ev.push_back({e, last});
    }
    return ev;
}

TEST(Stage3Host, ThrottleWaitsForTheFetchThreeEventsBack) {
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 0)", 1);
    // Step 0 forward, one event per module: the wait of l4 synchronises on l1's gather, l5's on
    // l2's, l6's on l3's (more than two outstanding each time: the link is slow).
    std::map<int, int64_t> gather_of;   // module -> its forward gather
    for (const auto& op : t.s.ops)
        if (is_training_gather(op) && op.phase == Phase::Forward) gather_of[op.params[0]] = op.id;
    std::map<int, std::vector<int64_t>> waits;
    for (const auto& e : t.s.host)
        if (e.kind == HostKind::FetchWait && e.step == 0 && !e.waits.empty() && e.module >= 0 &&
            t.s.ops[static_cast<size_t>(e.first_op - 1)].phase == Phase::Forward)
            waits[e.module] = e.waits;
    std::map<int, std::vector<int64_t>> want = {{3, {gather_of[0]}}, {4, {gather_of[1]}}, {5, {gather_of[2]}}};
    EXPECT_EQ(waits, want);
}

// Rule O7: whatever the host issues after a throttle wait starts after the gather it waited on,
// through the IR's wait lists (the executor's plan) as well as on the engine's timeline.
TEST(Stage3Host, OpsIssuedAfterAThrottleWaitComeAfterItsGather) {
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 0)", 1);
    auto waits = wait_lists(t.s);
    auto clocks = queue_clocks(t.s, waits);
    int checked = 0;
    for (const auto& e : t.s.host) {
        if (e.waits.empty()) continue;
        for (int64_t i = e.first_op; i < static_cast<int64_t>(t.s.ops.size()) && i < e.first_op + 3; ++i) {
            for (int64_t w : e.waits) {
                // (the queue of the op waited on: a gather for O7, a reduce for O8's waits)
                EXPECT_GE(clocks[static_cast<size_t>(i)][static_cast<int>(queue_of(t.s.ops[static_cast<size_t>(w)].stream))], w) << i;
                EXPECT_GE(t.p.ops[static_cast<size_t>(i)].start_s, t.p.ops[static_cast<size_t>(w)].end_s - 1e-12) << i;
            }
            ++checked;
        }
    }
    EXPECT_GT(checked, 6);
}

TEST(Stage3Host, NoMoreThanThreeFetchesOutstandingWhenTheHostWaits) {
    for (const char* extra : {R"(, "stage3_prefetch_bucket_size": 0)", R"(, "stage3_prefetch_bucket_size": 1500)"}) {
        SCOPED_TRACE(extra);
        Timed t = timed(extra);
        auto ev = fetch_events(t.s);
        ASSERT_GT(ev.size(), 12u);
        int bound_reached = 0;
        for (size_t k = 0; k < ev.size(); ++k) {
            // When the host leaves the wait that recorded event k, events 0..k are recorded; those
            // whose fetch op has not finished are outstanding.
            if (k + 1 < ev.size() && ev[k + 1].first == ev[k].first) continue;  // the wait's last event
            double left = t.p.host[ev[k].first].end_s;
            int outstanding = 0;
            for (size_t j = 0; j <= k; ++j)
                if (t.p.ops[static_cast<size_t>(ev[j].second)].end_s > left + 1e-12) ++outstanding;
            EXPECT_LE(outstanding, 3) << "event " << k;
            bound_reached += outstanding == 3;
        }
        EXPECT_GT(bound_reached, 0);  // the slow link makes the throttle bind
    }
}

// max_live_parameters = P: each prefetch is bounded by P - n_available, n_available counting the
// current module, so the gathered elements never pass P plus the current module's (one weight of
// 1000 here; a prefetch stops at the first weight that reaches the budget).
TEST(Stage3Host, PrefetchBucketBoundsTheGatheredAhead) {
    const int64_t P = 2500;
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 2500, "stage3_max_live_parameters": 2500,
                       "stage3_max_reuse_distance": 0)");
    int prefetches = 0;
    for (const auto& op : t.s.ops) prefetches += op.step == 1 && op.rule == RuleId::Stage3Prefetch;
    EXPECT_GT(prefetches, 0);  // step 1 has a trace and prefetches
    ASSERT_FALSE(t.p.gathered.empty());
    for (const auto& g : t.p.gathered) EXPECT_LE(g.bytes, (P + 1000) * 4) << g.t_s;
    // By hand, step 1's first hook is the root container's (no parameters of its own): nothing
    // gathered, so min(2500 - 0, 2500) = 2500: l1 (1000), l2 (2000 < 2500), l3 (3000, stop):
    // 3000 elements in one prefetch, which is P + 500.
    int64_t first = -1;
    for (const auto& op : t.s.ops)
        if (op.step == 1 && op.rule == RuleId::Stage3Prefetch) {
            first = op.id;
            break;
        }
    ASSERT_GE(first, 0);
    EXPECT_EQ(t.s.ops[first].params, (std::vector<int>{0, 1, 2}));
    // l1's own hook next finds l1 gathered and n_available = 3000 >= P: no prefetch until a
    // release makes room (reuse distance 0 releases each layer after it runs).
    EXPECT_NE(t.s.ops[first + 1].rule, RuleId::Stage3Prefetch);
}

// With the default stage3_max_live_parameters (1e9) the bound is per call, as fetch_sub_module
// computes it: each hook's prefetch stays below P plus one weight, but successive hooks each add
// up to a bucket, so what is gathered ahead grows past P (up to max_live_parameters).
TEST(Stage3Host, PrefetchBoundIsPerCallWithTheDefaultMaxLive) {
    const int64_t P = 2500;
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 2500, "stage3_max_reuse_distance": 0)");
    int64_t most = 0;
    for (const auto& op : t.s.ops)
        if (op.rule == RuleId::Stage3Prefetch) {
            int64_t n = 0;
            for (int q : op.params) n += t.s.params[static_cast<size_t>(q)].numel;
            EXPECT_LT(n, P + 1000) << op.id;
            most = std::max(most, n);
        }
    EXPECT_EQ(most, 3000);
    int64_t peak = 0;
    for (const auto& g : t.p.gathered) peak = std::max(peak, g.bytes / 4);
    EXPECT_GT(peak, P + 1000);
}

TEST(Stage3Host, HostEventsPassTheCheckAndABrokenOneIsRefused) {
    Timed t = timed(R"(, "stage3_prefetch_bucket_size": 1500)");
    EXPECT_FALSE(check_schedule(t.s, "s.json"));
    size_t w = 0;
    while (w < t.s.host.size() && t.s.host[w].waits.empty()) ++w;
    ASSERT_LT(w, t.s.host.size());
    Schedule broken = t.s;
    broken.host[w].waits = {broken.host[w].first_op};   // not issued yet
    auto e = check_schedule(broken, "s.json");
    ASSERT_TRUE(e);
    EXPECT_NE(e->what().find("host[" + std::to_string(w) + "].waits"), std::string::npos) << e->what();
}

}  // namespace
