// 3D layouts in time (timing/engine.hpp simulate_ranks, timing/group_plan.hpp): each expectation is
// worked out by hand, from the 1F1B schedule's arithmetic (Narayanan et al. 2021, §2.2: a pipeline of
// p equal stages and m micro batches idles (p-1)/(m+p-1) of its time) and from where DeepSpeed's grid
// puts each group's ranks (rank r on node r / gpus_per_node; tensor ranks innermost, pipe outermost).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inline_inputs.hpp"
#include "prediction/stage_time.hpp"
#include "schedule/check.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/group_plan.hpp"

using namespace zerosim;

namespace {

Topology topology(const char* name, int64_t nodes) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/" + name, nodes);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

Schedule rank_schedule(const Model& m, const DsConfig& c, ParallelLayout L, int64_t world, int64_t rank, int steps = 1) {
    ScheduleOptions o;
    o.world = world;
    o.steps = steps;
    o.layout = L;
    o.rank = rank;
    auto s = build_schedule(m, c, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

const Op& first_op(const Schedule& s, GroupKind g, OpKind k) {
    for (const Op& op : s.ops)
        if (op.group == g && op.kind == k) return op;
    ADD_FAILURE() << "no " << op_record_name(k) << " on group " << group_name(g);
    return s.ops.front();
}

// Four equal layers (4096 x 4096, no bias) whose per-sample output is small, so that compute, not
// the sends between stages, fills the step.
std::string equal_layers() {
    std::string params, layers;
    for (int i = 0; i < 4; ++i) {
        params += std::string(i ? "," : "") + R"({"name": ")" + std::to_string(i) + R"(.weight", "shape": [4096, 4096]})";
        layers += std::string(i ? "," : "") + R"({"name": ")" + std::to_string(i) + R"(", "output": [64]})";
    }
    return R"({"seq_len": 65536, "parameters": [)" + params + R"(], "pipeline": {"layers": [)" + layers + "]}}";
}

}  // namespace

// 1F1B on 4 equal stages: every stage idles (p-1) forward-and-backward slots of the m + p - 1 the
// step takes, so bubble / (compute + bubble) = 3 / (m + 3): 3/7 = 42.86% at m = 4, 3/11 = 27.27% at
// m = 8. The engine knows no formula: the bubble is the stages' waits for each other.
TEST(PipelineTime, BubbleOfEqualStagesIsPMinus1OverMPlusPMinus1) {
    const Model m = test::param_list(equal_layers());
    const Topology t = topology("dgx-h100.json", 1);
    for (int micro : {4, 8}) {
        const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": )" +
                                    std::to_string(micro) + R"(, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
        ParallelLayout L;
        L.pipe = 4;
        std::vector<Schedule> stages;
        for (int64_t r = 0; r < 4; ++r) stages.push_back(rank_schedule(m, c, L, 4, r, 2));
        std::vector<const Schedule*> list;
        for (const auto& s : stages) list.push_back(&s);
        auto p = simulate_ranks(list, t, TimingMode::Overlapped);
        ASSERT_TRUE(p.ok()) << p.error().what();
        std::vector<const Prediction*> timings;
        for (const auto& x : p.value()) timings.push_back(&x);
        const auto rows = stage_times(list, timings);
        ASSERT_EQ(rows.size(), 4u);
        const double expected = 3.0 / (micro + 3.0);
        for (const auto& row : rows) {
            EXPECT_NEAR(row.bubble_fraction(), expected, 0.02 * expected) << "stage " << row.stage << ", m = " << micro;
            EXPECT_GT(row.comm_s[static_cast<size_t>(Dimension::Pipe)], 0.0);   // the sends took their own time
        }
    }
}

// DeepSpeed's grid puts tensor ranks innermost: tp 8 on 8-GPU nodes is one node, and its all_reduce
// never touches a NIC.
TEST(PipelineTime, TensorAllReduceInsideANodeMovesNoNicBytes) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/tensor.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}})");
    const Topology t = topology("dgx-h100.json", 2);
    ParallelLayout L;
    L.tensor = 8;
    const Schedule s = rank_schedule(m, c, L, 16, 0);
    const Op& ar = first_op(s, GroupKind::Tensor, OpKind::AllReduce);
    const CollectivePlan p = plan_for_group(t, ar, s.meta);
    EXPECT_EQ(p.inter_bytes, 0.0);
    EXPECT_GT(p.intra_bytes, 0.0);
    // ZeRO's data-parallel group is then {0, 8}: one rank on each node. A ring all_reduce of S bytes
    // over 2 ranks sends 2 (n-1)/n S = S through each rank's NIC share, none over NVLink.
    const Op& dp = first_op(s, GroupKind::Dp, OpKind::AllReduce);
    const CollectivePlan q = plan_for_group(t, dp, s.meta);
    EXPECT_GT(q.inter_bytes, 0.0);
    EXPECT_EQ(q.intra_bytes, 0.0);
}

// An expert group of 4 consecutive ranks on nodes of 2 GPUs spans 2 nodes: all_to_all sends each of
// the 3 others S/4, and the 2 on the other node take 2/4 of S through the NIC; ep 2 stays on a node.
TEST(PipelineTime, ExpertAllToAllAcrossNodesCrossesTheNic) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/moe.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}})");
    Topology t = topology("dgx-h100.json", 2);
    t.gpus_per_node = 2;
    for (int64_t ep : {4, 2}) {
        ParallelLayout L;
        L.expert = ep;
        const Schedule s = rank_schedule(m, c, L, 4, 0);
        const Op& a2a = first_op(s, GroupKind::Expert, OpKind::AllToAll);
        const CollectivePlan p = plan_for_group(t, a2a, s.meta);
        const double S = static_cast<double>(a2a.bytes());
        if (ep == 4) {
            EXPECT_DOUBLE_EQ(p.inter_bytes, S * 2 / 4);
            EXPECT_DOUBLE_EQ(p.intra_bytes, S * 1 / 4);
        } else {
            EXPECT_EQ(p.inter_bytes, 0.0);
            EXPECT_DOUBLE_EQ(p.intra_bytes, S * 1 / 2);
        }
    }
}

// pipe 2 x data 8 on 8-GPU nodes: stage 1's ranks are the second node's, so a send crosses the NIC
// with the whole tensor; pipe 2 x data 4 keeps both stages on one node, the send on NVLink.
TEST(PipelineTime, StagesOnOtherNodesSendOverTheNic) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/pipe.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 1}})");
    const Topology t = topology("dgx-h100.json", 2);
    for (int64_t world : {16, 8}) {
        ParallelLayout L;
        L.pipe = 2;
        const Schedule s = rank_schedule(m, c, L, world, 0);
        const Op* send = nullptr;
        for (const Op& op : s.ops)
            if (op.kind == OpKind::Send && op.rule == RuleId::PipeActivationSend) send = send ? send : &op;
        ASSERT_NE(send, nullptr);
        EXPECT_EQ(send->peer, world / 2);
        const CollectivePlan p = plan_for_group(t, *send, s.meta);
        const double S = static_cast<double>(send->bytes());
        if (world == 16) {
            EXPECT_DOUBLE_EQ(p.inter_bytes, S);
            EXPECT_EQ(p.intra_bytes, 0.0);
        } else {
            EXPECT_EQ(p.inter_bytes, 0.0);
            EXPECT_DOUBLE_EQ(p.intra_bytes, S);
        }
    }
}

// Megatron's all_reduces sit between a layer's matmuls: the compute stream waits for them, so the
// step is at least compute plus their time (nothing of theirs hides under compute).
TEST(PipelineTime, TensorAllReducesAreOnTheComputePath) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/tensor.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 0}})");
    const Topology t = topology("dgx-h100.json", 1);
    ParallelLayout L;
    L.tensor = 2;
    const Schedule s = rank_schedule(m, c, L, 2, 0);
    auto p = simulate(s, t, TimingMode::Overlapped);
    ASSERT_TRUE(p.ok()) << p.error().what();
    double compute = 0, tensor = 0;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        if (s.ops[i].step != 0) continue;
        if (s.ops[i].kind == OpKind::Compute) compute += p->ops[i].duration();
        if (s.ops[i].group == GroupKind::Tensor) tensor += p->ops[i].duration();
    }
    ASSERT_GT(tensor, 0.0);
    EXPECT_GE(p->steps.at(0).step_s(), compute + tensor - 1e-12);
}

// Schedules whose sends have no receive would never finish: an error naming the ranks, not a hang.
TEST(PipelineTime, UnmatchedSendIsAnError) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/pipe.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 1}})");
    ParallelLayout L;
    L.pipe = 2;
    Schedule a = rank_schedule(m, c, L, 2, 0), b = rank_schedule(m, c, L, 2, 1);
    for (size_t i = 0; i < b.ops.size(); ++i)
        if (b.ops[i].kind == OpKind::Recv) {
            b.ops.erase(b.ops.begin() + static_cast<long>(i));   // rank 1 never takes rank 0's first send
            break;
        }
    for (size_t i = 0; i < b.ops.size(); ++i) b.ops[i].id = static_cast<int64_t>(i);
    const Topology t = topology("dgx-h100.json", 1);
    const Schedule whole = rank_schedule(m, c, L, 2, 1);
    auto before = simulate_ranks({&a, &whole}, t, TimingMode::Synchronized);
    ASSERT_TRUE(before.ok()) << before.error().what();
    auto p = simulate_ranks({&a, &b}, t, TimingMode::Synchronized);
    ASSERT_FALSE(p.ok());
    int64_t sends = 0;
    for (const Op& op : a.ops) sends += op.kind == OpKind::Send;
    const std::string want = "rank 0 sends " + std::to_string(sends) + " tensors to rank 1, which receives " + std::to_string(sends - 1);
    EXPECT_NE(std::string(p.error().what()).find(want), std::string::npos) << p.error().what();
    // The stuck ends are gone with the failed run: the next simulation times as the first did.
    auto after = simulate_ranks({&a, &whole}, t, TimingMode::Synchronized);
    ASSERT_TRUE(after.ok()) << after.error().what();
    EXPECT_NEAR(after->at(1).total_s, before->at(1).total_s, 1e-12);
}

// A Hugging Face model under --pp is cut as a PipelineModule of its embedding, each decoder layer, the
// final norm and the head (Megatron-DeepSpeed's GPTModelPipe order). Llama-2-7B (32 layers, hidden
// 4096, vocab 32000, untied) on 2 stages of 4 ranks: 35 layers; stage 0 sends each micro batch's
// hidden states, micro_batch x seq x hidden = 2 x 4096 x 4096 elements in bf16.
TEST(PipelineTime, HuggingFaceModelIsCutIntoItsLayers) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/llama-2-7b.json").value();
    Model cut = m;
    derive_hf_pipeline_layers(cut, 4096);
    ASSERT_EQ(cut.parallel.pipe_layers.size(), 35u);
    EXPECT_EQ(cut.parallel.pipe_layers.front().name, "model.embed_tokens");
    EXPECT_EQ(cut.parallel.pipe_layers[1].name, "model.layers.0");
    EXPECT_EQ(cut.parallel.pipe_layers[33].name, "model.norm");
    EXPECT_EQ(cut.parallel.pipe_layers.back().name, "lm_head");
    EXPECT_EQ(cut.parallel.pipe_layers.back().output, (std::vector<int64_t>{4096, 32000}));
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "bf16": {"enabled": true},
                                    "zero_optimization": {"stage": 1}})");
    ParallelLayout L;
    L.pipe = 2;
    const Schedule s = rank_schedule(m, c, L, 8, 0);
    int64_t sent = 0;
    for (const Op& op : s.ops)
        if (op.rule == RuleId::PipeActivationSend && op.step == 0) sent = op.elements;
    EXPECT_EQ(sent, int64_t{2} * 4096 * 4096);
}

// Megatron gives each of t tensor ranks heads / t: the attention core charged to o_proj (4 s width
// FLOPs per token, width = heads x head_dim = 4096 for Llama-2-7B) is cut by t like the projections.
// At tp 2, o_proj's forward is 2 x tokens x (4096 x 2048) + 4 x tokens x 4096 x 2048.
TEST(PipelineTime, AttentionCoreIsSplitOverTensorRanks) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/llama-2-7b.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}})");
    for (int64_t pp : {1, 2}) {   // also after a pipeline cut rebuilds the rank's modules
        ParallelLayout L;
        L.tensor = 2;
        L.pipe = pp;
        ScheduleOptions o;
        o.world = 2 * pp;
        o.seq_len = 4096;
        o.layout = L;
        auto s = build_schedule(m, c, o);
        ASSERT_TRUE(s.ok()) << s.error().what();
        double flops = -1;
        for (const Op& op : s->ops)
            if (op.kind == OpKind::Compute && op.compute == ComputeKind::Forward && op.module_name == "model.layers.0.self_attn.o_proj")
                flops = op.flops;
        const double tokens = 4096;
        EXPECT_DOUBLE_EQ(flops, 2 * tokens * 4096 * 2048 + 4 * tokens * 4096 * 2048) << "pp " << pp;
    }
}

// Each dimension's bytes by link (prediction/stage_time.hpp link_bytes), by hand: tp 8 on 2 nodes of 8
// keeps Megatron's all_reduces inside the node; ZeRO's data group {0, 8} has one rank per node, so its
// bytes go through the NIC, and across the spine exactly when the two nodes sit under different leaves.
TEST(PipelineTime, BytesPerDimensionAndLink) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/tensor.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}})");
    Topology t = topology("dgx-h100.json", 2);
    ParallelLayout L;
    L.tensor = 8;
    const Schedule s = rank_schedule(m, c, L, 16, 0);
    for (int64_t per_leaf : {1, 2}) {
        t.nodes_per_leaf = per_leaf;
        t.leaf_of_node.clear();
        const auto b = link_bytes(s, t, 0);
        const auto& tensor = b[static_cast<size_t>(Dimension::Tensor)];
        const auto& zero = b[static_cast<size_t>(Dimension::Zero)];
        EXPECT_GT(tensor.inside_node, 0.0);
        EXPECT_EQ(tensor.nic, 0.0);
        EXPECT_EQ(zero.inside_node, 0.0);
        EXPECT_GT(zero.nic, 0.0);
        EXPECT_EQ(zero.spine, per_leaf == 1 ? zero.nic : 0.0) << per_leaf << " nodes per leaf";
    }
}

// Fabric mode on a 3D layout (timing/fabric.hpp): MoE's expert groups {0..3} and {4..7} on nodes of 2
// GPUs and 2 NICs (10 GB/s each) span two nodes each. Under 2-node leaves each group stays under its
// leaf: its all_to_all meets nothing but its own NICs (network factor 1). Under 1-node leaves with a
// 2:1 spine, each node's 2 NICs (20 GB/s out) share 10 GB/s of uplink: every flow to the other node
// crosses the spine at half its NIC's rate, factor 2.
TEST(PipelineTime, ExpertAllToAllAcrossLeavesCrossesTheSpine) {
    const Model m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/moe.json").value();
    const DsConfig c = test::ds(R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}})");
    for (const char* network : {R"({"kind": "fat_tree", "nodes_per_leaf": 2, "oversubscription": 2})",
                                R"({"kind": "fat_tree", "nodes_per_leaf": 1, "oversubscription": 2})"}) {
        auto t = parse_topology("fabric-3d.json", std::string(R"({"name": "fabric-3d", "nodes": 4, "gpus_per_node": 2,
          "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
          "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 100, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 100},
          "nics": {"per_node": 2, "bandwidth_gbs": 10}, "network": )") + network + "}");
        ASSERT_TRUE(t.ok()) << t.error().what();
        ParallelLayout L;
        L.expert = 4;
        const Schedule s = rank_schedule(m, c, L, 8, 0);
        auto fabric = FabricModel::build(t.value(), 8, {});
        ASSERT_TRUE(fabric.ok()) << fabric.error().what();
        const Op& a2a = first_op(s, GroupKind::Expert, OpKind::AllToAll);
        CollectivePlan ideal = plan_for_group(fabric.value()->ideal_topology(), a2a, s.meta), slowed = ideal;
        fabric.value()->engine_adjust(s.meta).collective(a2a, slowed);
        ASSERT_GT(ideal.inter_bytes, 0.0);
        const double factor = ideal.inter_rate / slowed.inter_rate;
        if (std::string(network).find("\"nodes_per_leaf\": 2") != std::string::npos)
            EXPECT_NEAR(factor, 1.0, 1e-3);
        else
            EXPECT_NEAR(factor, 2.0, 0.05);
    }
}
