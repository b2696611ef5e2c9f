// Issue 18's benchmark: the cost of fabric mode (timing/fabric.hpp) for one Llama-2-70B ZeRO-3
// step (bf16, micro batch 1, zero.Init) on dgx-h100 nodes under 16-node leaf switches with a 2:1
// spine and one NIC at half speed, at 64, 512 and 4096 ranks. Each size runs in a child process so
// that its wall time and peak memory (getrusage's maximum resident set) are its own; the
// representative mode's wall time is beside it; then the same with hpZ 8 and qgZ (ZeRO++), whose
// all_to_all flows are the costliest pattern. Targets (issue 18): 4096 ranks in <= 60 s, <= 8 GiB.
// Run: build/bench/fabric_bench [RANKS...]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/gathered_budget.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One size, in this (child) process: prints one row.
int run_size(int64_t ranks, bool fabric, bool qgz) {
    const std::string src = ZEROSIM_SOURCE_DIR;
    auto model = load_model(src + "/configs/models/llama-2-70b.json");
    auto topo = load_topology(src + "/topologies/dgx-h100.json", ranks / 8);
    auto cfg = parse_ds_config("bench.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, )"
                                             R"("zero_optimization": {"stage": 3)" +
                                             std::string(qgz ? R"(, "zero_hpz_partition_size": 8, "zero_quantized_gradients": true)" : "") + "}}");
    if (!model || !topo || !cfg) return 1;
    Topology t = topo.value();
    t.nodes_per_leaf = 16;
    t.oversubscription = 2;
    const auto t0 = std::chrono::steady_clock::now();
    ScheduleOptions o;
    o.world = ranks;
    o.steps = 1;
    o.zero_init = true;
    o.gpus_per_node = t.gpus_per_node;
    auto s = build_schedule(model.value(), cfg.value(), o);
    if (!s) return 1;
    const double build_s = seconds_since(t0);
    const int64_t budget = gathered_parameter_budget(model.value(), cfg.value(), s.value(), t);
    const auto t1 = std::chrono::steady_clock::now();
    Result<Prediction> p = Error{};
    int sims = 0;
    if (fabric) {
        FabricOptions fo;
        fo.degrade.push_back(parse_fabric_what_if("node1.nic3=0.5", "--degrade").value());
        auto m = FabricModel::build(t, ranks, fo);
        if (!m) return 1;
        EngineAdjust a = m.value()->engine_adjust(s->meta);
        p = simulate(s.value(), m.value()->ideal_topology(), TimingMode::Overlapped, budget, &a);
        sims = m.value()->flow_simulations();
    } else {
        p = simulate(s.value(), t, TimingMode::Overlapped, budget);
    }
    if (!p) return 1;
    std::printf("%6lld %-9s %-14s %8zu %6d %10.2f %10.2f %12.1f", static_cast<long long>(ranks), qgz ? "hpZ+qgZ" : "ZeRO-3",
                fabric ? "fabric" : "representative",
                s->ops.size(), sims, build_s, seconds_since(t1), p->steps.back().step_s() * 1e3);
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int64_t> sizes;
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
    if (sizes.empty()) sizes = {64, 512, 4096};
    std::printf("Llama-2-70B ZeRO-3, bf16, micro batch 1, 1 step on dgx-h100 nodes, 16 nodes per leaf, 2:1 spine;\n"
                "fabric mode with node1.nic3 at half speed; hpZ+qgZ: zero_hpz_partition_size 8 and qgZ. Each row a child process.\n");
    std::printf("%6s %-9s %-14s %8s %6s %10s %10s %12s %10s\n", "ranks", "config", "mode", "ops", "flows", "build (s)", "time (s)",
                "step (ms)", "peak MiB");
    for (bool qgz : {false, true})
    for (int64_t n : sizes)
        for (bool fabric : {false, true}) {
            std::fflush(stdout);   // the child must not print the parent's buffer again
            pid_t pid = fork();
            if (pid == 0) std::_Exit(run_size(n, fabric, qgz));
            int status = 0;
            struct rusage ru {};
            wait4(pid, &status, 0, &ru);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("%6lld failed", static_cast<long long>(n));
            std::printf(" %10.0f\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
        }
    std::printf("'flows': flow simulations run (one per traffic pattern, process group and link kind);\n"
                "'time': the simulation, after the schedule's build.\n");
    return 0;
}
