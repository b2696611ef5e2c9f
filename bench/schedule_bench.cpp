// How long `zerosim schedule` takes, and how much memory, for large jobs.
//
// Part 1 runs the real command line, as a user would, several times and prints the median wall
// time and the peak resident memory against the targets (Llama-2-70B, stage 3, world 4096,
// 2 steps: under 1 s and under 1 GiB). Part 2 is a Google Benchmark of the generator alone per
// ZeRO stage, to see where time goes. Machines here are shared: read medians and ratios.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/ds_config.hpp"
#include "sim/model.hpp"
#include "sim/outputs/schedule_outputs.hpp"
#include "sim/schedule.hpp"

namespace {

const std::string kConfigs = ZEROSIM_CONFIGS_DIR;

struct RunFigures {
    double seconds;
    long max_rss_kib;
};

// fork/exec the zerosim binary with output to /dev/null; wait4 gives the child's peak RSS.
RunFigures run_cli(const std::vector<std::string>& args) {
    std::fflush(stdout);  // the child must not inherit unwritten output
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) {
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(ZEROSIM_BINARY));
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execv(ZEROSIM_BINARY, argv.data());
        _exit(127);
    }
    int status = 0;
    struct rusage ru {};
    wait4(pid, &status, 0, &ru);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "zerosim exited with status %d\n", WEXITSTATUS(status));
        std::exit(1);
    }
    return {secs, ru.ru_maxrss};
}

void cli_figures() {
    // A stage-3 config with DeepSpeed's defaults, micro batch 1.
    std::string cfg = "/tmp/zerosim-bench-zero3.json";
    std::ofstream(cfg) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})";
    std::printf("zerosim schedule, Llama-2-70B (configs/models/llama-2-70b.json), ZeRO-3, world 4096, 2 steps\n");
    std::printf("%-10s %12s %12s %14s\n", "format", "median s", "max s", "peak RSS MiB");
    for (const char* format : {"deepspeed", "table", "json"}) {
        std::vector<double> times;
        long rss = 0;
        for (int i = 0; i < 7; ++i) {
            auto f = run_cli({"schedule", "--ds-config", cfg, "--model", kConfigs + "/models/llama-2-70b.json", "--world",
                              "4096", "--steps", "2", "--format", format});
            times.push_back(f.seconds);
            rss = std::max(rss, f.max_rss_kib);
        }
        std::sort(times.begin(), times.end());
        std::printf("%-10s %12.3f %12.3f %14.1f\n", format, times[times.size() / 2], times.back(), rss / 1024.0);
    }
    std::printf("targets: under 1 s and under 1024 MiB\n\n");
}

void BM_BuildSchedule(benchmark::State& state) {
    int stage = static_cast<int>(state.range(0));
    auto model = zerosim::load_model(kConfigs + "/models/llama-2-70b.json");
    auto cfg = zerosim::parse_ds_config(
        "bench.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": )" +
                          std::to_string(stage) + "}}");
    zerosim::ScheduleOptions opt;
    opt.world = 4096;
    opt.steps = 2;
    size_t ops = 0;
    for (auto _ : state) {
        auto s = zerosim::build_schedule(model.value(), cfg.value(), opt);
        ops = s->ops.size();
        benchmark::DoNotOptimize(ops);
    }
    state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_BuildSchedule)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
    cli_figures();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
