// The model as ZeRO sees it: parameters in registration order (PyTorch's named_parameters()),
// the modules that own them, the order in which modules run forward, and each parameter's
// optimizer parameter group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

struct Parameter {
    std::string name;             // e.g. blocks.0.attn.qkv.weight
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int group = 0;                // optimizer parameter group, after empty groups are dropped
    int module = -1;              // index into Model::modules of the module that registers it
};

// What a module computes, for FLOP and byte estimates of compute segments.
enum class ModuleKind { Linear, Embedding, Norm, Other };

struct Module {
    std::string name;             // parameter name without its last component ("" = the root)
    std::vector<int> params;      // parameters it uses directly (registration order; tied ones too)
    ModuleKind kind = ModuleKind::Other;
    // Attention core (scores and weighted values) computed just before this module, as the width
    // of all heads together; it costs 4 * seq_len * width FLOPs per token. 0 for other modules.
    int64_t attention_width = 0;
};

struct CallNode {
    std::string name;
    int module = -1;              // Model::modules index when the call uses parameters directly
    std::vector<int> children;    // in call order
    bool grad_out = true;         // its output carries gradient: a pre-backward hook fires
    bool grad_in = true;          // its input carries gradient: a post-backward hook fires (not
                                  // for embeddings and the modules around them, fed token ids)
};

struct Model {
    std::string name;
    std::string source;                 // the file it came from
    std::vector<Parameter> params;      // registration order
    std::vector<Module> modules;        // modules that own or use parameters, first-registration order
    std::vector<int> forward_order;     // module indices in forward execution order (a module may repeat)
    int num_groups = 1;
    // Every module call of one forward pass as a tree (calls[0] is the root model): containers,
    // parameterless modules (dropout, activations, rotary embeddings) and the modules that use
    // parameters, children in call order. nn.ModuleList is iterated, never called, so it is not a
    // node. ZeRO-3's hooks fire on these calls: fetch before a call, release after it, in forward
    // and in backward, and its trace records each pre-forward and pre-backward.
    std::vector<CallNode> calls;
    int64_t default_seq_len = 0;        // from the model config where it says, else 0
    // Hugging Face config.json's "gradient_checkpointing": true (configs saved by older transformers
    // releases carry the key): every layer checkpointed, for analysis/fit.hpp's activations.
    bool gradient_checkpointing = false;

    int64_t total_numel() const;
    int64_t group_numel(int g) const;
};

// The most elements a model may hold, per parameter and in total: 2^56 (7.2e16, some 10^4 times
// the largest models trained). Its bytes (up to 16 per element with Adam's fp32 states beside the
// half-precision copy) and the sums the schedule and the memory estimate make of them then stay
// far inside a signed 64-bit count. Element counts are multiplied and added with overflow checks,
// so a shape whose product wraps around 2^64 is refused, never read as a small number.
inline constexpr int64_t kMaxModelElements = int64_t{1} << 56;

// "2^64" for a power of two, else "1.84e+19" (the message form of an element count that may not
// fit 64 bits, computed in long double).
std::string element_count_text(long double elements);

// The transformer block a parameter belongs to: "model.layers.17.mlp.up_proj.weight" ->
// "model.layers.17", the name up to its first numeric component (the module PyTorch's
// transformer_auto_wrap_policy wraps, the layer activations are counted per); "" when it has none
// (embeddings, the final norm, the head).
std::string transformer_block_of(const std::string& parameter_name);

// How the caller chose parameter groups when the file does not say.
enum class GroupPolicy { AllInOne, DecayNoDecay };

// Reads either a parameter-list JSON ({"parameters": [...]}) or a Hugging Face config.json
// (recognised by "model_type"). Errors name the file and the field.
Result<Model> load_model(const std::string& path);
// The same from the file's text; `path` names it in messages and becomes Model::source (a saved
// schedule's embedded model, formats/schedule_json.hpp).
Result<Model> model_from_json_text(const std::string& path, const std::string& text);

// Builders used by load_model, exposed for tests.
Result<Model> model_from_param_list_json(const std::string& text_or_path_name, const std::string& text);
Result<Model> model_from_hf_config_json(const std::string& file_name, const std::string& text);

// Shared finishing step: modules from names, groups compacted, checks (no parameters, zero sizes).
// A builder that made its own call tree (calls non-empty) keeps it; otherwise the tree is
// derived from parameter names and the forward order.
// `tied`: (module, parameter) pairs where a module also uses a parameter registered elsewhere.
struct TiedUse {
    std::string module;
    std::string parameter;
};
Status finish_model(Model& m, GroupPolicy policy, const std::vector<std::string>& forward_order_names,
                    const std::vector<TiedUse>& tied = {});
// Sets CallNode::grad_in from the tree: embeddings and the calls around them take token ids.
void mark_gradient_inputs(Model& m);

}  // namespace zerosim
