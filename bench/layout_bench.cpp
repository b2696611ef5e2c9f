// Issue 29's benchmark: Llama-2-70B on 64 dgx-h100 nodes (512 GPUs, bf16, a global batch of 512
// sequences of 4096 tokens, micro batch 1) in four layouts: (tp, pp, dp) = (8, 1, 64), (8, 2, 32) and
// (4, 4, 32) under ZeRO-1, and (1, 1, 512) under ZeRO-3. Per layout: the predicted step (the
// pipeline's stages simulated together, timing/engine.hpp simulate_ranks), its bubble, the bytes
// stage 0's rank sends per step in each dimension, the memory of the stage that holds the most, and
// the wall time of the prediction (median of --repeat runs in this process; target <= 10 s at 512
// ranks in the default mode). Run: build/bench/layout_bench [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/sweep.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

struct Layout {
    int64_t tp, pp, dp;
    int stage;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    zerosim::bench::Args args(argc, argv,
                              "Llama-2-70B on 64 dgx-h100 nodes (512 ranks), global batch 512 x 4096 tokens: step, bubble, bytes\n"
                              "per dimension, memory and prediction wall time for (tp, pp, dp) = (8,1,64), (8,2,32), (4,4,32) under\n"
                              "ZeRO-1 and (1,1,512) under ZeRO-3.",
                              {{"--repeat", "N", "predictions per layout for the median wall time (default 3)"}});
    const int repeat = static_cast<int>(args.integer("--repeat", 3, 1, 100));
    const std::string src = ZEROSIM_SOURCE_DIR;
    auto model = load_model(src + "/configs/models/llama-2-70b.json");
    auto topo = load_topology(src + "/topologies/dgx-h100.json", 64);
    if (!model || !topo) {
        std::fprintf(stderr, "layout_bench: cannot read the model or the topology\n");
        return 1;
    }
    const std::vector<Layout> layouts = {{8, 1, 64, 1}, {8, 2, 32, 1}, {4, 4, 32, 1}, {1, 1, 512, 3}};
    std::printf("%-14s %5s %10s %10s %8s %12s %12s %12s %10s %10s %6s %10s\n", "layout", "ZeRO", "step ms", "bubble ms", "bubble%",
                "pipe GB", "tensor GB", "zero GB", "states GiB", "activ. GiB", "fits", "wall s");
    for (const Layout& L : layouts) {
        auto cfg = parse_ds_config("layout_bench.json",
                                   R"({"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                                       "zero_optimization": {"stage": )" + std::to_string(L.stage) + "}}");
        if (!cfg) {
            std::fprintf(stderr, "layout_bench: %s\n", cfg.error().what().c_str());
            return 1;
        }
        SweepSpec spec;
        spec.steps = L.stage == 3 ? 2 : 1;   // stage 3's steady state is its second step
        SweepPoint p;
        p.tp = L.tp;
        p.pp = L.pp;
        p.stage = L.stage;
        std::vector<double> walls;
        SweepResult r;
        for (int i = 0; i < repeat; ++i) {
            r = SweepResult{};
            r.world = topo->total_gpus();
            const auto t0 = std::chrono::steady_clock::now();
            predict_layout_point(spec, model.value(), cfg.value(), topo.value(), p, r);
            walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        char name[32];
        std::snprintf(name, sizeof name, "(%lld,%lld,%lld)", static_cast<long long>(L.tp), static_cast<long long>(L.pp),
                      static_cast<long long>(L.dp));
        if (!r.error.empty()) {
            std::printf("%-14s %5d  error: %s\n", name, L.stage, r.error.c_str());
            continue;
        }
        const double gib = 1024.0 * 1024 * 1024, compute_and_bubble = r.compute_ms + r.bubble_ms;
        std::printf("%-14s %5d %10.1f %10.1f %7.1f%% %12.3f %12.3f %12.3f %10.2f %10.2f %6s %10.3f\n", name, L.stage, r.step_ms,
                    r.bubble_ms, compute_and_bubble > 0 ? 100 * r.bubble_ms / compute_and_bubble : 0.0,
                    static_cast<double>(r.dimension_bytes[0]) / 1e9, static_cast<double>(r.dimension_bytes[1]) / 1e9,
                    static_cast<double>(r.dimension_bytes[4]) / 1e9, static_cast<double>(r.memory_bytes) / gib,
                    static_cast<double>(r.activation_bytes) / gib, r.fits.c_str(), median(walls));
    }
    std::printf("bubble%%: bubble / (compute + bubble) of the most idle stage; bytes: what stage 0's rank sends or logs per "
                "step; memory: the stage that holds the most; wall: median of %d predictions\n", repeat);
    return 0;
}
