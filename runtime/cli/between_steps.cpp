#include "between_steps.hpp"

#include <iostream>

#include "collbench/bench.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"

namespace zerorun {

namespace {
// What ZeRO's schedules call (DeepSpeed v0.14.2: stages 1-2 all_reduce or reduce_scatter the
// gradients and all_gather the parameters; stage 3 all_gathers and reduce_scatters; broadcast at
// start-up).
const char* const kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
}  // namespace

zerosim::Result<std::shared_ptr<BetweenSteps>> make_between_steps(Backend& be, const BetweenStepsArgs& a,
                                                                  const std::vector<std::string>& inputs,
                                                                  const std::vector<zerosim::OutputPath>& outputs) {
    std::vector<zerosim::OutputPath> all = outputs;   // the run's -o and --json, then every round's file
    for (const char* op : kOps) all.push_back({a.prefix + "-" + op + ".txt", "--bench-between-steps"});
    if (auto e = zerosim::check_outputs("zerorun", all, inputs)) return *e;
    auto mn = zerosim::parse_size(a.min, "--bench-min");
    if (!mn) return mn.error();
    auto mx = zerosim::parse_size(a.max, "--bench-max");
    if (!mx) return mx.error();
    if (*mx < *mn) return zerosim::Error{"", "--bench-max", "is smaller than --bench-min"};
    int64_t evict = 0;
    if (a.evict != "0") {
        auto ev = zerosim::parse_size(a.evict, "--bench-evict");
        if (!ev) return ev.error();
        evict = *ev;
    }
    auto b = std::make_shared<BetweenSteps>();
    std::vector<BenchOptions> rounds;
    for (const char* op : kOps) {
        std::string path = a.prefix + "-" + op + ".txt";
        auto f = std::make_unique<std::ofstream>();
        if (be.rank() == 0) {
            f->open(path, std::ios::trunc);
            if (!*f) return zerosim::Error{path, "--bench-between-steps", "cannot be written"};
        }
        b->files.push_back(std::move(f));
        BenchOptions o;
        o.op = op;
        o.min_bytes = *mn;
        o.max_bytes = *mx;
        o.factor = a.factor;
        o.iters = a.iters;
        o.warmup = 1;   // none with fresh buffers (bench.cpp)
        o.check = false;   // the run checks its own collectives; a round only times
        o.fenced = true;   // as the timed steps (--sync-each-op): single calls after a barrier, cold caches
        o.median_of_calls = true;
        o.evict_bytes = evict;
        o.fresh_buffers = a.fresh_buffers;
        rounds.push_back(o);
    }
    BetweenSteps* raw = b.get();
    const int every = a.every;
    b->hook = [&be, raw, rounds, every](int step) {
        if (step > 0 && step % every != 0) return;   // step -1: after the last step, always
        for (size_t i = 0; i < rounds.size(); ++i) {
            std::ostream& out = be.rank() == 0 ? static_cast<std::ostream&>(*raw->files[i]) : std::cout;
            run_bench(be, rounds[i], out);
        }
    };
    return b;
}

}  // namespace zerorun
