// Memory of a 3D layout per pipeline stage (analysis/memory_report.hpp layout_fit, analysis/fit.hpp
// estimate_stage_activations), every figure worked out by hand here:
//   - GPT-NeoX-20B's model states per rank against the ZeRO paper's arithmetic, written out;
//   - the micro batches each stage holds under DeepSpeed's 1F1B TrainSchedule, min(p - k, m);
//   - a tensor-parallel GPT layer as Korthikanti et al. 2022 sec. 4.2 counts it, s b h (10 + 24/t);
//   - Ulysses' s / sp tokens per rank;
//   - a model's own block (Llama-2-7B) split item by item under tensor parallelism.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/fit.hpp"
#include "analysis/memory_report.hpp"
#include "inputs/neox_config.hpp"
#include "schedule/schedule.hpp"

using namespace zerosim;

namespace {

const std::string k20B = std::string(ZEROSIM_REFERENCE_DIR) + "/gpt-neox-configs/20B.yml";

NeoxInputs neox_text(const std::string& text, int64_t vocab) {
    auto n = parse_neox_config({"layout.yml"}, {text}, vocab, kBaselineRelease);
    EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().what());
    return n.value();
}

// The pipeline engine's program of `rank` (GPT-NeoX's layout, as the command line builds it).
Schedule neox_schedule(const NeoxInputs& n, int64_t world, int64_t rank, const std::string& partition_type) {
    ScheduleOptions o;
    o.world = world;
    o.steps = 1;
    o.rank = rank;
    o.layout.pipe = std::max<int64_t>(n.pipe, 1);
    o.layout.pipe_engine = n.pipe >= 1;
    o.layout.tensor = n.tensor;
    o.pp_partition = PipePartition::Type;
    o.pp_partition_type = partition_type;
    auto s = build_schedule(n.model, n.ds_config, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

// A small GPT-NeoX model: h = 64, 4 heads, s = 16, b = 2; the vocabulary 1000 padded to 1024.
std::string small_neox(int64_t pipe, int64_t tensor, int64_t layers, int64_t micro_batches, bool checkpoint) {
    return "{\"pipe-parallel-size\": " + std::to_string(pipe) + ", \"model-parallel-size\": " + std::to_string(tensor) +
           ", \"num-layers\": " + std::to_string(layers) +
           ", \"hidden-size\": 64, \"num-attention-heads\": 4, \"seq-length\": 16, \"max-position-embeddings\": 16,"
           " \"pos-emb\": \"rotary\", \"no-weight-tying\": true, \"output_layer_parallelism\": \"column\","
           " \"zero_optimization\": {\"stage\": 1}, \"train_micro_batch_size_per_gpu\": 2,"
           " \"gradient_accumulation_steps\": " + std::to_string(micro_batches) +
           ", \"fp16\": {\"enabled\": true}, \"checkpoint-activations\": " + (checkpoint ? "true" : "false") + "}";
}

}  // namespace

// (a) GPT-NeoX-20B, pipe 4 x model 2 on 96 GPUs: data parallel 96 / (4 x 2) = 12. `zerosim explain`
// prints each stage's parameters per rank (its layers' tensor half: a layer's 12h^2 + 13h, h = 6144,
// split but for its 6h of LayerNorms and row biases, 6h^2 + 9.5h = 226,550,784; stage 0 adds the
// vocabulary-parallel embedding 50432 x 6144 / 2 = 154,927,104):
//   stage 0: 154,927,104 + 11 x 226,550,784 = 2,646,985,728
//   stage 1:               12 x 226,550,784 = 2,718,609,408
//   stage 2:               11 x 226,550,784 = 2,492,058,624
//   stage 3: 10 x 226,550,784 + the final LayerNorm's 2h (whole) + final_linear's vocabulary half
//            50432 x 6144 / 2 = 2,265,507,840 + 12,288 + 154,927,104 = 2,420,447,232
// The ZeRO paper's model states per rank under ZeRO-1 (mixed-precision Adam, K = 12): 2 bytes of
// fp16 parameters and 2 of fp16 gradients per parameter the rank holds, and 12 / N_d of fp32 master
// weights, momentum and variance, N_d = 12: (2 + 2 + 12/12) psi = 5 psi per rank.
//   stage 0: 5 x 2,646,985,728 = 13,234,928,640 bytes
//   stage 1: 5 x 2,718,609,408 = 13,593,047,040
//   stage 2: 5 x 2,492,058,624 = 12,460,293,120
//   stage 3: 5 x 2,420,447,232 = 12,102,236,160
// zerosim's split, as DeepSpeed v0.14.2 allocates it: parameters 2 psi, gradients 2 psi plus the
// fp32 copy of the owned gradient partition for the step (4 psi / 12, which the paper does not
// count), optimizer 12 psi / 12; buckets (2 x reduce_bucket_size 1.26e9 x 2 bytes) apart.
TEST(LayoutMemory, GptNeox20BModelStatesAsThePaperSplitsThem) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    const Schedule s = neox_schedule(n.value(), 96, 0, "transformer|mlp");
    FitOptions fit;
    fit.gpu_memory_gb = 80;
    auto stages = layout_fit(n->model, n->ds_config, s, fit);
    ASSERT_TRUE(stages.ok()) << stages.error().what();
    ASSERT_EQ(stages->size(), 4u);
    const int64_t psi[4] = {2646985728LL, 2718609408LL, 2492058624LL, 2420447232LL};
    const int64_t paper[4] = {13234928640LL, 13593047040LL, 12460293120LL, 12102236160LL};
    const int64_t ranks[4] = {0, 24, 48, 72};   // stage x (12 x 2)
    for (size_t k = 0; k < 4; ++k) {
        const StageFit& r = stages.value()[k];
        EXPECT_EQ(r.rank, ranks[k]);
        EXPECT_EQ(r.params, psi[k]);
        const MemoryEstimate& e = r.states;
        const double p = static_cast<double>(psi[k]);
        EXPECT_EQ(e.category("parameters"), 2 * psi[k]);
        EXPECT_NEAR(static_cast<double>(e.category("optimizer")), 12 * p / 12, 0.01 * 12 * p / 12);
        EXPECT_NEAR(static_cast<double>(e.category("gradients")), 2 * p + 4 * p / 12, 0.01 * (2 * p + 4 * p / 12));
        int64_t fp32_step_partition = 0;
        for (const auto& it : e.items)
            if (it.name == "fp32 gradient partition for the step") fp32_step_partition = it.bytes;
        EXPECT_NEAR(static_cast<double>(fp32_step_partition), 4 * p / 12, 0.01 * 4 * p / 12);
        // The paper's arithmetic: what the rank holds for parameters, gradients and optimizer
        // states less DeepSpeed's fp32 step copy, within 1% (the partition is padded).
        const int64_t states = e.category("parameters") + e.category("gradients") + e.category("optimizer") - fp32_step_partition;
        EXPECT_NEAR(static_cast<double>(states), static_cast<double>(paper[k]), 0.01 * static_cast<double>(paper[k]));
        EXPECT_EQ(e.category("buckets"), 2 * 1260000000LL * 2);
        // The paper's figure as memory prints it beside (paper_bytes, "ZeRO paper" in the JSON).
        EXPECT_NEAR(static_cast<double>(e.paper_bytes), static_cast<double>(paper[k]), 0.01 * static_cast<double>(paper[k]));
    }
}

// GPT-NeoX-20B's activations (checkpoint-activations true, checkpoint-num-layers 1; s = 2048, b = 4,
// m = 32 micro batches; h = 6144, v = 50432, t = 2; fp16): s b h = 2048 x 4 x 6144 = 50,331,648.
// Each checkpointed layer keeps its input, 2 s b h, per micro batch in flight; one layer is
// recomputed at a time, s b h (10 + 24/2) = 22 s b h = 1,107,296,256.
//   stage 0 (11 layers, 4 in flight): 2 x 50,331,648 x 11 x 4 = 4,429,185,024
//       + 1,107,296,256 + the embedding's dropout mask s b h x 4 = 201,326,592   -> 5,737,807,872
//   stage 3 (10 layers, 1 in flight): 2 x 50,331,648 x 10 = 1,006,632,960 + 1,107,296,256
//       + final norm and head inputs 4 s b h = 201,326,592
//       + fp32 logits 4 s b v / t = 4 x 2048 x 4 x 50432 / 2 = 826,277,888        -> 3,141,533,696
TEST(LayoutMemory, GptNeox20BActivationsPerStage) {
    auto n = load_neox_config({k20B}, 50277, kBaselineRelease);
    ASSERT_TRUE(n.ok()) << n.error().what();
    EXPECT_TRUE(n->model.gradient_checkpointing);   // checkpoint-activations: true
    auto stages = layout_fit(n->model, n->ds_config, neox_schedule(n.value(), 96, 0, "transformer|mlp"), FitOptions{});
    ASSERT_TRUE(stages.ok()) << stages.error().what();
    const auto& st = stages.value();
    const int64_t layers[4] = {11, 12, 11, 10}, in_flight[4] = {4, 3, 2, 1};
    for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(st[k].activations.layers, layers[k]) << k;
        EXPECT_EQ(st[k].activations.in_flight, in_flight[k]) << k;
    }
    EXPECT_EQ(st[0].activations.total(), 5737807872LL);
    EXPECT_EQ(st[1].activations.total(), 2LL * 50331648 * 12 * 3 + 1107296256LL);
    EXPECT_EQ(st[3].activations.total(), 3141533696LL);
    EXPECT_EQ(stage_holding_most(st), 0);
    EXPECT_FALSE(st[0].fit.known());   // no GPU given
    EXPECT_EQ(st[0].fit.verdict(), "unknown");
}

// (b) In-flight micro batches under TrainSchedule: stage k of p holds min(p - k, m).
TEST(LayoutMemory, MicroBatchesInFlightUnder1F1B) {
    // p = 4, m = 8: 4, 3, 2, 1.   p = 4, m = 2: 2, 2, 2, 1.   m = 1: 1 everywhere.
    const int64_t eight[4] = {4, 3, 2, 1}, two[4] = {2, 2, 2, 1};
    for (int64_t k = 0; k < 4; ++k) {
        EXPECT_EQ(micro_batches_in_flight(8, 4, k, true), eight[k]) << k;
        EXPECT_EQ(micro_batches_in_flight(2, 4, k, true), two[k]) << k;
        EXPECT_EQ(micro_batches_in_flight(1, 4, k, true), 1) << k;
    }
    EXPECT_EQ(micro_batches_in_flight(5, 2, 0, true), 2);
    EXPECT_EQ(micro_batches_in_flight(5, 2, 1, true), 1);
    EXPECT_EQ(micro_batches_in_flight(32, 1, 0, true), 1);    // one stage: forward, backward, next
    EXPECT_EQ(micro_batches_in_flight(32, 1, 0, false), 1);   // no pipeline engine
}

// The same through the whole path: a small GPT-NeoX pipeline, pipe 4 on 4 ranks, 8 layers cut two
// per stage (type:ParallelTransformerLayerPipe), m = 8, s = 16, b = 2, h = 64, v = 1024, t = 1, fp16.
// s b h = 2048; a layer 34 s b h = 69,632 (t = 1: 10 + 24).
//   stage 0: 4 in flight x 2 layers x 69,632 = 557,056 + embedding mask 2048 x 4 = 8,192 -> 565,248
//   stage 1: 3 x 2 x 69,632 = 417,792;   stage 2: 2 x 2 x 69,632 = 278,528
//   stage 3: 1 x 2 x 69,632 = 139,264 + 4 s b h 8,192 + fp32 logits 4 x 16 x 2 x 1024 = 131,072 -> 278,528
TEST(LayoutMemory, SmallPipelineStagesByHand) {
    const NeoxInputs n = neox_text(small_neox(4, 1, 8, 8, false), 1000);
    auto stages = layout_fit(n.model, n.ds_config, neox_schedule(n, 4, 0, "ParallelTransformerLayerPipe"), FitOptions{});
    ASSERT_TRUE(stages.ok()) << stages.error().what();
    const int64_t want[4] = {565248, 417792, 278528, 278528}, flight[4] = {4, 3, 2, 1};
    for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(stages.value()[k].activations.layers, 2) << k;
        EXPECT_EQ(stages.value()[k].activations.in_flight, flight[k]) << k;
        EXPECT_EQ(stages.value()[k].activations.total(), want[k]) << k;
    }
    EXPECT_EQ(stage_holding_most(stages.value()), 0);
}

// (c) A tensor-parallel GPT layer, Korthikanti et al. 2022 sec. 4.2.1 with t = 2 and no s x s
// scores: s b h (10 + 24/t) = 2048 x 22 = 45,056 per layer (s = 16, b = 2, h = 64). GPT-NeoX with
// pipe-parallel-size 1 (the engine, one stage: first and last, 1 micro batch in flight), model 2,
// 2 layers, v = 1000 padded to a multiple of 128 x 2 = 1024, the head column (vocabulary) parallel:
//   layers 2 x 45,056 = 90,112; embedding mask s b h = 2,048; final norm and head inputs 4 s b h
//   = 8,192; logits 4 s b v / t = 4 x 16 x 2 x 1024 / 2 = 65,536; in all 165,888.
// Checkpointed: each layer's input 2 s b h (whole on both tensor ranks) + one layer recomputed:
//   2 x 2 x 2,048 + 45,056 = 53,248.
TEST(LayoutMemory, TensorParallelLayerAsKorthikantiSection42) {
    const NeoxInputs n = neox_text(small_neox(1, 2, 2, 1, false), 1000);
    auto stages = layout_fit(n.model, n.ds_config, neox_schedule(n, 2, 0, "transformer|mlp"), FitOptions{});
    ASSERT_TRUE(stages.ok()) << stages.error().what();
    ASSERT_EQ(stages->size(), 1u);
    const StageActivations& a = stages.value()[0].activations;
    EXPECT_EQ(a.tensor, 2);
    EXPECT_EQ(a.layers, 2);
    EXPECT_EQ(a.per_layer_bytes, 45056);
    EXPECT_EQ(a.layers_bytes, 90112);
    EXPECT_TRUE(a.vocab_parallel);
    EXPECT_EQ(a.outside_bytes, 2048 + 8192 + 65536);
    EXPECT_EQ(a.total(), 165888);
    FitOptions ckpt;
    ckpt.activation_checkpointing = true;
    auto c = layout_fit(n.model, n.ds_config, neox_schedule(n, 2, 0, "transformer|mlp"), ckpt);
    ASSERT_TRUE(c.ok()) << c.error().what();
    EXPECT_EQ(c.value()[0].activations.layers_bytes, 53248);
    EXPECT_EQ(c.value()[0].activations.kept_per_layer_bytes, 2 * 2048);
}

// (d) Ulysses: sp = 2 halves the tokens each rank holds. The small GPT-NeoX model, s = 16 -> 8,
// b = 2, h = 64, t = 1, one stage, m = 1: a layer 34 x 8 x 2 x 64 = 34,816; the outside terms at
// s = 8: mask 1,024, 4 s b h 4,096, logits 4 x 8 x 2 x 1024 = 65,536.
TEST(LayoutMemory, UlyssesDividesTheTokens) {
    const NeoxInputs n = neox_text(small_neox(1, 1, 2, 1, false), 1000);
    ParallelLayout L;
    L.world = 2;
    L.sequence = 2;
    const StageActivations a = estimate_stage_activations(n.model, n.model, L, 0, 16, 2, 1, DType::FP16, false);
    EXPECT_EQ(a.tokens, 8);
    EXPECT_EQ(a.per_layer_bytes, 34816);
    EXPECT_EQ(a.layers_bytes, 2 * 34816);
    EXPECT_EQ(a.outside_bytes, 1024 + 4096 + 65536);
    L.sequence = 1;
    const StageActivations whole = estimate_stage_activations(n.model, n.model, L, 0, 16, 2, 1, DType::FP16, false);
    EXPECT_EQ(whole.per_layer_bytes, 2 * 34816);
}

// A model's own block under tensor parallelism: Llama-2-7B (h = 4096, 32 heads of 128, no GQA,
// I = 11008), per token and layer in 16-bit bytes. Whole on every tensor rank: two norms' inputs
// 2 x 2h = 16,384, attention's input 2h = 8,192, the MLP's input 2h = 8,192: 32,768. Split: Q, K, V
// 3 x 2 x 4096 = 24,576, o_proj's input 8,192, gate, up, activation, product 4 x 2 x 11008 = 88,064:
// 120,832. t = 2: 32,768 + 60,416 = 93,184; at s = 4096, b = 1: 381,681,664 bytes a layer.
TEST(LayoutMemory, OwnBlockSplitItemByItem) {
    auto m = load_model(std::string(ZEROSIM_CONFIGS_DIR) + "/models/llama-2-7b.json");
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ(m->activations.total, 32LL * (32768 + 120832));
    EXPECT_EQ(m->activations.outside_tp, 32LL * 32768);
    EXPECT_EQ(m->activations.largest_outside_tp, 32768);
    ParallelLayout L;
    L.world = 2;
    L.tensor = 2;
    const StageActivations a = estimate_stage_activations(m.value(), m.value(), L, 0, 4096, 1, 1, DType::BF16, false);
    EXPECT_EQ(a.layers, 32);
    EXPECT_EQ(a.per_layer_bytes, 4096LL * 93184);
    EXPECT_EQ(a.layers_bytes, 32LL * 4096 * 93184);
    EXPECT_FALSE(a.embedding_mask);   // these families train without dropout
    EXPECT_TRUE(a.vocab_parallel);    // lm_head column (vocabulary) parallel
    EXPECT_EQ(a.outside_bytes, 4LL * 4096 * 4096 + 4LL * 4096 * 32000 / 2);
}

// --format json for a layout: one object per stage with the model states split, the activations,
// the micro batches in flight and the fit.
TEST(LayoutMemory, JsonOneObjectPerStage) {
    const NeoxInputs n = neox_text(small_neox(4, 1, 8, 8, false), 1000);
    FitOptions fit;
    fit.gpu_memory_gb = 80;
    std::ostringstream out;
    ASSERT_FALSE(write_layout_memory_json(out, n.model, n.ds_config, neox_schedule(n, 4, 0, "ParallelTransformerLayerPipe"), fit));
    const auto j = nlohmann::json::parse(out.str());
    ASSERT_EQ(j.size(), 4u);
    EXPECT_EQ(j[1]["stage"], 1);
    EXPECT_EQ(j[1]["rank"], 1);
    EXPECT_EQ(j[1]["micro_batches_in_flight"], 3);
    EXPECT_EQ(j[1]["activation_bytes"]["total"], 417792);
    EXPECT_TRUE(j[1]["model_state_bytes"].contains("optimizer"));
    EXPECT_EQ(j[0]["fits"], "yes");
    EXPECT_EQ(j[0]["holds_most"], true);
    EXPECT_EQ(j[3]["holds_most"], false);
    EXPECT_EQ(j[2]["gpu_memory_bytes"], 80000000000LL);
}
