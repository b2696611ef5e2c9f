// Model input: parameter-list JSON and the errors bad files give (Hugging Face config.json in
// test_hf_config.cpp).
// Expected counts come from the reference README and from the published model sizes, not from
// the code under test.
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
// The reference tiny GPT (shared/reference/deepspeed-v0.14.2-cpu/model.json)

// The README: 29 parameter tensors, 667,136 parameters, in named_parameters() order.
TEST(ReferenceModel, CountsMatchTheReadme) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_EQ(m.params.size(), 29u);
    EXPECT_EQ(m.total_numel(), 667136);
    EXPECT_EQ(m.name, "tiny-gpt");
}

// Registration order is kept: embeddings first, the untied LM head (128x1024 -> [1024,128]) last.
TEST(ReferenceModel, KeepsRegistrationOrder) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    ASSERT_EQ(m.params.size(), 29u);
    EXPECT_EQ(m.params[0].name, "wte.weight");
    EXPECT_EQ(m.params[0].shape, (std::vector<int64_t>{1024, 128}));
    EXPECT_EQ(m.params[0].numel, 131072);
    EXPECT_EQ(m.params[1].name, "wpe.weight");
    EXPECT_EQ(m.params[2].name, "blocks.0.ln1.weight");
    EXPECT_EQ(m.params[4].name, "blocks.0.attn.qkv.weight");
    EXPECT_EQ(m.params[4].shape, (std::vector<int64_t>{384, 128}));
    EXPECT_EQ(m.params[14].name, "blocks.1.ln1.weight");  // 2 embeddings + 12 tensors of block 0
    EXPECT_EQ(m.params[28].name, "lm_head.weight");
    EXPECT_EQ(m.params[28].shape, (std::vector<int64_t>{1024, 128}));
}

// A parameter list without "param_groups" puts everything in group 0 (one optimizer group).
TEST(ReferenceModel, OneGroupByDefault) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_EQ(m.num_groups, 1);
    for (const auto& p : m.params) EXPECT_EQ(p.group, 0) << p.name;
    EXPECT_EQ(m.group_numel(0), 667136);
}

// A parameter's module is its name without the last component; 16 modules own parameters
// (wte, wpe, 6 per block x 2, ln_f, lm_head).
TEST(ReferenceModel, ModulesFromNames) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_EQ(m.modules.size(), 16u);
    for (const auto& p : m.params) {
        ASSERT_GE(p.module, 0);
        std::string expected = p.name.substr(0, p.name.rfind('.'));
        EXPECT_EQ(m.modules[p.module].name, expected);
    }
    int qkv = module_index(m, "blocks.0.attn.qkv");
    ASSERT_GE(qkv, 0);
    EXPECT_EQ(m.modules[qkv].params, (std::vector<int>{4, 5}));
    EXPECT_EQ(m.modules[qkv].kind, ModuleKind::Linear);
    EXPECT_EQ(m.modules[module_index(m, "wte")].kind, ModuleKind::Embedding);
    EXPECT_EQ(m.modules[module_index(m, "ln_f")].kind, ModuleKind::Norm);
}

// Without "forward_order", modules run in first-appearance order (the README says registration order).
TEST(ReferenceModel, ForwardOrderIsFirstAppearance) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_EQ(forward_names(m, ""),
              (std::vector<std::string>{"wte", "wpe", "blocks.0.ln1", "blocks.0.attn.qkv", "blocks.0.attn.proj",
                                        "blocks.0.ln2", "blocks.0.mlp.fc1", "blocks.0.mlp.fc2", "blocks.1.ln1",
                                        "blocks.1.attn.qkv", "blocks.1.attn.proj", "blocks.1.ln2",
                                        "blocks.1.mlp.fc1", "blocks.1.mlp.fc2", "ln_f", "lm_head"}));
}

// The call tree: root, wte, wpe, 9 nodes per block (block + ln1, attn, attn.qkv, attn.proj, ln2,
// mlp, mlp.fc1, mlp.fc2) x 2, ln_f, lm_head = 23; "blocks" is a ModuleList, never called.
TEST(ReferenceModel, CallTree) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    EXPECT_EQ(m.calls.size(), 23u);
    EXPECT_EQ(call_named(m, "blocks"), nullptr);
    ASSERT_FALSE(m.calls.empty());
    EXPECT_EQ(m.calls[0].name, "");
    std::vector<std::string> root_children;
    for (int c : m.calls[0].children) root_children.push_back(m.calls[c].name);
    EXPECT_EQ(root_children, (std::vector<std::string>{"wte", "wpe", "blocks.0", "blocks.1", "ln_f", "lm_head"}));
    const CallNode* attn = call_named(m, "blocks.0.attn");
    ASSERT_NE(attn, nullptr);
    EXPECT_EQ(attn->module, -1);  // a container: owns no parameter directly
    ASSERT_EQ(attn->children.size(), 2u);
    EXPECT_EQ(m.calls[attn->children[0]].name, "blocks.0.attn.qkv");
    EXPECT_EQ(m.calls[attn->children[1]].name, "blocks.0.attn.proj");
    const CallNode* qkv = call_named(m, "blocks.0.attn.qkv");
    ASSERT_NE(qkv, nullptr);
    EXPECT_EQ(qkv->module, module_index(m, "blocks.0.attn.qkv"));
}

// Embeddings take token ids: they and the root that holds them get no post-backward hook.
TEST(ReferenceModel, GradientInputs) {
    Model m = load_ok(reference("deepspeed-v0.14.2-cpu/model.json"));
    ASSERT_EQ(m.calls.size(), 23u);
    EXPECT_FALSE(m.calls[0].grad_in);
    EXPECT_FALSE(call_named(m, "wte")->grad_in);
    EXPECT_FALSE(call_named(m, "wpe")->grad_in);
    EXPECT_TRUE(call_named(m, "blocks.0.ln1")->grad_in);
    EXPECT_TRUE(call_named(m, "blocks.0")->grad_in);
    EXPECT_TRUE(call_named(m, "lm_head")->grad_in);
}

// ---------------------------------------------------------------------------------------------
// Parameter-list features

const char* kTwoLayer = R"({"parameters": [
  {"name": "emb.weight", "shape": [10, 4]},
  {"name": "fc.weight", "shape": [4, 4]},
  {"name": "fc.bias", "shape": [4]},
  {"name": "norm.weight", "shape": [4]}
]})";

// "param_groups": "decay_no_decay" puts 1-D tensors (bias, norm weight) in group 1: 40+16 vs 4+4.
TEST(ParamList, DecayNoDecayGroups) {
    std::string text = kTwoLayer;
    text.insert(1, R"("param_groups": "decay_no_decay", )");
    Model m = load_ok(temp_file("model_pl_decay.json", text));
    EXPECT_EQ(m.num_groups, 2);
    EXPECT_EQ(m.params[0].group, 0);
    EXPECT_EQ(m.params[1].group, 0);
    EXPECT_EQ(m.params[2].group, 1);
    EXPECT_EQ(m.params[3].group, 1);
    EXPECT_EQ(m.group_numel(0), 56);
    EXPECT_EQ(m.group_numel(1), 8);
}

// An explicit "group" wins over the policy, and an unknown policy name is an error on param_groups.
TEST(ParamList, ExplicitGroups) {
    Model m = load_ok(temp_file("model_pl_group.json", R"({"param_groups": "decay_no_decay", "parameters": [
      {"name": "a.weight", "shape": [3, 3], "group": 1},
      {"name": "a.bias", "shape": [3], "group": 0},
      {"name": "b.weight", "shape": [2, 3]}]})"));
    EXPECT_EQ(m.num_groups, 2);
    EXPECT_EQ(m.params[0].group, 1);
    EXPECT_EQ(m.params[1].group, 0);
    EXPECT_EQ(m.params[2].group, 0);  // 2-D under decay_no_decay
    EXPECT_EQ(m.group_numel(1), 9);
    EXPECT_EQ(m.group_numel(0), 9);

    std::string err = load_error(temp_file("model_pl_badpolicy.json", R"({"param_groups": "three", "parameters": [
      {"name": "a.weight", "shape": [3]}]})"));
    EXPECT_NE(err.find("param_groups"), std::string::npos) << err;
}

// Empty optimizer groups are dropped, as DeepSpeed does: ids 0 and 5 become 0 and 1.
TEST(ParamList, EmptyGroupsAreCompacted) {
    Model m = load_ok(temp_file("model_pl_compact.json", R"({"parameters": [
      {"name": "a.weight", "shape": [2, 2], "group": 5},
      {"name": "b.weight", "shape": [3], "group": 0},
      {"name": "c.weight", "shape": [5], "group": 5}]})"));
    EXPECT_EQ(m.num_groups, 2);
    EXPECT_EQ(m.params[0].group, 1);
    EXPECT_EQ(m.params[1].group, 0);
    EXPECT_EQ(m.params[2].group, 1);
    EXPECT_EQ(m.group_numel(0), 3);
    EXPECT_EQ(m.group_numel(1), 9);
}

// "forward_order" overrides first appearance, and the call tree follows it.
TEST(ParamList, ForwardOrderReorders) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "forward_order": ["emb", "norm", "fc"])");
    Model m = load_ok(temp_file("model_pl_order.json", text));
    EXPECT_EQ(forward_names(m, ""), (std::vector<std::string>{"emb", "norm", "fc"}));
    // Registration order of the parameters is unchanged.
    EXPECT_EQ(m.params[1].name, "fc.weight");
    EXPECT_EQ(call_names(m), (std::vector<std::string>{"", "emb", "norm", "fc"}));
}

// A forward_order that names a module owning no parameters points at its own entry, here index 1.
TEST(ParamList, ForwardOrderUnknownModule) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "forward_order": ["emb", "attn", "fc", "norm"])");
    std::string err = load_error(temp_file("model_pl_order_bad.json", text));
    EXPECT_NE(err.find("forward_order[1]"), std::string::npos) << err;
    EXPECT_NE(err.find("attn"), std::string::npos) << err;
}

// A forward_order that leaves out a module with parameters is an error: its gradients would never exist.
TEST(ParamList, ForwardOrderMissingModule) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "forward_order": ["emb", "fc"])");
    std::string err = load_error(temp_file("model_pl_order_missing.json", text));
    EXPECT_NE(err.find("forward_order"), std::string::npos) << err;
    EXPECT_NE(err.find("norm"), std::string::npos) << err;
}

// "tied": a head using the embedding's weight is a module with that parameter, listed once in
// params (named_parameters() dedups), and it runs last.
TEST(ParamList, TiedParameter) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "tied": [{"module": "head", "parameter": "emb.weight"}])");
    Model m = load_ok(temp_file("model_pl_tied.json", text));
    EXPECT_EQ(m.params.size(), 4u);
    EXPECT_EQ(m.total_numel(), 64);  // 40 + 16 + 4 + 4: the tied weight counts once
    int head = module_index(m, "head");
    ASSERT_GE(head, 0);
    EXPECT_EQ(m.modules[head].params, (std::vector<int>{0}));
    EXPECT_EQ(m.params[0].module, module_index(m, "emb"));  // the owner stays the embedding
    ASSERT_FALSE(m.forward_order.empty());
    EXPECT_EQ(m.forward_order.back(), head);
}

// A tied parameter naming no parameter is an error on tied[0].parameter.
TEST(ParamList, TiedUnknownParameter) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "tied": [{"module": "head", "parameter": "nope.weight"}])");
    std::string err = load_error(temp_file("model_pl_tied_bad.json", text));
    EXPECT_NE(err.find("tied[0].parameter"), std::string::npos) << err;
}

// A module added by "tied" is a call of its own, so stage 3 fetches the tied weight there too.
TEST(ParamList, TiedModuleIsInTheCallTree) {
    std::string text = kTwoLayer;
    text.insert(text.size() - 1, R"(, "tied": [{"module": "head", "parameter": "emb.weight"}])");
    Model m = load_ok(temp_file("model_pl_tied_calls.json", text));
    const CallNode* head = call_named(m, "head");
    ASSERT_NE(head, nullptr) << "tied module 'head' has no call node";
    EXPECT_EQ(head->module, module_index(m, "head"));
}

// ---------------------------------------------------------------------------------------------
// Bad input

// The stray '@' is on line 3, column 8 (two spaces, "b", colon, space, then '@'); the message
// gives that line and column.
TEST(BadModel, MalformedJsonGivesLineAndColumn) {
    std::string path = temp_file("model_bad_syntax.json", "{\n  \"a\": 1,\n  \"b\": @\n}\n");
    std::string err = load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find("line 3, column 8"), std::string::npos) << err;
}

// An unsupported model_type is reported on the model_type field, with the value.
TEST(BadModel, UnknownModelType) {
    std::string err = load_error(temp_file("model_bert.json", R"({"model_type": "bert", "hidden_size": 768})"));
    EXPECT_NE(err.find("model_type"), std::string::npos) << err;
    EXPECT_NE(err.find("bert"), std::string::npos) << err;
}

// A zero dimension names the parameter's shape field (second parameter: parameters[1]).
TEST(BadModel, ZeroSizedDimension) {
    std::string err = load_error(temp_file("model_zero_dim.json", R"({"parameters": [
      {"name": "a.weight", "shape": [4, 4]},
      {"name": "b.weight", "shape": [4, 0]}]})"));
    EXPECT_NE(err.find("parameters[1].shape"), std::string::npos) << err;
}

// A zero size in a Hugging Face config names that key.
TEST(BadModel, ZeroHiddenSizeInHfConfig) {
    std::string err = load_error(temp_file("model_zero_hidden.json", R"({"model_type": "llama", "hidden_size": 0})"));
    EXPECT_NE(err.find("hidden_size"), std::string::npos) << err;
}

// An empty parameter list has nothing to partition.
TEST(BadModel, NoParameters) {
    std::string err = load_error(temp_file("model_empty_params.json", R"({"parameters": []})"));
    EXPECT_NE(err.find("no parameters"), std::string::npos) << err;
}

// The same parameter name twice is an error on the second one.
TEST(BadModel, DuplicateName) {
    std::string err = load_error(temp_file("model_dup.json", R"({"parameters": [
      {"name": "a.weight", "shape": [4]}, {"name": "a.weight", "shape": [4]}]})"));
    EXPECT_NE(err.find("parameters[1].name"), std::string::npos) << err;
}

// JSON that is neither a parameter list nor a config.json says what it expected.
TEST(BadModel, NeitherKind) {
    std::string err = load_error(temp_file("model_neither.json", R"({"hidden_size": 768})"));
    EXPECT_NE(err.find("\"parameters\""), std::string::npos) << err;
    EXPECT_NE(err.find("\"model_type\""), std::string::npos) << err;
    std::string arr = load_error(temp_file("model_array.json", "[1, 2, 3]"));
    EXPECT_NE(arr.find("expected a JSON object"), std::string::npos) << arr;
}

// A file that does not exist is an error naming it.
TEST(BadModel, MissingFile) {
    std::string path = ::testing::TempDir() + "/no_such_model_file.json";
    std::string err = load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}
