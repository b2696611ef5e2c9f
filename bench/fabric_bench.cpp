// Issues 18 and 34's benchmark: the cost of fabric mode (timing/fabric.hpp) as ranks grow, for
// Llama-2-70B ZeRO-3 (bf16, micro batch 1, zero.Init) on dgx-h100 nodes under 16-node leaf switches
// with a 2:1 spine and one NIC at half speed, then the same with hpZ 8 and qgZ (ZeRO++), whose
// all_to_all flows are the costliest pattern. Each size runs in a child process so that its wall
// time and peak memory (getrusage's maximum resident set) are its own; the representative mode's
// row is beside it. Then, per configuration, the exponent of fabric mode's wall time and peak
// memory in the ranks (least squares on their logarithms). Targets (issue 34): exponent <= 1.3,
// 32,768 ranks in < 30 s, 262,144 in < 10 minutes (issue 18: 4096 ranks in <= 60 s, <= 8 GiB).
// Run: build/bench/fabric_bench [--steps N] [--config zero3|zeropp|all] [RANKS...]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
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

constexpr const char* kUsage =
    "usage: fabric_bench [--steps N] [--config zero3|zeropp|all] [RANKS...]\n"
    "  RANKS            world sizes, multiples of 8 (dgx-h100 nodes) up to 1048576; default 4096 8192 16384 32768\n"
    "  --steps N        training steps to simulate, 1 to 100 (default 1)\n"
    "  --config C       zero3 (ZeRO-3), zeropp (hpZ 8 + qgZ) or all (default)\n"
    "  --help           this text\n";

struct Args {
    std::vector<int64_t> sizes;
    int64_t steps = 1;
    bool zero3 = true, zeropp = true;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A whole number in [lo, hi], or -1.
int64_t whole(const std::string& s, int64_t lo, int64_t hi) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9) return -1;
    const int64_t v = std::stoll(s);
    return v >= lo && v <= hi ? v : -1;
}

// One line on stderr; the exit status of an argument refused.
int refuse(const std::string& line) {
    std::fprintf(stderr, "fabric_bench: %s\n", line.c_str());
    return 2;
}

// Returns the exit status to end with (0: --help, 2: an argument refused), or -1 to run.
int parse(int argc, char** argv, Args& a) {
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        const std::string next = i + 1 < argc ? argv[i + 1] : "(nothing)";
        if (s == "--help" || s == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (s == "--steps") {
            if ((a.steps = whole(next, 1, 100)) < 0) return refuse("--steps: expected a whole number from 1 to 100, found '" + next + "'");
            ++i;
        } else if (s == "--config") {
            if (next != "zero3" && next != "zeropp" && next != "all")
                return refuse("--config: expected zero3, zeropp or all, found '" + next + "'");
            a.zero3 = next != "zeropp";
            a.zeropp = next != "zero3";
            ++i;
        } else if (const int64_t n = whole(s, 8, 1048576); n > 0 && n % 8 == 0) {
            a.sizes.push_back(n);
        } else {
            return refuse("'" + s + "': expected a rank count (a multiple of 8 from 8 to 1048576), --steps N, --config "
                          "zero3|zeropp|all or --help");
        }
    }
    if (a.sizes.empty()) a.sizes = {4096, 8192, 16384, 32768};
    return -1;
}

// One size, in this (child) process: prints one row (the parent adds wall time and peak memory).
int run_size(int64_t ranks, bool fabric, bool qgz, int64_t steps) {
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
    o.steps = steps;
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
    std::printf("%7lld %-9s %-14s %8zu %6d %10.2f %10.2f %12.1f", static_cast<long long>(ranks), qgz ? "hpZ+qgZ" : "ZeRO-3",
                fabric ? "fabric" : "representative", s->ops.size(), sims, build_s, seconds_since(t1), p->steps.back().step_s() * 1e3);
    std::fflush(stdout);
    return 0;
}

// The slope of log(y) on log(x), least squares (0 with fewer than two points).
double exponent(const std::vector<double>& x, const std::vector<double>& y) {
    const double n = static_cast<double>(x.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double lx = std::log(x[i]), ly = std::log(y[i]);
        sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
    }
    const double d = n * sxx - sx * sx;
    return x.size() < 2 || d == 0 ? 0 : (n * sxy - sx * sy) / d;
}

// One configuration's rows, each a child process; then fabric mode's fitted exponents.
void run_config(const Args& a, bool qgz) {
    std::vector<double> ranks, wall, rss;
    for (int64_t n : a.sizes)
        for (bool fabric : {false, true}) {
            std::fflush(stdout);   // the child must not print the parent's buffer again
            const auto t0 = std::chrono::steady_clock::now();
            pid_t pid = fork();
            if (pid == 0) std::_Exit(run_size(n, fabric, qgz, a.steps));
            int status = 0;
            struct rusage ru {};
            wait4(pid, &status, 0, &ru);
            const double w = seconds_since(t0), mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
            const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!ok) std::printf("%7lld %-9s %-14s failed", static_cast<long long>(n), qgz ? "hpZ+qgZ" : "ZeRO-3", fabric ? "fabric" : "representative");
            std::printf(" %10.2f %10.0f\n", w, mib);
            if (ok && fabric) ranks.push_back(static_cast<double>(n)), wall.push_back(w), rss.push_back(mib);
        }
    if (ranks.size() >= 2)
        std::printf("%s fabric mode over %zu sizes (%.0f to %.0f ranks): wall time ~ ranks^%.2f, peak memory ~ ranks^%.2f\n",
                    qgz ? "hpZ+qgZ" : "ZeRO-3", ranks.size(), ranks.front(), ranks.back(), exponent(ranks, wall), exponent(ranks, rss));
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    if (int status = parse(argc, argv, a); status >= 0) return status;
    std::printf("Llama-2-70B ZeRO-3, bf16, micro batch 1, %lld step(s) on dgx-h100 nodes, 16 nodes per leaf, 2:1 spine;\n"
                "fabric mode with node1.nic3 at half speed; hpZ+qgZ: zero_hpz_partition_size 8 and qgZ. Each row a child process.\n",
                static_cast<long long>(a.steps));
    std::printf("%7s %-9s %-14s %8s %6s %10s %10s %12s %10s %10s\n", "ranks", "config", "mode", "ops", "flows", "build (s)", "time (s)",
                "step (ms)", "wall (s)", "peak MiB");
    if (a.zero3) run_config(a, false);
    if (a.zeropp) run_config(a, true);
    std::printf("'flows': flow simulations run (one per traffic pattern, process group and link kind); 'build': the schedule;\n"
                "'time': the simulation after it (fabric mode: the platform and the flows included); 'wall': the whole child.\n"
                "Targets (issue 34): fabric wall time exponent <= 1.3, 32768 ranks < 30 s, 262144 ranks < 600 s.\n");
    return 0;
}
