// The one ordering pass (schedule/ordering.hpp): the rules O1-O6 worked out by hand on a
// two-layer model, deps that are minimal and deterministic on every reference config, wait lists
// checked by hand on a seven-op schedule (the engine's plan among them), and the waits the engine and the executor used to derive on
// their own all still honoured. tests/runtime/test_wait_plans.cpp compares the executor's plan.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ordering.hpp"
#include "schedule/schedule.hpp"
#include "inline_inputs.hpp"
#include "test_helpers.hpp"
#include "timing/engine.hpp"

using namespace zerosim;

namespace {

using test::build;
using test::ds;
using test::param_list;

// l1.weight (5 elements) then l2.weight (9): forward runs l1, l2; backward l2, l1.
const char* kTwoLayers = R"({"parameters": [{"name": "l1.weight", "shape": [5]}, {"name": "l2.weight", "shape": [9]}]})";

// Happens-before of any wait plan, by transitive closure (no assumption about streams):
// reach[i] holds every op that i comes after.
struct Closure {
    std::vector<std::vector<bool>> reach;
    explicit Closure(const std::vector<std::vector<int64_t>>& waits) : reach(waits.size(), std::vector<bool>(waits.size())) {
        for (size_t i = 0; i < waits.size(); ++i)
            for (int64_t d : waits[i]) {
                reach[i][static_cast<size_t>(d)] = true;
                for (size_t k = 0; k < static_cast<size_t>(d); ++k)
                    if (reach[static_cast<size_t>(d)][k]) reach[i][k] = true;
            }
    }
    bool before(int64_t a, int64_t b) const { return reach[static_cast<size_t>(b)][static_cast<size_t>(a)]; }
};

int64_t find_op(const Schedule& s, const std::function<bool(const Op&)>& f, bool last = false) {
    int64_t found = -1;
    for (const auto& op : s.ops)
        if (f(op)) {
            found = op.id;
            if (!last) break;
        }
    EXPECT_GE(found, 0) << "no such op";
    return found;
}

bool is_compute(const Op& o, ComputeKind k) { return o.kind == OpKind::Compute && o.compute == k; }

const char* kStage3 = R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
    "stage3_param_persistence_threshold": 0, "overlap_comm": true}})";

}  // namespace

TEST(Ordering, StreamOrderIsOneQueuePerDeviceStream) {
    EXPECT_EQ(queue_of(Stream::Compute), Queue::Default);
    EXPECT_EQ(queue_of(Stream::Comm), Queue::Default);   // collectives on the default CUDA stream
    EXPECT_EQ(queue_of(Stream::Reduce), Queue::Reduce);
    EXPECT_EQ(queue_of(Stream::Fetch), Queue::Fetch);
    // Stage 0 runs everything on the default stream: stream order is the whole order, no deps.
    auto s = build(param_list(kTwoLayers), ds(R"({"train_micro_batch_size_per_gpu": 1})"), 4, 2);
    auto w = wait_lists(s);
    for (const auto& op : s.ops) {
        EXPECT_TRUE(op.deps.empty()) << op.id;
        if (op.id > 0) {
            EXPECT_EQ(w[op.id], std::vector<int64_t>{op.id - 1});
        }
    }
}

TEST(Ordering, O1TrainingStartsAfterEngineStart) {
    // Stage 3 at world 2: the first gather of step 0 is on the fetch stream, which has no earlier
    // op, so it needs a dep on the last engine-start op (the last init all_gather).
    auto s = build(param_list(kTwoLayers), ds(kStage3), 2);
    int64_t last_init = find_op(s, [](const Op& o) { return o.step < 0; }, true);
    int64_t first_fetch = find_op(s, [](const Op& o) { return o.stream == Stream::Fetch; });
    EXPECT_EQ(s.ops[first_fetch].deps, std::vector<int64_t>{last_init});
}

TEST(Ordering, O2ReductionWaitsForTheBackwardBeforeIt) {
    // Stage 2, overlap_comm, a 5-element bucket (stages 1/2 flush even an empty bucket): l2's
    // gradient (9) arrives first and flushes the empty bucket after backward(l2); l1's (5)
    // flushes [l2] after backward(l1); the epilogue flushes [l1]. The first two reductions wait
    // for the backward just before them; the epilogue's follows the second on its stream.
    auto s = build(param_list(kTwoLayers),
                   ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,
                         "overlap_comm": true, "reduce_scatter": false, "reduce_bucket_size": 5}})"),
                   4);
    std::vector<int64_t> bwd, red;
    for (const auto& op : s.ops) {
        if (is_compute(op, ComputeKind::Backward)) bwd.push_back(op.id);
        if (op.stream == Stream::Reduce) red.push_back(op.id);
    }
    ASSERT_EQ(bwd.size(), 2u);
    ASSERT_EQ(red.size(), 3u);
    EXPECT_EQ(s.ops[red[0]].elements, 0);
    EXPECT_EQ(s.ops[red[0]].deps, std::vector<int64_t>{bwd[0]});
    EXPECT_EQ(s.ops[red[1]].deps, std::vector<int64_t>{bwd[1]});
    EXPECT_TRUE(s.ops[red[2]].deps.empty());
    Closure hb(wait_lists(s));
    EXPECT_TRUE(hb.before(bwd[1], red[2]));
    // overlap: backward(l1) does not wait for the reduction issued before it
    EXPECT_GT(bwd[1], red[0]);
    EXPECT_FALSE(hb.before(red[0], bwd[1]));
}

TEST(Ordering, O3NextMicroStepAndStepWaitForTheEpilogue) {
    // Stage 2 with overlap_comm and two micro-steps: micro 1's first forward waits for micro 0's
    // last reduction (the epilogue synchronises); the optimizer step waits for micro 1's.
    auto s = build(param_list(kTwoLayers),
                   ds(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
                         "zero_optimization": {"stage": 2, "overlap_comm": true}})"),
                   4);
    int64_t red0 = find_op(s, [](const Op& o) { return o.stream == Stream::Reduce && o.micro == 0; }, true);
    int64_t red1 = find_op(s, [](const Op& o) { return o.stream == Stream::Reduce && o.micro == 1; }, true);
    int64_t fwd1 = find_op(s, [](const Op& o) { return is_compute(o, ComputeKind::Forward) && o.micro == 1; });
    int64_t first_step = find_op(s, [](const Op& o) { return o.phase == Phase::Step; });
    EXPECT_EQ(s.ops[fwd1].deps, std::vector<int64_t>{red0});
    EXPECT_EQ(s.ops[first_step].deps, std::vector<int64_t>{red1});
}

TEST(Ordering, O4ModuleComputeWaitsForTheGatherOfItsParameters) {
    // Stage 3, no persistence, world 2, one step: forward fetches l1 then l2 (each on its own,
    // the trace is still being recorded); backward fetches l2 again... Each module's compute
    // comes after the latest gather that carried its parameter.
    auto s = build(param_list(kTwoLayers), ds(kStage3), 2);
    Closure hb(wait_lists(s));
    std::map<int, int64_t> latest_gather;
    int checked = 0;
    for (const auto& op : s.ops) {
        if (op.stream == Stream::Fetch)
            for (int p : op.params) latest_gather[p] = op.id;
        if (op.kind == OpKind::Compute && op.module >= 0)
            for (int p : op.params) {
                ASSERT_TRUE(latest_gather.count(p)) << op.id;
                EXPECT_TRUE(hb.before(latest_gather[p], op.id)) << "op " << op.id << " param " << p;
                ++checked;
            }
    }
    EXPECT_EQ(checked, 4);  // forward and backward of l1 and l2
    // the gather of l2 for forward is not awaited by l1's forward
    int64_t fwd_l1 = find_op(s, [](const Op& o) { return is_compute(o, ComputeKind::Forward) && o.module_name == "l1"; });
    int64_t gather_l2 = find_op(s, [](const Op& o) { return o.stream == Stream::Fetch && o.params == std::vector<int>{1}; });
    EXPECT_GT(gather_l2, fwd_l1);   // issued after l1's forward, in l2's pre-forward hook
    EXPECT_FALSE(hb.before(gather_l2, fwd_l1));
}

TEST(Ordering, O5AndO6StepAndGathersFenceEachOther) {
    // Stage 3, two steps: the optimizer step comes after every gather of step 0 (O5), and the
    // first gather of step 1 after the last op of step 0's optimizer step (O6).
    auto s = build(param_list(kTwoLayers), ds(kStage3), 2, 2);
    Closure hb(wait_lists(s));
    int64_t opt0 = find_op(s, [](const Op& o) { return is_compute(o, ComputeKind::OptimizerStep) && o.step == 0; });
    for (const auto& op : s.ops)
        if (op.stream == Stream::Fetch && op.step == 0) {
            EXPECT_TRUE(hb.before(op.id, opt0)) << op.id;
        }
    int64_t last_step0 = find_op(s, [](const Op& o) { return o.phase == Phase::Step && o.step == 0; }, true);
    int64_t fetch1 = find_op(s, [](const Op& o) { return o.stream == Stream::Fetch && o.step == 1; });
    EXPECT_TRUE(hb.before(last_step0, fetch1));
    EXPECT_EQ(s.ops[fetch1].deps, std::vector<int64_t>{last_step0});
}

TEST(Ordering, O5StepWaitsForAPrefetchNoModuleAwaited) {
    // Written by hand: a gather of p0 for module 0's forward, then a prefetch of p1 that no module
    // uses before the optimizer step. The forward waits for its gather (O4); the step waits for
    // the prefetch (O5: release_and_reset_all waits on every in-flight gather), which implies
    // the first gather by the fetch stream's order.
    Schedule s;
    auto gather = [](int p) {
        Op o;
        o.kind = OpKind::AllGather;
        o.stream = Stream::Fetch;
        o.phase = Phase::Forward;
        o.step = 0;
        o.micro = 0;
        o.params = {p};
        return o;
    };
    Op fwd;
    fwd.kind = OpKind::Compute;
    fwd.compute = ComputeKind::Forward;
    fwd.stream = Stream::Compute;
    fwd.phase = Phase::Forward;
    fwd.step = 0;
    fwd.micro = 0;
    fwd.module = 0;
    fwd.params = {0};
    Op step = fwd;
    step.compute = ComputeKind::OptimizerStep;
    step.phase = Phase::Step;
    step.micro = -1;
    step.module = -1;
    s.add(gather(0));
    s.add(fwd);
    s.add(gather(1));
    s.add(step);
    add_ordering_deps(s);
    EXPECT_TRUE(s.ops[0].deps.empty());
    EXPECT_EQ(s.ops[1].deps, std::vector<int64_t>{0});
    EXPECT_TRUE(s.ops[2].deps.empty());   // prefetches do not wait for compute
    EXPECT_EQ(s.ops[3].deps, std::vector<int64_t>{2});
    EXPECT_EQ(wait_lists(s)[3], (std::vector<int64_t>{1, 2}));
}

// ---- Every reference config ----

struct RefCase {
    std::string name, config, model;
};

std::vector<RefCase> reference_cases() {
    namespace fs = std::filesystem;
    std::vector<RefCase> out;
    for (const char* set : {"deepspeed-v0.14.2-cpu", "deepspeed-releases-cpu"}) {
        std::vector<fs::path> dirs;
        for (const auto& e : fs::directory_iterator(test::reference(set)))
            if (e.is_directory() && fs::exists(e.path() / "ds_config.json")) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        EXPECT_GE(dirs.size(), 3u) << set;   // z1/z2/z3 runs and the v0.14.2/0.16.2/0.18.2 releases
        for (const auto& d : dirs)
            out.push_back({std::string(set) + "/" + d.filename().string(), (d / "ds_config.json").string(),
                           test::reference(std::string(set) + "/model.json")});
    }
    std::vector<fs::path> cfgs;
    for (const auto& e : fs::directory_iterator(test::config("deepspeed")))
        if (e.path().extension() == ".json") cfgs.push_back(e.path());
    std::sort(cfgs.begin(), cfgs.end());
    EXPECT_GE(cfgs.size(), 7u);   // zero0-3 and tiny-zero1-3
    for (const auto& c : cfgs) out.push_back({"configs/" + c.filename().string(), c.string(), test::config("models/tiny-gpt.json")});
    return out;
}

Schedule reference_schedule(const RefCase& c, int steps) {
    auto cfg = load_ds_config(c.config);
    auto model = load_model(c.model);
    EXPECT_TRUE(cfg.ok() && model.ok()) << c.name;
    ScheduleOptions o;
    o.world = 4;
    o.steps = steps;
    auto s = build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << c.name;
    return s.value();
}

// The waits the engine added on its own before the ordering pass (add_implicit_dependencies),
// restated here as the oracle they were: init before side streams, fetch after the step,
// compute after its gathers, the step after every reduce-stream op.
std::vector<std::vector<int64_t>> former_engine_waits(const Schedule& s) {
    std::vector<std::vector<int64_t>> w(s.ops.size());
    std::map<int, int64_t> gather_of;
    int64_t last_reduce = -1, last_step = -1, last_init = -1;
    for (const auto& op : s.ops) {
        auto& wi = w[op.id];
        if (op.step < 0) last_init = op.id;
        else if (last_init >= 0 && queue_of(op.stream) != Queue::Default) wi.push_back(last_init);
        if (op.stream == Stream::Fetch) {
            if (last_step >= 0) wi.push_back(last_step);
            for (int p : op.params) gather_of[p] = op.id;
        }
        if (op.kind == OpKind::Compute && op.module >= 0)
            for (int p : op.params)
                if (gather_of.count(p)) wi.push_back(gather_of[p]);
        if (op.phase == Phase::Step && last_reduce >= 0) wi.push_back(last_reduce);
        if (op.stream == Stream::Reduce) last_reduce = op.id;
        if (op.phase == Phase::Step) last_step = op.id;
    }
    return w;
}

// Seven ops written by hand, one queue each column: Default (compute, comm) | Reduce | Fetch.
// Each op's wait list is its deps plus the op before it on its queue, sorted, once each.
TEST(Ordering, WaitListsAreDepsPlusThePreviousOpOfTheQueue) {
    Schedule s;
    auto add = [&](Stream st, std::vector<int64_t> deps) {
        Op op;
        op.stream = st;
        op.deps = std::move(deps);
        s.add(std::move(op));
    };
    add(Stream::Compute, {});      // 0: first on Default
    add(Stream::Comm, {});         // 1: Default after 0
    add(Stream::Reduce, {0});      // 2: first on Reduce; waits for 0
    add(Stream::Fetch, {});        // 3: first on Fetch
    add(Stream::Compute, {3, 2});  // 4: Default after 1; waits for 2 and 3 (given unsorted)
    add(Stream::Reduce, {4});      // 5: Reduce after 2; waits for 4
    add(Stream::Comm, {4});        // 6: Default after 4, which it also names: once
    const std::vector<std::vector<int64_t>> expected = {{}, {0}, {0}, {}, {1, 2, 3}, {2, 4}, {4}};
    EXPECT_EQ(wait_lists(s), expected);
    EXPECT_EQ(engine_wait_plan(s), expected);
}

TEST(OrderingReference, DepsAreDeterministicAndMinimal) {
    for (const auto& c : reference_cases()) {
        SCOPED_TRACE(c.name);
        Schedule s = reference_schedule(c, 2);
        auto waits = wait_lists(s);
        // Deterministic: the pass over its own output gives the same deps.
        Schedule again = s;
        add_ordering_deps(again);
        for (size_t i = 0; i < s.ops.size(); ++i) EXPECT_EQ(again.ops[i].deps, s.ops[i].deps) << i;
        // Sorted, earlier, and none implied by the op's other waits.
        auto clocks = queue_clocks(s, waits);
        for (const auto& op : s.ops) {
            EXPECT_TRUE(std::is_sorted(op.deps.begin(), op.deps.end())) << op.id;
            for (int64_t d : op.deps) {
                ASSERT_LT(d, op.id);
                std::vector<int64_t> others;
                for (int64_t x : waits[op.id])
                    if (x != d) others.push_back(x);
                std::array<int64_t, kQueues> c2;
                c2.fill(-1);
                for (int64_t x : others)
                    for (int q = 0; q < kQueues; ++q) c2[q] = std::max(c2[q], clocks[x][q]);
                EXPECT_LT(c2[static_cast<int>(queue_of(s.ops[d].stream))], d) << "dep " << d << " of op " << op.id << " is implied";
            }
        }
    }
}

TEST(OrderingReference, EveryWaitTheEngineUsedToAddIsHonoured) {
    for (const auto& c : reference_cases()) {
        SCOPED_TRACE(c.name);
        Schedule s = reference_schedule(c, 3);
        Closure hb(wait_lists(s));
        auto former = former_engine_waits(s);
        for (const auto& op : s.ops)
            for (int64_t d : former[op.id]) EXPECT_TRUE(hb.before(d, op.id)) << d << " -> " << op.id;
    }
}
