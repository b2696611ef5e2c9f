// Stage 3's gathered parameters on the timeline against the memory model (issue 15): for every
// shipped model (configs/models) and stage-3 config (configs/deepspeed), the engine's gathered,
// unreleased bytes never pass `zerosim memory`'s "gathered parameters (peak)" plus the largest
// module's parameters (the module being fetched), and, on 16 nodes where every model's states
// leave room, the device-resident buffers never pass the room the GPU has for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "analysis/memory.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/gathered_budget.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

using namespace zerosim;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_in(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(test::config(dir)))
        if (e.path().extension() == ".json") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(Stage3Memory, TimelineNeverHoldsMoreThanTheMemoryModel) {
    // 16 nodes, 1,024 tokens, activation checkpointing: every shipped model fits an 80 GB GPU (its
    // states, activations and reserve: the fit line's memory) with room for its gathers.
    auto topo = load_topology(test::config("../topologies/dgx-h100.json"), 16);
    ASSERT_TRUE(topo.ok());
    int cases = 0;
    for (const auto& cfg_path : files_in("deepspeed")) {
        auto cfg = load_ds_config(cfg_path.string());
        ASSERT_TRUE(cfg.ok()) << cfg_path;
        if (cfg->zero.stage != 3) continue;
        for (const auto& model_path : files_in("models")) {
            SCOPED_TRACE(cfg_path.filename().string() + " x " + model_path.filename().string());
            auto model = load_model(model_path.string());
            ASSERT_TRUE(model.ok());
            ScheduleOptions o;
            o.world = topo->total_gpus();
            o.steps = 2;   // step 1 has the trace and prefetches
            o.seq_len = 1024;
            o.activation_checkpointing = true;
            auto s = build_schedule(model.value(), cfg.value(), o);
            ASSERT_TRUE(s.ok()) << s.error().what();
            const int64_t budget = gathered_parameter_budget(model.value(), cfg.value(), s.value(), topo.value());
            auto p = simulate(s.value(), topo.value(), TimingMode::Overlapped, budget);
            ASSERT_TRUE(p.ok());
            int64_t memory_peak = -1;
            for (const auto& item : estimate_memory(model.value(), cfg.value(), s.value()).items)
                if (item.name == "gathered parameters (peak)") memory_peak = item.bytes;
            ASSERT_GE(memory_peak, 0);
            int64_t largest_module = 0;
            for (const auto& m : model->modules) {
                int64_t n = 0;
                for (int q : m.params) n += model->params[static_cast<size_t>(q)].numel;
                largest_module = std::max(largest_module, n * dtype_size(cfg->model_dtype));
            }
            ASSERT_FALSE(p->gathered.empty());
            int64_t peak = 0;
            for (const auto& g : p->gathered) peak = std::max(peak, g.bytes);
            EXPECT_LE(peak, memory_peak + largest_module);
            for (const auto& st : p->steps) EXPECT_LE(st.gathered_peak_bytes, peak);
            // Device-resident buffers: within the GPU's room (a gather passes it only when nothing
            // released is left to wait for, as the allocator would then run out of memory).
            EXPECT_GT(budget, memory_peak + largest_module);
            EXPECT_LE(p->resident_peak_bytes, budget);
            ++cases;
        }
    }
    EXPECT_GE(cases, 6);
}

}  // namespace
