// The pipeline engine under tensor parallelism (sim/schedule/pipeline.cpp): DeepSpeed v0.14.2's
// pipe/engine.py sends the first activation and its gradient as a PartitionedTensor over the tensor
// ("slice") group, its layout then this rank's part, and all_gathers the parts back before the
// stage uses them (runtime/utils.py PartitionedTensor). No real run of this layout exists among the
// references, so every expectation below is worked out by hand from engine.py (lines cited).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inline_inputs.hpp"
#include "reference_3d.hpp"

using namespace zerosim;

namespace {

// Two Megatron MLP blocks, one per layer of a 2-layer PipelineModule: a column-parallel 64 -> 128
// and a row-parallel 128 -> 64 each; 16 tokens of 64 features cross the stage boundary.
const char* kTwoBlocks = R"({"seq_len": 16, "parameters": [
  {"name": "0.fc1.weight", "shape": [128, 64], "tp": "column"}, {"name": "0.fc1.bias", "shape": [128], "tp": "column"},
  {"name": "0.fc2.weight", "shape": [64, 128], "tp": "row"}, {"name": "0.fc2.bias", "shape": [64]},
  {"name": "1.fc1.weight", "shape": [128, 64], "tp": "column"}, {"name": "1.fc1.bias", "shape": [128], "tp": "column"},
  {"name": "1.fc2.weight", "shape": [64, 128], "tp": "row"}, {"name": "1.fc2.bias", "shape": [64]}],
 "pipeline": {"layers": [{"name": "0", "output": [16, 64]}, {"name": "1", "output": [16, 64]}]}})";

DsConfig config(const std::string& pipeline = "") {
    return test::ds(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                        "zero_optimization": {"stage": 1})" +
                    (pipeline.empty() ? std::string() : ", \"pipeline\": " + pipeline) + "}");
}

Result<Schedule> pipe_tp(const DsConfig& c, int64_t rank, int64_t tp = 2, const char* model = kTwoBlocks) {
    ScheduleOptions o;
    o.world = 2 * tp;
    o.steps = 1;
    o.layout.pipe = 2;
    o.layout.tensor = tp;
    o.rank = rank;
    auto s = build_schedule(test::param_list(model), c, o);
    if (s.ok()) {
        auto bad = check_schedule(s.value(), "pipe x tensor");
        EXPECT_FALSE(bad) << bad->what();
    }
    return s;
}

// The ops between stages and the gathers, as "rule:elements" in order (warm-up and metadata left out).
std::string exchange(const Schedule& s) {
    std::string out;
    for (const Op& op : s.ops) {
        const std::string name = rule_info(op.rule).name;
        if (name.rfind("pipe.activation", 0) && name.rfind("pipe.grad", 0) && name.rfind("pipe.partition", 0)) continue;
        out += (out.empty() ? "" : " ") + name.substr(5) + ":" + std::to_string(op.elements);
    }
    return out;
}

}  // namespace

// A micro batch's activation is 2 x 16 x 64 = 2048 elements, a tp rank's part 1024; the layout
// tensor is [ndims = 3, 2, 16, 64, num_parts = 2, rank, 0, 1024, 2048]: 9 int64.
// Stage 0 (TrainSchedule, 2 stages, 2 micro batches): F0 | SendAct(0) | F1 | RecvGrad(0) SendAct(1) B0 |
// - | RecvGrad(1) B1; its backward (engine.py 816-838) gathers its output, then the gradient.
TEST(PipeTensor, FirstStageSendsPartsAndGathersBeforeBackward) {
    auto s = pipe_tp(config(), 0);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_EQ(exchange(s.value()),
              "partition_meta_send:9 activation_send:1024 "
              "partition_meta_recv:9 grad_recv:1024 partition_meta_send:9 activation_send:1024 "
              "partition_allgather:1024 partition_allgather:1024 "
              "partition_meta_recv:9 grad_recv:1024 partition_allgather:1024 partition_allgather:1024");
    // _send_tensor_meta's tuple branch (engine.py 946-960): type, count, then dtype, ndims and shape of
    // the layout and of the part, all one-element LongTensors.
    auto meta = test::ops_of(s.value(), RuleId::PipeMetaSend);
    ASSERT_EQ(meta.size(), 8u);
    for (const Op* op : meta) EXPECT_EQ(op->elements, 1);
    for (const Op* op : test::ops_of(s.value(), RuleId::PipePartitionAllGather)) {
        EXPECT_EQ(op->group, GroupKind::Tensor);
        EXPECT_EQ(op->kind, OpKind::AllGather);
        EXPECT_EQ(op->caller, "full");
    }
}

// Stage 1 (the last): R0 F0 | SendGrad(0) R1 F1 ... its forward gathers each received part
// (engine.py 709-721); its backward returns before any gather (803); gradients go back partitioned.
TEST(PipeTensor, LastStageGathersInForwardOnly) {
    auto s = pipe_tp(config(), 3);   // stage 1, tensor rank 1
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_EQ(exchange(s.value()),
              "partition_meta_recv:9 activation_recv:1024 partition_allgather:1024 "
              "partition_meta_send:9 grad_send:1024 partition_meta_recv:9 activation_recv:1024 partition_allgather:1024 "
              "partition_meta_send:9 grad_send:1024");
    // Rank 3's peer is rank 1: the same tensor index one stage back (rank = stage x dp x tp + dp x tp + t).
    for (const Op* op : test::ops_of(s.value(), RuleId::PipeActivationRecv)) EXPECT_EQ(op->peer, 1);
}

// Megatron's own collectives run inside each stage: a row-parallel output all_reduce in forward and
// a column-parallel input-gradient all_reduce in backward per block, one block per stage, of the
// whole 2048-element activation.
TEST(PipeTensor, TensorAllReducesInsideTheStage) {
    auto s = pipe_tp(config(), 0);
    ASSERT_TRUE(s.ok()) << s.error().what();
    auto fwd = test::ops_of(s.value(), RuleId::TpForwardAllreduce);
    auto bwd = test::ops_of(s.value(), RuleId::TpBackwardAllreduce);
    EXPECT_EQ(fwd.size(), 2u);   // 2 micro batches x 1 block
    EXPECT_EQ(bwd.size(), 2u);
    for (const Op* op : fwd) EXPECT_EQ(op->elements, 2048);
}

// pipeline.pipe_partitioned false: whole activations and gradients, no gathers (engine.py 140-141).
// grad_partitioned false alone: activations go in parts, their gradients whole, and the sender
// gathers its output back before it receives the gradient (_exec_recv_grads 1177-1186).
TEST(PipeTensor, ConfigFlagsTurnThePartitionsOff) {
    auto whole = pipe_tp(config(R"({"pipe_partitioned": false, "grad_partitioned": false})"), 0);
    ASSERT_TRUE(whole.ok()) << whole.error().what();
    EXPECT_EQ(exchange(whole.value()),
              "activation_send:2048 grad_recv:2048 activation_send:2048 grad_recv:2048");
    EXPECT_EQ(test::ops_of(whole.value(), RuleId::PipeMetaSend).size(), 3u);   // type, ndims, shape of one tensor
    auto acts_only = pipe_tp(config(R"({"grad_partitioned": false})"), 0);
    ASSERT_TRUE(acts_only.ok()) << acts_only.error().what();
    EXPECT_EQ(exchange(acts_only.value()),
              "partition_meta_send:9 activation_send:1024 partition_allgather:1024 grad_recv:2048 "
              "partition_meta_send:9 activation_send:1024 partition_allgather:1024 grad_recv:2048");
}

TEST(PipeTensor, RefusalsNameTheKey) {
    auto bad = pipe_tp(config(R"({"pipe_partitioned": false})"), 0);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().field, "pipeline.grad_partitioned");
    // Checkpointing inside the stages is modelled (schedule/recompute.cpp): each layer's forward again
    // in backward, before its own backward.
    auto ckpt = pipe_tp(config(R"({"activation_checkpoint_interval": 1})"), 0);
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().what();
    EXPECT_FALSE(test::ops_of(ckpt.value(), RuleId::ComputeRecompute).empty());
    auto not_bool = parse_ds_config("ds.json", R"({"pipeline": {"pipe_partitioned": 1}})");
    ASSERT_FALSE(not_bool.ok());
    EXPECT_NE(std::string(not_bool.error().what()).find("pipeline.pipe_partitioned"), std::string::npos);
    // 2 micro x 3 tokens x 5 features = 30 elements do not split evenly over tp 4.
    const char* odd = R"({"seq_len": 3, "parameters": [
      {"name": "0.weight", "shape": [8, 5], "tp": "column"}, {"name": "1.weight", "shape": [5, 8], "tp": "row"}],
     "pipeline": {"layers": [{"name": "0", "output": [3, 5]}, {"name": "1", "output": [3, 5]}]}})";
    auto uneven = pipe_tp(config(), 0, 4, odd);
    ASSERT_FALSE(uneven.ok());
    EXPECT_EQ(uneven.error().field, "pipeline");
    // Ulysses has no axis in the pipeline grid.
    ScheduleOptions o;
    o.world = 4;
    o.layout.pipe = 2;
    o.layout.sequence = 2;
    auto sp = build_schedule(test::param_list(kTwoBlocks), config(), o);
    ASSERT_FALSE(sp.ok());
    EXPECT_EQ(sp.error().field, "--sp");
}
