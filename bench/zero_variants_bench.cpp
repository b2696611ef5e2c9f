// Issue 17's benchmark: Llama-2-70B on 64 dgx-h100 nodes (512 GPUs, bf16, micro batch 1), ZeRO-3
// against its ZeRO++ and MiCS variants: the predicted step time (a later step, overlapped) and the
// bytes one rank receives from other nodes per step (analysis/variant_explain.hpp's accounting),
// beside all the bytes it exchanges. Run: build/bench/zero_variants_bench
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "analysis/explain.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/gathered_budget.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"
#include "analysis/zero_variants.hpp"

using namespace zerosim;

int main(int argc, char** argv) {
    zerosim::bench::Args(argc, argv,
                "Llama-2-70B on 64 dgx-h100 nodes (512 ranks): ZeRO-3 against hpZ 8, qwZ, qgZ, all three, MiCS 8 and\n"
                "MiCS 64; per variant the predicted step time, its exposed communication and the bytes per rank.",
                {});
    const std::string src = ZEROSIM_SOURCE_DIR;
    auto model = load_model(src + "/configs/models/llama-2-70b.json");
    auto topo = load_topology(src + "/topologies/dgx-h100.json", 64);
    if (!model || !topo) {
        std::fprintf(stderr, "zero_variants_bench: cannot read the model or the topology\n");
        return 1;
    }
    const std::vector<std::pair<std::string, std::string>> variants = {
        {"stage 3", ""},
        {"hpZ 8", R"(, "zero_hpz_partition_size": 8)"},
        {"qwZ", R"(, "zero_quantized_weights": true)"},
        {"qgZ", R"(, "zero_quantized_gradients": true)"},
        {"hpZ 8 + qwZ + qgZ", R"(, "zero_hpz_partition_size": 8, "zero_quantized_weights": true, "zero_quantized_gradients": true)"},
        {"MiCS 8", R"(, "mics_shard_size": 8)"},
        {"MiCS 64", R"(, "mics_shard_size": 64)"},
    };
    std::printf("Llama-2-70B, 64 x dgx-h100 (512 ranks), bf16, micro batch 1, DeepSpeed 0.14.2; step 1 (a later step)\n");
    std::printf("%-20s %12s %14s %20s %18s\n", "variant", "step (ms)", "exposed (ms)", "inter-node B/rank", "all B/rank");
    for (const auto& [name, keys] : variants) {
        auto cfg = parse_ds_config("bench.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, )"
                                                 R"("zero_optimization": {"stage": 3)" + keys + "}}");
        if (!cfg) {
            std::printf("%-20s %s\n", name.c_str(), cfg.error().what().c_str());
            continue;
        }
        ScheduleOptions o;
        o.world = topo->total_gpus();
        o.steps = 2;
        o.zero_init = name.rfind("MiCS", 0) != 0;   // a 70B model is built under zero.Init (MiCS converts its own)
        o.gpus_per_node = topo->gpus_per_node;
        auto s = build_schedule(model.value(), cfg.value(), o);
        if (!s) {
            std::printf("%-20s %s\n", name.c_str(), s.error().what().c_str());
            continue;
        }
        auto p = simulate(s.value(), topo.value(), TimingMode::Overlapped,
                          gathered_parameter_budget(model.value(), cfg.value(), s.value(), topo.value()));
        if (!p) {
            std::printf("%-20s %s\n", name.c_str(), p.error().what().c_str());
            continue;
        }
        const auto& st = p->steps.back();
        std::printf("%-20s %12.1f %14.1f %20.4g %18.4g\n", name.c_str(), st.step_s() * 1e3, st.exposed_comm_s * 1e3,
                    inter_node_bytes_per_rank(s.value(), 1, topo->gpus_per_node), wire_bytes_per_rank(s.value(), 1));
    }
    return 0;
}
