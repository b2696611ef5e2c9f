// How long `zerosim schedule` and `zerosim predict` take, and how much memory, for large jobs.
//
// Part 1 runs the real command line, as a user would, several times and prints the median wall
// time and the peak resident memory against the targets (Llama-2-70B, stage 3, world 4096,
// 2 steps: under 1 s and under 1 GiB; 1000 steps, streamed: under 300 MiB). Part 2 is a Google
// Benchmark of the generator alone per ZeRO stage, to see where time goes. Part 1 ends with predict
// of a long run timed by period (prediction/timed_stream.hpp). Machines here are
// shared: read medians and ratios.
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

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "formats/schedule_outputs.hpp"
#include "schedule/schedule.hpp"
#include "cli_runner.hpp"

namespace {

const std::string kConfigs = ZEROSIM_CONFIGS_DIR;

// zerosim predict of a long run: timed by period (prediction/timed_stream.hpp) against every step
// simulated (--trace takes every step; its file is a few MB at 50 steps), and at 1000 steps.
void predict_figures(const std::string& cfg) {
    const std::vector<std::string> base{"predict", "--ds-config", cfg, "--model", kConfigs + "/models/llama-2-70b.json",
                                        "--topology", kConfigs + "/../topologies/dgx-h100.json", "--nodes", "512"};
    std::printf("zerosim predict, the same on dgx-h100 x 512 (world 4096), deepspeed format\n");
    std::printf("%-34s %12s %14s\n", "run", "median s", "peak RSS MiB");
    double whole_s = 0, period_s = 0;
    for (const bool every_step : {true, false}) {
        std::vector<std::string> args = base;
        for (const char* a : {"--steps", "50", "-o", "/tmp/zerosim-bench-predict.txt"}) args.push_back(a);
        if (every_step) args.insert(args.end(), {"--trace", "/tmp/zerosim-bench-predict-trace.json"});
        auto f = zerosim::bench::measure(args, 3);
        (every_step ? whole_s : period_s) = f.seconds;
        std::printf("%-34s %12.3f %14.1f\n", every_step ? "50 steps, every step simulated" : "50 steps, by period", f.seconds,
                    f.max_rss_kib / 1024.0);
    }
    std::printf("ratio (every step / by period): %.1fx\n", whole_s / period_s);
    for (const char* format : {"deepspeed", "csv"}) {
        std::vector<std::string> args = base;
        for (const char* a : {"--steps", "1000", "-o", "/tmp/zerosim-bench-predict.txt", "--format", format}) args.push_back(a);
        auto f = zerosim::bench::measure(args, 3);
        std::printf("%-34s %12.3f %14.1f\n", (std::string("1000 steps, by period, ") + format).c_str(), f.seconds,
                    f.max_rss_kib / 1024.0);
    }
    std::printf("target: 1000 steps in bounded memory (every step simulated held the whole run: 2.7 MiB a step)\n\n");
    std::remove("/tmp/zerosim-bench-predict.txt");
    std::remove("/tmp/zerosim-bench-predict-trace.json");
}

void cli_figures() {
    // A stage-3 config with DeepSpeed's defaults, micro batch 1.
    std::string cfg = "/tmp/zerosim-bench-zero3.json";
    std::ofstream(cfg) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})";
    std::printf("zerosim schedule, Llama-2-70B (configs/models/llama-2-70b.json), ZeRO-3, world 4096, 2 steps\n");
    std::printf("%-10s %12s %14s\n", "format", "median s", "peak RSS MiB");
    for (const char* format : {"deepspeed", "table", "json"}) {
        auto f = zerosim::bench::measure({"schedule", "--ds-config", cfg, "--model", kConfigs + "/models/llama-2-70b.json",
                                          "--world", "4096", "--steps", "2", "--format", format},
                                         7);
        std::printf("%-10s %12.3f %14.1f\n", format, f.seconds, f.max_rss_kib / 1024.0);
    }
    std::printf("targets: under 1 s and under 1024 MiB\n\n");
    // Issue 34: a long run streamed step by step (schedule/stream.hpp) in flat memory; it held
    // 1.8 KB per line before (1.96 GB for the deepspeed format), and needed --max-ops raised.
    std::printf("zerosim schedule, the same at 1000 steps (2.3M ops), streamed; default --max-ops\n");
    std::printf("%-10s %12s %14s\n", "format", "median s", "peak RSS MiB");
    for (const char* format : {"deepspeed", "table", "json"}) {
        auto f = zerosim::bench::measure({"schedule", "--ds-config", cfg, "--model", kConfigs + "/models/llama-2-70b.json",
                                          "--world", "4096", "--steps", "1000", "--format", format},
                                         3);
        std::printf("%-10s %12.3f %14.1f\n", format, f.seconds, f.max_rss_kib / 1024.0);
    }
    std::printf("target: under 300 MiB\n\n");
    predict_figures(cfg);
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

void print_help() {
    std::printf("usage: schedule_bench [Google Benchmark flags]\n\n"
                "zerosim schedule's median wall time and peak RSS (Llama-2-70B, ZeRO-3, world 4096, 2 steps; targets\n"
                "under 1 s and 1024 MiB; 1000 steps: under 300 MiB), zerosim predict's of 50 steps timed by period\n"
                "and with every step simulated, and of 1000 steps by period, then a Google Benchmark of the\n"
                "generator per ZeRO stage. Its flags:\n\n");
    benchmark::PrintDefaultHelp();
}

int main(int argc, char** argv) {
    // Google Benchmark takes its own flags out of argv and prints print_help for --help (exit 0);
    // whatever is left is not ours either.
    benchmark::Initialize(&argc, argv, print_help);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    cli_figures();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
