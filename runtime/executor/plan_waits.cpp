// What each op waits for before it starts on its thread (the executor's scheduling rules), kept
// apart from the threads that follow them (scheduling.cpp).
#include <algorithm>

#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;
using zerosim::Phase;

namespace {

// The waits of every op of `s_`, into `waits_` (indexed by op id).
struct WaitPlanner {
    const Schedule& s_;
    std::vector<std::vector<int64_t>>& waits_;

    // ---- Scheduling: what each op waits for beyond its own thread's order. ----
    //  - the IR's deps;
    //  - data: the last earlier op on the other thread that touches one of its parameters (a
    //    backward waits for the gather of the weights it reads; a reduction for the backward that
    //    wrote its gradients; a later backward for the reduction that read the previous ones);
    //  - fences: init and optimizer-step ops see every earlier op finished and every later op
    //    waits for them (the step reads all reduced gradients and rewrites the weights).
    // With --sync-each-op one thread runs every op in IR order (run()), so none of this applies.
    void plan_waits() {
        const size_t n = s_.ops.size();
        waits_.assign(n, {});
        std::vector<int64_t> last_touch(s_.params.size(), -1);
        int64_t last_on[2] = {-1, -1};
        int64_t last_fence = -1;
        for (size_t i = 0; i < n; ++i) {
            const Op& op = s_.ops[i];
            int th = op.kind == OpKind::Compute ? 0 : 1;
            auto& w = waits_[i];
            bool fence = op.phase == Phase::Init || op.phase == Phase::Step;
            for (int64_t d : op.deps)
                if (d >= 0 && d < static_cast<int64_t>(i)) w.push_back(d);
            if (fence && last_on[1 - th] >= 0) w.push_back(last_on[1 - th]);
            if (last_fence >= 0) w.push_back(last_fence);
            std::vector<int> touched = op.params;
            for (const auto& sg : op.segments) touched.push_back(sg.param);
            for (int p : touched)
                if (p >= 0 && p < static_cast<int>(last_touch.size())) {
                    if (last_touch[p] >= 0 && last_touch[p] != static_cast<int64_t>(i)) w.push_back(last_touch[p]);
                    last_touch[p] = static_cast<int64_t>(i);
                }
            std::sort(w.begin(), w.end());
            w.erase(std::unique(w.begin(), w.end()), w.end());
            last_on[th] = static_cast<int64_t>(i);
            if (fence) last_fence = static_cast<int64_t>(i);
        }
    }
};

}  // namespace

void Executor::plan_waits() { WaitPlanner{s_, waits_}.plan_waits(); }

}  // namespace detail
}  // namespace zerorun
