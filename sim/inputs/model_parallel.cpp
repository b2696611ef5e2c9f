// A parameter list's parallel parts: which parameters tensor parallelism splits and how ("tp"), the
// layers a pipeline cuts ("pipeline"), the MoE layers ("moe") and Ulysses' attentions ("attention").
// The shapes stay the whole model's; sim/schedule/rank_model.cpp cuts them per rank.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/json_input.hpp"
#include "inputs/model.hpp"

namespace zerosim {

namespace {

void read_tp_splits(const JsonField& parameters, Model& m) {
    for (size_t i = 0; i < parameters.size() && i < m.params.size(); ++i) {
        auto p = parameters.at(i);
        if (!p.has("tp")) continue;
        auto tp = p.at("tp");
        std::string v = tp.as_string();
        if (v == "column")
            m.params[i].tp = TpSplit::Column;
        else if (v == "row")
            m.params[i].tp = TpSplit::Row;
        else if (v != "none")
            tp.fail_here("expected \"column\" (output features split, Megatron's ColumnParallelLinear), \"row\" (input "
                         "features split, RowParallelLinear) or \"none\", found \"" + v + "\"");
        m.params[i].tp_dim = m.params[i].tp == TpSplit::Row ? 1 : 0;
        // "tp_reduce": false: a row-parallel output reduced later, with another (GPT-NeoX's gpt_j_residual).
        if (p.has("tp_reduce")) m.params[i].tp_reduces_output = p.at("tp_reduce").as_bool();
        if (m.params[i].tp == TpSplit::Row && m.params[i].shape.size() < 2)
            tp.fail_here("a row-parallel split cuts the weight's input features (its second dimension); \"" + m.params[i].name +
                         "\" has " + std::to_string(m.params[i].shape.size()) + " (a row-parallel bias is not split: leave \"tp\" out)");
    }
}

std::vector<int64_t> read_shape(const JsonField& f) {
    f.expect_array();
    std::vector<int64_t> shape;
    for (size_t d = 0; d < f.size(); ++d) shape.push_back(f.at(d).as_integer_in(1, INT32_MAX));
    return shape;
}

bool has_prefix(const std::string& name, const std::string& prefix) {
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}

void read_pipeline(const JsonField& root, Model& m) {
    auto pipe = root.at("pipeline");
    pipe.expect_object();
    auto layers = pipe.at("layers");
    layers.expect_array();
    std::set<std::string> names;
    for (size_t i = 0; i < layers.size(); ++i) {
        auto l = layers.at(i);
        l.expect_object();
        PipeLayer layer{l.at("name").as_string(), read_shape(l.at("output"))};
        if (l.has("type")) layer.type = l.at("type").as_string();
        if (l.has("mask")) layer.mask = read_shape(l.at("mask"));
        if (l.has("tied_weight")) layer.tied_weight = l.at("tied_weight").as_string();
        // A TiedLayerSpec (runtime/pipe/module.py 233-246) runs one module, tied_modules.<key>, wherever
        // the list names it; every other layer appears once.
        const bool tied = layer.name.rfind("tied_modules.", 0) == 0;
        if (!names.insert(layer.name).second && !tied) l.at("name").fail_here("layer \"" + layer.name + "\" is listed twice");
        m.parallel.pipe_layers.push_back(std::move(layer));
    }
    if (m.parallel.pipe_layers.empty()) layers.fail_here("expected at least one layer");
    // Every parameter belongs to exactly one layer, or the partitioner's counts would be wrong.
    for (const auto& p : m.params) {
        std::set<std::string> owners;
        for (const auto& l : m.parallel.pipe_layers)
            if (has_prefix(p.name, l.name)) owners.insert(l.name);
        if (owners.size() != 1)
            layers.fail_here("parameter \"" + p.name + "\" belongs to " + std::to_string(owners.size()) +
                             " layers; each parameter's name must start with exactly one layer's name and a dot");
    }
}

MoeLayer read_moe_layer(const JsonField& f, const Model& m) {
    f.expect_object();
    MoeLayer l;
    l.module = f.at("module").as_string();
    l.experts = f.at("experts").as_string();
    l.num_experts = f.at("num_local_experts").as_integer_in(1, 1 << 20);
    // deepspeed/moe/layer.py MoE.__init__ hands k to TopKGate, which asserts k is 1 or 2 (sharded_moe.py).
    if (f.has("num_experts_per_tok")) l.top_k = f.at("num_experts_per_tok").as_integer_in(1, 2);
    if (l.top_k > l.num_experts) f.at("num_experts_per_tok").fail_here("expected at most num_local_experts experts per token");
    if (f.has("drop_tokens")) l.drop_tokens = f.at("drop_tokens").as_bool();
    if (f.has("capacity_factor")) l.capacity_factor = f.at("capacity_factor").as_number_in(1e-6, 1e6);
    if (f.has("min_capacity")) l.min_capacity = f.at("min_capacity").as_integer_in(0, INT32_MAX);
    l.hidden = f.at("hidden").as_integer_in(1, INT32_MAX);
    for (int64_t e = 0; e < l.num_experts; ++e) {
        std::string prefix = l.experts + "." + std::to_string(e);
        bool found = false;
        for (const auto& p : m.params) found = found || has_prefix(p.name, prefix);
        if (!found) f.at("experts").fail_here("no parameter is named \"" + prefix + ".*\" (expert " + std::to_string(e) + " of " +
                                              std::to_string(l.num_experts) + ")");
    }
    return l;
}

void read_attention(const JsonField& list, Model& m) {
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) {
        auto f = list.at(i);
        f.expect_object();
        AttentionLayer a{f.at("module").as_string(), f.has("name") ? f.at("name").as_string() : "attention",
                         f.at("heads").as_integer_in(1, 1 << 20), f.at("head_size").as_integer_in(1, 1 << 20)};
        bool found = false;
        for (const auto& c : m.calls) found = found || (c.module >= 0 && m.modules[static_cast<size_t>(c.module)].name == a.module);
        if (!found) f.at("module").fail_here("no module "" + a.module + "" holds parameters (the attention runs after it)");
        m.parallel.attention.push_back(std::move(a));
    }
    add_attention_calls(m);
}

}  // namespace

void add_attention_calls(Model& m) {
    for (const auto& a : m.parallel.attention) {
        int after = -1;
        for (size_t i = 0; i < m.calls.size(); ++i)
            if (m.calls[i].module >= 0 && m.modules[static_cast<size_t>(m.calls[i].module)].name == a.module) after = static_cast<int>(i);
        bool present = false;
        for (const auto& c : m.calls) present = present || (c.module < 0 && c.name == a.name);
        if (after < 0 || present) continue;
        for (auto& c : m.calls) {
            auto at = std::find(c.children.begin(), c.children.end(), after);
            if (at == c.children.end()) continue;
            const int idx = static_cast<int>(m.calls.size());
            c.children.insert(at + 1, idx);
            m.calls.push_back(CallNode{a.name, -1, {}, true, true});
            break;
        }
    }
}

void read_parallel_parts(const JsonField& root, const JsonField& parameters, Model& m) {
    read_tp_splits(parameters, m);
    // "tp_collectives_logged": false: the model's tensor-parallel layers call torch.distributed
    // themselves (GPT-NeoX's mpu), so DeepSpeed's comms logger never sees them.
    if (root.has("tp_collectives_logged")) m.tp_collectives_logged = root.at("tp_collectives_logged").as_bool();
    if (root.has("pipeline")) read_pipeline(root, m);
    if (root.has("moe")) {
        auto list = root.at("moe");
        list.expect_array();
        for (size_t i = 0; i < list.size(); ++i) m.parallel.moe.push_back(read_moe_layer(list.at(i), m));
    }
    if (root.has("attention")) read_attention(root.at("attention"), m);
}

void derive_hf_pipeline_layers(Model& m, int64_t seq_len) {
    if (!m.parallel.pipe_layers.empty() || m.attention_heads <= 0 || m.params.empty()) return;
    const auto& embed = m.params.front().shape;   // the token embedding comes first: [vocab, hidden]
    if (embed.size() != 2) return;
    const int64_t vocab = embed[0], hidden = embed[1];
    std::vector<PipeLayer> layers;
    for (const auto& p : m.params) {
        std::string name = transformer_block_of(p.name);
        if (name.empty()) name = p.name.substr(0, p.name.find_last_of('.'));
        if (!layers.empty() && layers.back().name == name) continue;
        const bool head = p.shape.size() == 2 && p.shape[0] == vocab && &p != &m.params.front();
        layers.push_back(PipeLayer{name, {seq_len, head ? vocab : hidden}, name, {}, "weight"});
    }
    m.parallel.pipe_layers = std::move(layers);
}

}  // namespace zerosim
