// Tensor (Megatron column/row-parallel layers) and Ulysses sequence parallelism under ZeRO, against
// the real DeepSpeed v0.14.2 runs (every rank, op for op) and against sizes worked out by hand.
#include <gtest/gtest.h>

#include "reference_3d.hpp"
#include "analysis/explain.hpp"
#include "schedule/mesh.hpp"

using namespace zerosim;

namespace {

// A model written here: one Megatron MLP block (column-parallel fc1 1024 -> 4096, row-parallel fc2
// back), one Ulysses attention after qkv, 8 heads of 64, seq_len 32.
Model hand_model() {
    const char* text = R"({"name": "hand", "seq_len": 32, "parameters": [
        {"name": "ln.weight", "shape": [1024]},
        {"name": "qkv.weight", "shape": [3072, 1024]},
        {"name": "o.weight", "shape": [1024, 1024], "tp": "row"},
        {"name": "fc1.weight", "shape": [4096, 1024], "tp": "column"},
        {"name": "fc1.bias", "shape": [4096], "tp": "column"},
        {"name": "fc2.weight", "shape": [1024, 4096], "tp": "row"},
        {"name": "fc2.bias", "shape": [1024]}],
        "attention": [{"module": "qkv", "name": "attn", "heads": 8, "head_size": 64}]})";
    auto m = model_from_param_list_json("hand.json", text);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

DsConfig hand_config(int stage) {
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": )" + std::to_string(stage) + "}}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

Schedule build(const Model& m, int stage, int64_t world, int64_t tp, int64_t sp, int64_t rank = 0) {
    ScheduleOptions o;
    o.world = world;
    o.steps = 1;
    o.layout.tensor = tp;
    o.layout.sequence = sp;
    o.rank = rank;
    auto s = build_schedule(m, hand_config(stage), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.ok() ? s.value() : Schedule{};
}

using test::ops_of;

}  // namespace

TEST(Tensor3dReference, Tp2Dp2Zero1EveryRankOpForOp) { test::expect_3d_run_matches("tp2_dp2_z1", "tensor"); }
TEST(Tensor3dReference, Tp2Dp2Zero3EveryRankOpForOp) { test::expect_3d_run_matches("tp2_dp2_z3", "tensor"); }
TEST(Ulysses3dReference, Sp2Dp2Zero3EveryRankOpForOp) { test::expect_3d_run_matches("sp2_dp2_z3", "ulysses"); }
TEST(Ulysses3dReference, Sp4Dp1Zero1EveryRankOpForOp) { test::expect_3d_run_matches("sp4_dp1_z1", "ulysses"); }

// Megatron: each row-parallel layer all_reduces b x s x h in forward, each column-parallel one its
// input gradient in backward: here o and fc2 (forward), fc1 (backward), 2 x 32 x 1024 fp32 each.
TEST(Tensor3d, RowForwardColumnBackwardAllReducesOfTheActivation) {
    Schedule s = build(hand_model(), 1, 8, 2, 1);
    auto fwd = ops_of(s, RuleId::TpForwardAllreduce), bwd = ops_of(s, RuleId::TpBackwardAllreduce);
    ASSERT_EQ(fwd.size(), 2u);
    ASSERT_EQ(bwd.size(), 1u);
    for (const Op* op : {fwd[0], fwd[1], bwd[0]}) {
        EXPECT_EQ(op->kind, OpKind::AllReduce);
        EXPECT_EQ(op->group, GroupKind::Tensor);
        EXPECT_EQ(op->bytes(), 2 * 32 * 1024 * 4);
    }
    EXPECT_EQ(fwd[0]->caller, "forward");
    EXPECT_EQ(bwd[0]->caller, "backward");
    // ZeRO shards the rank's half of the split parameters over the data group of 8 / 2 = 4 ranks:
    // 1024 + 3072*1024 + 1024*512 + 2048*1024 + 2048 + 512*4096 + 1024 elements.
    EXPECT_EQ(s.meta.world, 4);
    EXPECT_EQ(s.meta.total_params, 1024 + 3072 * 1024 + 1024 * 512 + 2048 * 1024 + 2048 + 512 * 4096 + 1024);
}

// Ulysses: 4 all_to_all in forward and 4 in backward per attention, each b x (s/sp) x heads x
// head_size: 2 x 16 x 8 x 64 fp32 at sp 2. ZeRO shards over sequence x data = world.
TEST(Ulysses3d, EightAllToAllPerAttentionOfTheLocalSequence) {
    Schedule s = build(hand_model(), 1, 4, 1, 2);
    auto a2a = ops_of(s, RuleId::UlyssesAllToAll);
    ASSERT_EQ(a2a.size(), 8u);
    for (const Op* op : a2a) {
        EXPECT_EQ(op->kind, OpKind::AllToAll);
        EXPECT_EQ(op->group, GroupKind::Sequence);
        EXPECT_EQ(op->bytes(), 2 * 16 * 8 * 64 * 4);
        EXPECT_EQ(op->caller, "single_all_to_all");
    }
    EXPECT_EQ(s.meta.world, 4);
}

// stage_1_and_2.py _model_parallel_all_reduce skips a one-rank group; stage3.py only skips a
// missing one: with an mpu of tensor size 1 (Ulysses) stage 3 still logs it, stage 1 does not.
TEST(ModelParallel3d, StageThreeLogsTheOneRankGroupStageOneDoesNot) {
    auto count = [](const Schedule& s) { return ops_of(s, RuleId::ZeroModelParallelAllreduce).size(); };
    EXPECT_EQ(count(build(hand_model(), 1, 4, 1, 2)), 0u);
    EXPECT_EQ(count(build(hand_model(), 3, 4, 1, 2)), 1u);
    EXPECT_EQ(count(build(hand_model(), 1, 4, 2, 1)), 1u);
}

TEST(Layout3d, RefusalsNameTheFlag) {
    ScheduleOptions o;
    o.world = 6;
    o.layout.tensor = 4;   // does not divide 6
    auto s = build_schedule(hand_model(), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "--tp");
    o.world = 8;
    o.layout.tensor = 1;
    o.layout.sequence = 3;   // 8 heads do not divide over 3... nor does the world
    s = build_schedule(hand_model(), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    o.layout.sequence = 1;
    o.layout.pipe = 2;   // no pipeline layers in the model
    s = build_schedule(hand_model(), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "pipeline");
    o.layout.pipe = 1;
    o.layout.tensor = 2;
    o.rank = 8;   // outside the world
    s = build_schedule(hand_model(), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "--rank");
}

// A column split that does not divide: named by the parameter's "tp" field.
TEST(Layout3d, TensorSplitThatDoesNotDivideIsRefused) {
    ScheduleOptions o;
    o.world = 3;
    o.layout.tensor = 3;   // 4096 / 3 does not divide
    auto s = build_schedule(hand_model(), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().field.find(".tp"), std::string::npos) << s.error().field;
}

// explain, per group of rank 1 of tp2_dp2_z1: the tensor group {0,1} carries 3 all_reduces per step
// (the forward 8 KB, the backward 8 KB, ZeRO's 4-byte norm): 16 KB + 4 B logged; the data group
// {1,3} carries ZeRO's bucket, norm and gather.
TEST(Explain3d, EachGroupOfTheRankWithItsOpsPerStep) {
    auto s = test::reference_3d_schedule("tp2_dp2_z1", "tensor", 1);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto whole = load_model(test::reference_3d_model("tensor"));
    ASSERT_TRUE(whole.ok());
    auto cfg = load_ds_config(std::string(ZEROSIM_REFERENCE_DIR) + "/deepspeed-v0.14.2-cpu-3d/tp2_dp2_z1/ds_config.json");
    ASSERT_TRUE(cfg.ok());
    const std::string text = explain_layout(whole.value(), cfg.value(), s.value());
    std::istringstream in(text);
    std::string line, tensor_row, dp_row;
    while (std::getline(in, line)) {
        if (line.rfind("tensor ", 0) == 0) tensor_row = line;
        if (line.rfind("dp ", 0) == 0) dp_row = line;
    }
    std::istringstream t(tensor_row);
    std::string group, members, ops, size, unit;
    t >> group >> members >> ops >> size >> unit;
    EXPECT_EQ(members, "{0,1}");
    EXPECT_EQ(ops, "3");
    EXPECT_EQ(size + " " + unit, "16.0 KB");   // 8192 + 8192 + 4 bytes, printed as DeepSpeed rounds
    std::istringstream d(dp_row);
    d >> group >> members >> ops;
    EXPECT_EQ(members, "{1,3}");
    EXPECT_EQ(ops, "3");
    EXPECT_EQ(explain_layout(whole.value(), DsConfig{}, Schedule{}), "");   // no 3D layout, no section
}

namespace {

Model small_llama(int64_t kv_heads) {
    const std::string text = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": )" + std::to_string(kv_heads) + R"(, "intermediate_size": 128, "vocab_size": 256,
        "max_position_embeddings": 32})";
    auto m = model_from_hf_config_json("llama.json", text);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

}  // namespace

// A Hugging Face Llama under --tp 2, counted on paper: embed 256x64/2 = 8192; per layer q 2048,
// k and v 1024 each (2 kv heads x 16), o 2048, gate, up and down 4096 each, two norms 128: 18560;
// final norm 64; lm_head 8192. Megatron's all_reduces: o and down in forward plus the vocabulary-
// parallel embedding (5), the q/k/v group and the gate/up group in backward plus the head (5),
// each micro batch 2 x 32 tokens x 64 fp32.
TEST(Tensor3d, HuggingFaceLlamaSplitAsMegatronSplitsIt) {
    Schedule s = build(small_llama(2), 1, 4, 2, 1);
    EXPECT_EQ(s.meta.total_params, 8192 + 2 * 18560 + 64 + 8192);
    auto fwd = ops_of(s, RuleId::TpForwardAllreduce), bwd = ops_of(s, RuleId::TpBackwardAllreduce);
    EXPECT_EQ(fwd.size(), 5u);
    EXPECT_EQ(bwd.size(), 5u);
    for (const Op* op : fwd) EXPECT_EQ(op->bytes(), 2 * 32 * 64 * 4);
    for (const Op* op : bwd) EXPECT_EQ(op->bytes(), 2 * 32 * 64 * 4);
}

// Grouped-query attention: 4 query heads, 1 key/value head: --tp 2 cannot split the one kv head.
TEST(Tensor3d, KeyValueHeadsThatDoNotDivideAreRefused) {
    ScheduleOptions o;
    o.world = 2;
    o.layout.tensor = 2;
    auto s = build_schedule(small_llama(1), hand_config(1), o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().field, "num_key_value_heads");
}

// Ulysses on a Hugging Face Llama (GQA, 2 kv heads) at --sp 2: q and the output move 2 x 16 tokens
// x 4 heads x 16, k and v 2 x 16 x 2 x 16 (fp32), four each way per layer.
TEST(Ulysses3d, HuggingFaceGroupedQueryAttentionSizes) {
    Schedule s = build(small_llama(2), 1, 2, 1, 2);
    auto a2a = ops_of(s, RuleId::UlyssesAllToAll);
    ASSERT_EQ(a2a.size(), 2u * 8u);
    const int64_t q = 2 * 16 * 4 * 16 * 4, kv = 2 * 16 * 2 * 16 * 4;
    for (size_t i = 0; i < a2a.size(); ++i) EXPECT_EQ(a2a[i]->bytes(), (i % 4 == 0 || i % 4 == 3) ? q : kv) << i;
}
