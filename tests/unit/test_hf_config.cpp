// Model input from Hugging Face config.json files, checked against published parameter counts and
// the module order the transformers classes run in (parameter lists are in test_model.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "inputs/model.hpp"
#include "test_helpers.hpp"
#include "test_model_helpers.hpp"

using namespace zerosim;
using namespace zerosim::model_test;
using zerosim::test::config;
using zerosim::test::reference;
using zerosim::test::temp_file;

// ---------------------------------------------------------------------------------------------
// Hugging Face configs, checked against published parameter counts

// GPT-2 small: 124,439,808 parameters (HF model card); 2 embeddings + 12 per layer x 12 + ln_f 2
// = 148 tensors; lm_head is tied to wte, so it is not a parameter of its own.
TEST(HfConfig, Gpt2Small) {
    Model m = load_ok(config("models/gpt2-small.json"));
    EXPECT_EQ(m.params.size(), 148u);
    EXPECT_EQ(m.total_numel(), 124439808);
    EXPECT_EQ(param_index(m, "lm_head.weight"), -1);
    EXPECT_EQ(m.params[0].name, "transformer.wte.weight");
    EXPECT_EQ(m.params[0].shape, (std::vector<int64_t>{50257, 768}));
    int head = module_index(m, "lm_head");
    ASSERT_GE(head, 0);
    EXPECT_EQ(m.modules[head].params, (std::vector<int>{param_index(m, "transformer.wte.weight")}));
    EXPECT_EQ(m.forward_order.back(), head);
}

// GPT-2 uses Conv1D, whose weight is stored [in, out]: c_attn is [768, 3*768].
TEST(HfConfig, Gpt2Conv1DShapes) {
    Model m = load_ok(config("models/gpt2-small.json"));
    int i = param_index(m, "transformer.h.0.attn.c_attn.weight");
    ASSERT_GE(i, 0);
    EXPECT_EQ(m.params[i].shape, (std::vector<int64_t>{768, 2304}));
    int fc = param_index(m, "transformer.h.11.mlp.c_fc.weight");
    ASSERT_GE(fc, 0);
    EXPECT_EQ(m.params[fc].shape, (std::vector<int64_t>{768, 3072}));
}

// HF Trainer groups: 1-D tensors (biases, LayerNorm) get no weight decay (group 1). GPT-2 small:
// 8 such tensors per layer (ln_1 w/b, c_attn.b, c_proj.b, ln_2 w/b, c_fc.b, mlp.c_proj.b) x 12
// + ln_f 2 = 98, holding 12 x (4*768 + 2304 + 768 + 3072 + 768) + 2*768 = 121,344 elements.
TEST(HfConfig, Gpt2DecayNoDecayByDefault) {
    Model m = load_ok(config("models/gpt2-small.json"));
    EXPECT_EQ(m.num_groups, 2);
    int no_decay = 0;
    for (const auto& p : m.params) {
        EXPECT_EQ(p.group, p.shape.size() == 1 ? 1 : 0) << p.name;
        no_decay += p.group == 1;
    }
    EXPECT_EQ(no_decay, 98);
    EXPECT_EQ(m.group_numel(1), 121344);
    EXPECT_EQ(m.group_numel(0), 124439808 - 121344);
}

// GPT-2 call tree: root, transformer, wte, wpe, drop, ln_f, lm_head (7) + 13 per block (block,
// ln_1, attn, c_attn, attn_dropout, c_proj, resid_dropout, ln_2, mlp, c_fc, act, c_proj, dropout).
TEST(HfConfig, Gpt2CallTreeSize) {
    Model m = load_ok(config("models/gpt2-small.json"));
    EXPECT_EQ(m.calls.size(), 13u * 12 + 7);
    Model two = hf_inline("model_gpt2_l2.json", R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
                                              "vocab_size": 100, "n_positions": 32})");
    EXPECT_EQ(two.calls.size(), 13u * 2 + 7);
    EXPECT_EQ(call_named(two, "transformer.h"), nullptr);  // ModuleList, never called
    ASSERT_NE(call_named(two, "transformer.wte"), nullptr);
    EXPECT_FALSE(call_named(two, "transformer.wte")->grad_in);
    EXPECT_FALSE(call_named(two, "transformer")->grad_in);
    EXPECT_TRUE(call_named(two, "transformer.h.0.ln_1")->grad_in);
}

// GPT-2 with tie_word_embeddings false has its own lm_head.weight [V, E]: 124,439,808 + 50257*768.
TEST(HfConfig, Gpt2Untied) {
    Model m = hf_inline("model_gpt2_untied.json", R"({"model_type": "gpt2", "tie_word_embeddings": false})");
    EXPECT_EQ(m.params.size(), 149u);
    EXPECT_EQ(m.total_numel(), 124439808 + 50257LL * 768);
    int i = param_index(m, "lm_head.weight");
    ASSERT_GE(i, 0);
    EXPECT_EQ(m.params[i].shape, (std::vector<int64_t>{50257, 768}));
}

// Pythia-70m: 70,426,624 parameters (EleutherAI model card); embed_in + 12 per layer x 6 +
// final_layer_norm 2 + untied embed_out = 76 tensors.
TEST(HfConfig, Pythia70m) {
    Model m = load_ok(config("models/pythia-70m.json"));
    EXPECT_EQ(m.params.size(), 76u);
    EXPECT_EQ(m.total_numel(), 70426624);
    EXPECT_GE(param_index(m, "embed_out.weight"), 0);
}

// GPTNeoXLayer registers both norms first but runs post_attention_layernorm after attention.dense.
TEST(HfConfig, GptNeoxForwardOrder) {
    Model m = load_ok(config("models/pythia-70m.json"));
    EXPECT_EQ(m.params[param_index(m, "gpt_neox.layers.0.input_layernorm.weight") + 2].name,
              "gpt_neox.layers.0.post_attention_layernorm.weight");
    EXPECT_EQ(forward_names(m, "gpt_neox.layers.0."),
              (std::vector<std::string>{"input_layernorm", "attention.query_key_value", "attention.dense",
                                        "post_attention_layernorm", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"}));
}

// Llama-2-7B: 6,738,415,616 parameters (Meta); embed + 9 per layer x 32 + norm + lm_head = 291.
TEST(HfConfig, Llama2_7b) {
    Model m = load_ok(config("models/llama-2-7b.json"));
    EXPECT_EQ(m.params.size(), 291u);
    EXPECT_EQ(m.total_numel(), 6738415616LL);
    EXPECT_EQ(m.params.back().name, "lm_head.weight");
}

// Llama-2-70B: 68,976,648,192 parameters; GQA with 8 KV heads of 128: k_proj is [1024, 8192].
TEST(HfConfig, Llama2_70b) {
    Model m = load_ok(config("models/llama-2-70b.json"));
    EXPECT_EQ(m.total_numel(), 68976648192LL);
    int k = param_index(m, "model.layers.0.self_attn.k_proj.weight");
    ASSERT_GE(k, 0);
    EXPECT_EQ(m.params[k].shape, (std::vector<int64_t>{1024, 8192}));
    int q = param_index(m, "model.layers.79.self_attn.q_proj.weight");
    ASSERT_GE(q, 0);
    EXPECT_EQ(m.params[q].shape, (std::vector<int64_t>{8192, 8192}));
}

// Llama registers self_attn, mlp, then the norms; it runs input_layernorm, q, k, v, o,
// post_attention_layernorm, gate, up, down.
TEST(HfConfig, LlamaForwardOrderDiffersFromRegistration) {
    Model m = load_ok(config("models/llama-2-7b.json"));
    EXPECT_EQ(m.params[1].name, "model.layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(forward_names(m, "model.layers.0."),
              (std::vector<std::string>{"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                        "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj",
                                        "mlp.up_proj", "mlp.down_proj"}));
}

// Llama call tree: root, model, embed_tokens, norm, lm_head (5) + 14 per layer (layer,
// input_layernorm, self_attn, q, k, v, rotary_emb, o, post_attention_layernorm, mlp, gate, act_fn,
// up, down). Rotary embeddings compute cos/sin from buffers: their output carries no gradient.
TEST(HfConfig, LlamaCallTree) {
    Model m = load_ok(config("models/llama-2-7b.json"));
    EXPECT_EQ(m.calls.size(), 14u * 32 + 5);
    int rotary = 0;
    for (const auto& c : m.calls)
        if (c.name.size() >= 10 && c.name.compare(c.name.size() - 10, 10, "rotary_emb") == 0) {
            ++rotary;
            EXPECT_FALSE(c.grad_out) << c.name;
        }
    EXPECT_EQ(rotary, 32);
    EXPECT_TRUE(call_named(m, "model.layers.0.self_attn.q_proj")->grad_out);
    EXPECT_FALSE(call_named(m, "model.embed_tokens")->grad_in);
}

// Mistral-7B-v0.1: 7,241,732,096 parameters (GQA 8 KV heads, intermediate 14336, untied head).
TEST(HfConfig, Mistral7b) {
    Model m = hf_inline("model_mistral.json", R"({"model_type": "mistral", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32000})");
    EXPECT_EQ(m.total_numel(), 7241732096LL);
    EXPECT_EQ(m.params.size(), 291u);
}

// Qwen2-0.5B: 494,032,768 parameters; q/k/v carry biases (12 tensors per layer), head tied:
// embed + 12 x 24 + norm = 290 tensors.
TEST(HfConfig, Qwen2_0_5b) {
    Model m = hf_inline("model_qwen2.json", R"({"model_type": "qwen2", "hidden_size": 896,
        "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
        "num_hidden_layers": 24, "vocab_size": 151936, "tie_word_embeddings": true})");
    EXPECT_EQ(m.params.size(), 290u);
    EXPECT_EQ(m.total_numel(), 494032768LL);
    EXPECT_EQ(param_index(m, "lm_head.weight"), -1);
    int kb = param_index(m, "model.layers.0.self_attn.k_proj.bias");
    ASSERT_GE(kb, 0);
    EXPECT_EQ(m.params[kb].shape, (std::vector<int64_t>{128}));  // 2 KV heads x 64
    EXPECT_EQ(param_index(m, "model.layers.0.self_attn.o_proj.bias"), -1);
}
