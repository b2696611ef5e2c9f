// How long `zerosim predict` takes and how much memory it needs, run as a user runs it:
//  - GPT-NeoX-20B (HF config), ZeRO-1, 1024 ranks on dgx-a100 x 128 nodes  (target <= 2 s)
//  - Llama-2-70B (HF config), ZeRO-3, 4096 ranks on dgx-h100 x 512 nodes, 2 steps (target <= 10 s)
//  - the growth curve from 8 to 4096 ranks (target: close to linear in ranks x ops; the engine
//    simulates one representative rank, so it should be flat in ranks).
// Medians of 3 runs; peak RSS target <= 4 GiB.
#include <cstdio>
#include <fstream>
#include <string>

#include "bench_args.hpp"
#include "cli_runner.hpp"

namespace {
const std::string kRoot = ZEROSIM_SOURCE_DIR;
}

int main(int argc, char** argv) {
    zerosim::bench::Args(argc, argv,
                         "zerosim predict's wall time and peak RSS (medians of 3 runs): GPT-NeoX-20B ZeRO-1 at 1024 ranks\n"
                         "(target <= 2 s), Llama-2-70B ZeRO-3 at 4096 ranks, 2 steps (<= 10 s), and the growth from 8 to\n"
                         "4096 ranks; peak RSS target <= 4096 MiB.",
                         {});
    using zerosim::bench::measure;
    std::string z1 = "/tmp/zerosim-bench-z1.json", z3 = "/tmp/zerosim-bench-z3.json";
    std::ofstream(z1) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})";
    std::ofstream(z3) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})";
    auto predict = [&](const std::string& cfg, const std::string& model, const std::string& topo, int world, int steps) {
        int nodes = (world + 7) / 8;
        return measure({"predict", "--ds-config", cfg, "--model", kRoot + "/configs/models/" + model, "--topology",
                        kRoot + "/topologies/" + topo, "--nodes", std::to_string(nodes), "--world", std::to_string(world),
                        "--steps", std::to_string(steps)},
                       3);
    };
    std::printf("zerosim predict (medians of 3 runs)\n%-58s %10s %14s\n", "case", "seconds", "peak RSS MiB");
    auto a = predict(z1, "gpt-neox-20b.json", "dgx-a100.json", 1024, 1);
    std::printf("%-58s %10.3f %14.1f   target <= 2 s\n", "GPT-NeoX-20B, ZeRO-1, 1024 ranks, dgx-a100 x 128", a.seconds,
                a.max_rss_kib / 1024.0);
    auto b = predict(z3, "llama-2-70b.json", "dgx-h100.json", 4096, 2);
    std::printf("%-58s %10.3f %14.1f   target <= 10 s\n", "Llama-2-70B, ZeRO-3, 4096 ranks, dgx-h100 x 512, 2 steps",
                b.seconds, b.max_rss_kib / 1024.0);
    std::printf("\nLlama-2-70B, ZeRO-3, 2 steps, dgx-h100: growth with ranks\n%8s %10s %14s %10s\n", "ranks", "seconds",
                "peak RSS MiB", "vs 8");
    double base = 0;
    for (int world = 8; world <= 4096; world *= 2) {
        auto f = predict(z3, "llama-2-70b.json", "dgx-h100.json", world, 2);
        if (world == 8) base = f.seconds;
        std::printf("%8d %10.3f %14.1f %9.2fx\n", world, f.seconds, f.max_rss_kib / 1024.0, f.seconds / base);
    }
    std::printf("targets: peak RSS <= 4096 MiB\n");
    return 0;
}
