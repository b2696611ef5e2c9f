// GPT-NeoX's YAML configs (sim/inputs/neox_config.cpp): GPT-NeoX-20B as trained, read from
// ../shared/reference/gpt-neox-configs/20B.yml, checked against its published parameter count
// worked out on paper, its layout, and the pipeline engine's sends under tensor parallelism with
// GPT-NeoX's (hidden, attention_mask) activations; small inline configs for the merge rules and refusals.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/memory_report.hpp"
#include "inputs/neox_config.hpp"
#include "reference_3d.hpp"
#include "schedule/schedule.hpp"

using namespace zerosim;

namespace {

const std::string k20B = std::string(ZEROSIM_REFERENCE_DIR) + "/gpt-neox-configs/20B.yml";

Result<NeoxInputs> neox(const std::vector<std::string>& texts, int64_t vocab = 50277) {
    std::vector<std::string> names;
    for (size_t i = 0; i < texts.size(); ++i) names.push_back("conf" + std::to_string(i) + ".yml");
    return parse_neox_config(names, texts, vocab, kBaselineRelease);
}

// A small GPT-NeoX model in GPT-NeoX's own style: dashes, Python's True, a trailing comma.
const char* kSmall = R"(
{
  "pipe-parallel-size": 2,
  "model-parallel-size": 2,
  "num-layers": 4,
  "hidden-size": 64,
  "num-attention-heads": 4,
  "seq-length": 32,
  "pos-emb": "rotary",
  "no-weight-tying": true,
  "gpt_j_residual": false,
  "output_layer_parallelism": "column",
  "zero_optimization": {"stage": 1, "overlap_comm": True, },
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "fp16": {"enabled": true},
  "lr": 0.0006,
}
)";

Result<Schedule> rank_schedule(const NeoxInputs& n, int64_t world, int64_t rank) {
    ScheduleOptions o;
    o.world = world;
    o.steps = 1;
    o.rank = rank;
    o.layout.pipe = std::max<int64_t>(n.pipe, 1);
    o.layout.pipe_engine = n.pipe >= 1;
    o.layout.tensor = n.tensor;
    o.pp_partition = PipePartition::Type;
    o.pp_partition_type = "transformer|mlp";
    return build_schedule(n.model, n.ds_config, o);
}

}  // namespace

// GPT-NeoX-20B: V = 50432 (50277 padded to a multiple of 128 x 2), h = 6144, 44 layers, untied
// embedding and output. Each layer: two LayerNorms 4h, query_key_value 3h^2 + 3h, dense h^2 + h,
// h -> 4h 4h^2 + 4h, 4h -> h 4h^2 + h: 12h^2 + 13h = 453,064,704. Embedding and output 2Vh =
// 619,708,416; final LayerNorm 2h = 12,288. 44 x 453,064,704 + 619,708,416 + 12,288 = 20,554,567,680,
// the count EleutherAI publishes for GPT-NeoX-20B.
TEST(NeoxConfig, TwentyBAsTrainedHasItsPublishedParameterCount) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    EXPECT_EQ(n->model.total_numel(), 20554567680LL);
    EXPECT_EQ(n->pipe, 4);
    EXPECT_EQ(n->tensor, 2);
    EXPECT_EQ(n->partition_method, "type:transformer|mlp");   // neox_args.py's default
    EXPECT_EQ(n->ds_config.zero.stage, 1);
    EXPECT_EQ(n->ds_config.model_dtype, DType::FP16);
    EXPECT_EQ(n->model.default_seq_len, 2048);
    // The tokenizer's 50277 padded to 50432 = 197 x 256 (make-vocab-size-divisible-by 128 x tp 2).
    bool found = false;
    for (const auto& p : n->model.params)
        if (p.name == "0.word_embeddings.weight") {
            found = true;
            EXPECT_EQ(p.shape[0], 50432);
        }
    EXPECT_TRUE(found);
}

// Each stage of pipe 4 x model 2 x data 12: the "type:transformer|mlp" cut counts the 44 layers and
// the two _*_transformer_block functions (their names match), so the stages hold 11 or 12 of those
// 46; stage 0 starts with the embedding, stage 3 ends with the output layer.
TEST(NeoxConfig, TwentyBStagesCutByTransformerLayers) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    int64_t held = 0;
    for (int64_t stage = 0; stage < 4; ++stage) {
        auto s = rank_schedule(n.value(), 96, stage * 24);   // rank = stage x (12 x 2)
        ASSERT_TRUE(s.ok()) << s.error().what();
        EXPECT_EQ(s->meta.pipe_stage, stage);
        EXPECT_EQ(s->meta.world, 12);   // ZeRO shards over the data-parallel group
        int64_t matched = 0;
        bool embedding = false, output = false;
        for (const auto& p : s->params) {
            embedding = embedding || p.name == "0.word_embeddings.weight";
            output = output || p.name == "48.final_linear.weight";
            if (p.name.find(".input_layernorm.weight") != std::string::npos) ++matched;
        }
        EXPECT_GE(matched, 9) << "stage " << stage;
        EXPECT_LE(matched, 12) << "stage " << stage;
        held += matched;
        EXPECT_EQ(embedding, stage == 0);
        EXPECT_EQ(output, stage == 3);
    }
    EXPECT_EQ(held, 44);
}

// Stage 0's first activation send: GPT-NeoX passes (hidden [s, b, h], attention_mask), the engine
// partitions the hidden state over the 2 tensor ranks (engine.py 733-748) and sends the mask as fp16:
// the layout (1 + 3 dims + 2 + tp 2 + 1 = 9 int64), this rank's half of 4 x 2048 x 6144, then the
// [1, 1, 2048, 2048] mask. The metadata first: type, count 3, then dtype, ndims, shape of each (the
// shapes 1, 1 and 4 long). GPT-NeoX's tensor all_reduces never reach DeepSpeed's logger.
TEST(NeoxConfig, TwentyBFirstStageSendsPartitionedHiddenAndMask) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    auto s = rank_schedule(n.value(), 96, 0);
    ASSERT_TRUE(s.ok()) << s.error().what();
    std::vector<int64_t> meta, first_sends;
    for (const auto& op : s->ops) {
        if (op.rule == RuleId::PipeMetaSend) meta.push_back(op.elements);
        if ((op.rule == RuleId::PipePartitionMetaSend || op.rule == RuleId::PipeActivationSend) && first_sends.size() < 3)
            first_sends.push_back(op.elements);
    }
    EXPECT_EQ(meta, (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4}));
    EXPECT_EQ(first_sends, (std::vector<int64_t>{9, 4 * 2048 * 6144 / 2, 2048 * 2048}));
    int tp_ops = 0;
    for (const auto& op : s->ops)
        if (op.rule == RuleId::TpForwardAllreduce || op.rule == RuleId::TpBackwardAllreduce) {
            ++tp_ops;
            EXPECT_FALSE(op.logged);
        }
    EXPECT_GT(tp_ops, 0);
}

// gpt_j_residual: one forward all_reduce per layer (attention and MLP summed, transformer.py 624);
// without it two (attention's dense, then the MLP's output). The small model's stage 1 (ranks 2, 3)
// holds 2 of its 4 layers and no embedding: 2 micro batches x 2 layers x 2 = 8 forward all_reduces.
TEST(NeoxConfig, GptJResidualReducesOncePerLayer) {
    auto plain = neox({kSmall});
    ASSERT_TRUE(plain.ok()) << plain.error().what();
    auto s = rank_schedule(plain.value(), 4, 2);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_EQ(test::ops_of(s.value(), RuleId::TpForwardAllreduce).size(), 8u);
    std::string gptj = kSmall;
    gptj.replace(gptj.find("\"gpt_j_residual\": false"), 23, "\"gpt_j_residual\": true ");
    auto j = neox({gptj});
    ASSERT_TRUE(j.ok()) << j.error().what();
    auto sj = rank_schedule(j.value(), 4, 2);
    ASSERT_TRUE(sj.ok()) << sj.error().what();
    EXPECT_EQ(test::ops_of(sj.value(), RuleId::TpForwardAllreduce).size(), 4u);
}

// pipe-parallel-size 1 still runs DeepSpeed's pipeline engine (arguments.py is_pipe_parallel >= 1):
// no point-to-point traffic, the loss broadcast over a one-rank pipe group, ZeRO over all ranks.
TEST(NeoxConfig, OneStageStillRunsThePipelineEngine) {
    std::string one = kSmall;
    one.replace(one.find("\"pipe-parallel-size\": 2"), 23, "\"pipe-parallel-size\": 1");
    one.replace(one.find("\"model-parallel-size\": 2"), 24, "\"model-parallel-size\": 1");
    auto n = neox({one});
    ASSERT_TRUE(n.ok()) << n.error().what();
    auto s = rank_schedule(n.value(), 4, 0);
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_EQ(s->meta.world, 4);
    EXPECT_TRUE(test::ops_of(s.value(), RuleId::PipeActivationSend).empty());
    EXPECT_EQ(test::ops_of(s.value(), RuleId::PipeLossBroadcast).size(), 1u);
}

TEST(NeoxConfig, MergesFilesAndRefusesAsGptNeoxDoes) {
    // A second file adds keys; one that repeats a key (in either spelling GPT-NeoX converts to) is refused.
    auto merged = neox({kSmall, "{\"steps_per_print\": 5}"});
    ASSERT_TRUE(merged.ok()) << merged.error().what();
    auto dup = neox({kSmall, "{\"num_layers\": 8}"});
    ASSERT_FALSE(dup.ok());
    EXPECT_EQ(dup.error().file, "conf1.yml");
    EXPECT_EQ(dup.error().field, "num_layers");
    auto bad_yaml = neox({"{\"num-layers\": [1, 2"});
    ASSERT_FALSE(bad_yaml.ok());
    EXPECT_NE(std::string(bad_yaml.error().what()).find("malformed YAML at line"), std::string::npos);
    std::string wrong = kSmall;
    wrong.replace(wrong.find("\"num-layers\": 4"), 15, "\"num-layers\": \"four\"");
    auto typed = neox({wrong});
    ASSERT_FALSE(typed.ok());
    EXPECT_EQ(typed.error().field, "num_layers");
    auto kv = neox({std::string(kSmall).replace(1, 1, "{\"num_kv_heads\": 2,")});
    ASSERT_FALSE(kv.ok());
    EXPECT_EQ(kv.error().field, "num_kv_heads");
    auto no_vocab = neox({kSmall}, 0);
    ASSERT_FALSE(no_vocab.ok());
    EXPECT_NE(std::string(no_vocab.error().what()).find("--vocab-size"), std::string::npos);
}

// memory of GPT-NeoX-20B's layout: each stage's rank holds its own layers' tensor half. A layer's
// split part is (12h^2 + 13h - 6h) / 2 (the two LayerNorms and the two row-parallel biases, 6h,
// stay whole) + 6h = 6h^2 + 9.5h = 226,550,784 at h = 6144; stage 1 holds 12 layers (the 46
// "transformer" weights cut 12 / 12 / 11 / 11 with the functions counted on stages 0 and 3):
// 2,718,609,408 parameters, 2 bytes each in fp16.
TEST(NeoxConfig, TwentyBModelStatesPerStage) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    auto s = rank_schedule(n.value(), 96, 0);
    ASSERT_TRUE(s.ok()) << s.error().what();
    ScheduleOptions o = options_for_rank(s->meta, 24);
    auto local = rank_local_model(n->model, n->ds_config, o);
    ASSERT_TRUE(local.ok()) << local.error().what();
    EXPECT_EQ(local->total_numel(), 12LL * 226550784LL);
    std::ostringstream text;
    ASSERT_FALSE(write_layout_memory_text(text, n->model, n->ds_config, s.value()));
    EXPECT_NE(text.str().find("2718609408"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("data 12"), std::string::npos);
}
