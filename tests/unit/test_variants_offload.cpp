// ZeRO-Offload in time and memory (issue 17; zero-variants.md section 5), hand-derived from the
// topology's figures (dgx-h100: host.pcie_gbps 400 = 50 GB/s, host.cpu_adam_gbs 20).
#include <gtest/gtest.h>

#include "analysis/memory.hpp"
#include "inline_inputs.hpp"
#include "test_helpers.hpp"
#include "timing/engine.hpp"
#include "timing/offload_time.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

Topology dgx_h100() {
    auto t = load_topology(test::config("../topologies/dgx-h100.json"));
    EXPECT_TRUE(t.ok());
    return t.value();
}

}  // namespace

// CPU Adam on 1e6 elements: 28e6 state bytes / 20 GB/s = 1.4 ms; PCIe: fp32 gradient down and
// bf16 partition up, 6e6 bytes / 50 GB/s = 0.12 ms. A fetch gather of 1 MB (bf16 shard) under
// offload_param pays 1e6 / 50e9 = 20 us before it; its qwZ scales op nothing.
TEST(Offload, StepAndGatherTimesFromTheTopology) {
    const Topology t = dgx_h100();
    EXPECT_DOUBLE_EQ(t.host_pcie_gbs, 50.0);
    ScheduleMeta meta;
    meta.model_dtype = DType::BF16;
    meta.offload_optimizer = true;
    Op step;
    step.kind = OpKind::Compute;
    step.compute = ComputeKind::OptimizerStep;
    step.elements = 1000000;
    step.mem_bytes = 28000000;
    EXPECT_NEAR(offload_seconds(t, step, meta, 99.0), 1.4e-3 + 0.12e-3, 1e-12);
    meta.offload_optimizer = false;
    EXPECT_EQ(offload_seconds(t, step, meta, 99.0), 99.0);   // on the GPU as before
    meta.offload_param = true;
    Op gather;
    gather.kind = OpKind::AllGather;
    gather.caller = "allgather_fn";
    gather.elements = 500000;
    gather.dtype = DType::BF16;
    EXPECT_NEAR(offload_seconds(t, gather, meta, 1e-3), 1e-3 + 20e-6, 1e-12);
    gather.payload = Payload::QuantScales;
    EXPECT_EQ(offload_seconds(t, gather, meta, 1e-3), 1e-3);
    gather.payload = Payload::ParameterShards;
    gather.caller = "_allgather_params";   // engine start / post-step: partitions gathered as they are
    EXPECT_EQ(offload_seconds(t, gather, meta, 1e-3), 1e-3);
}

// The engine runs the optimizer step for exactly that long (2 ranks of a 250-element fp32
// parameter: 125 elements each, 3500 state bytes at 20 GB/s + 125 x 8 bytes at 50 GB/s).
TEST(Offload, TheEngineTimesTheCpuStep) {
    const Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [250]}]})");
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})");
    const Schedule s = test::build(m, c, 2, 1);
    auto p = simulate(s, dgx_h100(), TimingMode::Overlapped);
    ASSERT_TRUE(p.ok()) << p.error().what();
    int steps = 0;
    for (size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].compute == ComputeKind::OptimizerStep) {
            ++steps;
            EXPECT_EQ(s.ops[i].elements, 125);
            EXPECT_NEAR(p->ops[i].duration(), 125 * 28 / 20e9 + 125 * 8 / 50e9, 1e-12);
        }
    EXPECT_EQ(steps, 1);
}

// Stage 3, 4 ranks, one fp32 parameter of 250: ceil(250/4) = 63 elements per rank. With both
// offloads the parameter partition (63 x 4 B), the fp32 gradient copy (63 x 4 B) and the fp32
// master with Adam m and v (63 x 12 B) are host memory: 1260 B out of the device total.
TEST(Offload, OffloadedStatesAreHostMemory) {
    const Model m = test::param_list(R"({"parameters": [{"name": "l.weight", "shape": [250]}]})");
    const DsConfig plain = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})");
    const DsConfig off = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, )"
                                  R"("offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}})");
    const MemoryEstimate a = estimate_memory(m, plain, test::build(m, plain, 4, 1));
    const MemoryEstimate b = estimate_memory(m, off, test::build(m, off, 4, 1));
    EXPECT_EQ(b.category("host"), 1260);
    EXPECT_EQ(a.total() - b.total(), 1260);
    EXPECT_EQ(a.category("host"), 0);
}
