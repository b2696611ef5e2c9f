// The executor waits on the IR's ordering and on nothing of its own: on every reference config
// its wait plan equals schedule/ordering.hpp's wait_lists, which tests/unit/test_ordering.cpp
// shows is the timing engine's plan, so the engine and the executor honour one happens-before
// relation. And the waits the executor used to derive itself (same-data waits across its threads,
// fences around init and the optimizer step) all still hold, but for one documented case.
// No MPI here: the plans are read without running anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ordering.hpp"
#include "schedule/schedule.hpp"

namespace {

using zerosim::Op;
using zerosim::OpKind;
using zerosim::Schedule;

struct Case {
    std::string name, config, model;
};

// Each ds_config.json of the v0.14.2 and release reference runs with their model, and every
// config of configs/deepspeed with tiny-gpt; all at world 4.
std::vector<Case> reference_cases() {
    namespace fs = std::filesystem;
    const std::string ref = ZEROSIM_REFERENCE_DIR;
    std::vector<Case> out;
    for (const char* set : {"deepspeed-v0.14.2-cpu", "deepspeed-releases-cpu"}) {
        std::vector<fs::path> dirs;
        for (const auto& e : fs::directory_iterator(ref + "/" + set))
            if (e.is_directory() && fs::exists(e.path() / "ds_config.json")) dirs.push_back(e.path());
        std::sort(dirs.begin(), dirs.end());
        EXPECT_GE(dirs.size(), 3u) << set;   // z1/z2/z3 runs and the v0.14.2/0.16.2/0.18.2 releases
        for (const auto& d : dirs)
            out.push_back({std::string(set) + "/" + d.filename().string(), (d / "ds_config.json").string(),
                           ref + "/" + set + "/model.json"});
    }
    std::vector<fs::path> cfgs;
    for (const auto& e : fs::directory_iterator(std::string(ZEROSIM_CONFIGS_DIR) + "/deepspeed"))
        if (e.path().extension() == ".json") cfgs.push_back(e.path());
    std::sort(cfgs.begin(), cfgs.end());
    EXPECT_GE(cfgs.size(), 7u);   // zero0-3 and tiny-zero1-3
    for (const auto& c : cfgs)
        out.push_back({"configs/" + c.filename().string(), c.string(), std::string(ZEROSIM_CONFIGS_DIR) + "/models/tiny-gpt.json"});
    return out;
}

Schedule schedule_of(const Case& c, int steps) {
    auto cfg = zerosim::load_ds_config(c.config);
    auto model = zerosim::load_model(c.model);
    EXPECT_TRUE(cfg.ok() && model.ok()) << c.name;
    zerosim::ScheduleOptions o;
    o.world = 4;
    o.steps = steps;
    auto s = zerosim::build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << c.name;
    return s.value();
}

// reach[i][k]: op k happens before op i under the wait plan (transitive closure).
std::vector<std::vector<bool>> closure(const std::vector<std::vector<int64_t>>& waits) {
    std::vector<std::vector<bool>> reach(waits.size(), std::vector<bool>(waits.size()));
    for (size_t i = 0; i < waits.size(); ++i)
        for (int64_t d : waits[i]) {
            auto du = static_cast<size_t>(d);
            reach[i][du] = true;
            for (size_t k = 0; k < du; ++k)
                if (reach[du][k]) reach[i][k] = true;
        }
    return reach;
}

// The executor's own rules before the ordering pass (its former plan_waits), kept as the oracle
// they were: the IR's deps; the last earlier op touching one of the op's parameters; init and
// optimizer-step ops after the last op of the other thread, and every op after the last of them.
std::vector<std::vector<int64_t>> former_executor_waits(const Schedule& s) {
    std::vector<std::vector<int64_t>> waits(s.ops.size());
    std::vector<int64_t> last_touch(s.params.size(), -1);
    int64_t last_on[2] = {-1, -1}, last_fence = -1;
    for (const auto& op : s.ops) {
        int th = op.kind == OpKind::Compute ? 0 : 1;
        auto& w = waits[op.id];
        bool fence = op.phase == zerosim::Phase::Init || op.phase == zerosim::Phase::Step;
        if (fence && last_on[1 - th] >= 0) w.push_back(last_on[1 - th]);
        if (last_fence >= 0) w.push_back(last_fence);
        std::vector<int> touched = op.params;
        for (const auto& sg : op.segments) touched.push_back(sg.param);
        for (int p : touched) {
            if (last_touch[p] >= 0 && last_touch[p] != op.id) w.push_back(last_touch[p]);
            last_touch[p] = op.id;
        }
        last_on[th] = op.id;
        if (fence) last_fence = op.id;
    }
    return waits;
}

bool on_comm_thread(const Op& op) { return op.kind != OpKind::Compute; }

}  // namespace

TEST(WaitPlans, ExecutorFollowsTheIrOrderingOnEveryReferenceConfig) {
    for (const auto& c : reference_cases()) {
        SCOPED_TRACE(c.name);
        Schedule s = schedule_of(c, 2);
        auto ir = zerosim::wait_lists(s);
        auto ex = zerorun::executor_wait_plan(s);
        EXPECT_EQ(ex, ir);
        EXPECT_EQ(closure(ex), closure(ir));
    }
}

TEST(WaitPlans, WaitsTheExecutorUsedToDeriveStillHold) {
    // Every former wait holds under the IR's relation, or the communication thread's IR order
    // gives it (both ops collectives), or it is the one case left out on purpose: a stage-3
    // gather rewriting, within the same step, the working copy of a parameter an earlier forward
    // or backward read (the bytes written are those already there; plan_waits.cpp explains).
    for (const auto& c : reference_cases()) {
        SCOPED_TRACE(c.name);
        Schedule s = schedule_of(c, 3);
        auto hb = closure(zerosim::wait_lists(s));
        auto former = former_executor_waits(s);
        int64_t waived = 0;
        for (const auto& op : s.ops)
            for (int64_t d : former[op.id]) {
                const Op& before = s.ops[d];
                if (hb[op.id][d]) continue;
                if (on_comm_thread(before) && on_comm_thread(op)) continue;
                bool gather_after_read = op.stream == zerosim::Stream::Fetch && before.kind == OpKind::Compute &&
                                         before.compute != zerosim::ComputeKind::OptimizerStep && before.step == op.step;
                if (gather_after_read) {
                    ++waived;
                    continue;
                }
                ADD_FAILURE() << "op " << op.id << " no longer waits for op " << d;
            }
        if (s.meta.stage != 3) {
            EXPECT_EQ(waived, 0);
        }
    }
}
