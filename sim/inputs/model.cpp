#include "inputs/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/json_input.hpp"

namespace zerosim {

std::string transformer_block_of(const std::string& name) {
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find('.', start);
        if (end == std::string::npos) end = name.size();
        bool digits = end > start;
        for (size_t i = start; i < end; ++i) digits = digits && name[i] >= '0' && name[i] <= '9';
        if (digits) return name.substr(0, end);
        start = end + 1;
    }
    return "";
}

std::string element_count_text(long double elements) {
    int exp = 0;
    long double mant = std::frexp(elements, &exp);
    if (elements >= 1 && mant == 0.5L) return "2^" + std::to_string(exp - 1);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3Lg", elements);
    return buf;
}

int64_t Model::total_numel() const {
    int64_t n = 0;
    for (const auto& p : params) n += p.numel;
    return n;
}

double Model::token_share(const std::string& name) const {
    for (const auto& r : routed_experts)
        if (name.size() > r.experts.size() && name.compare(0, r.experts.size(), r.experts) == 0 &&
            name[r.experts.size()] == '.')
            return static_cast<double>(r.top_k) / static_cast<double>(r.num_experts);
    return 1.0;
}

int64_t Model::active_numel() const {
    if (routed_experts.empty()) return total_numel();
    // Exact: a layer's experts are alike, so its routed parameters times top_k / num_experts is whole.
    long double n = 0;
    for (const auto& p : params)
        n += static_cast<long double>(p.numel) * (p.module >= 0 ? token_share(modules[static_cast<size_t>(p.module)].name) : 1.0L);
    return static_cast<int64_t>(std::llround(n));
}

int64_t Model::group_numel(int g) const {
    int64_t n = 0;
    for (const auto& p : params)
        if (p.group == g) n += p.numel;
    return n;
}

namespace {

std::string module_of(const std::string& param_name) {
    auto dot = param_name.rfind('.');
    return dot == std::string::npos ? std::string() : param_name.substr(0, dot);
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The call tree of a parameter list: the prefix tree of module names, children in the order
// the forward order first reaches them. Prefixes whose children are all numbered are
// nn.ModuleList containers and are skipped (never called).
// `parameterless`: calls of modules without parameters (a parameter list's "parameterless"), each
// with the forward_order position it runs before (forward_order.size(): after the last).
void build_calls_from_names(Model& m, const std::vector<std::pair<std::string, size_t>>& parameterless = {}) {
    std::map<std::string, std::set<std::string>> children;
    std::vector<std::string> names;
    for (const auto& mod : m.modules) names.push_back(mod.name);
    for (const auto& pl : parameterless) names.push_back(pl.first);
    for (const auto& name : names) {
        std::string parent, prefix, part;
        std::stringstream ss(name);
        while (std::getline(ss, part, '.')) {
            prefix = prefix.empty() ? part : prefix + "." + part;
            children[parent].insert(part);
            parent = prefix;
        }
    }
    auto is_module_list = [&](const std::string& prefix) {
        auto it = children.find(prefix);
        return it != children.end() && std::all_of(it->second.begin(), it->second.end(), all_digits);
    };
    m.calls.clear();
    m.calls.push_back(CallNode{"", -1, {}, true, true});
    std::map<std::string, int> node_of;
    node_of[""] = 0;
    for (size_t i = 0; i < m.modules.size(); ++i)
        if (m.modules[i].name.empty()) m.calls[0].module = static_cast<int>(i);
    // The calls in forward order: the modules of forward_order, parameterless ones between them.
    std::vector<std::pair<std::string, int>> order;
    for (size_t pos = 0; pos <= m.forward_order.size(); ++pos) {
        for (const auto& pl : parameterless)
            if (pl.second == pos) order.emplace_back(pl.first, -1);
        if (pos < m.forward_order.size()) order.emplace_back(m.modules[m.forward_order[pos]].name, m.forward_order[pos]);
    }
    for (const auto& [name, mi] : order) {
        if (name.empty()) continue;
        int cur = 0;
        std::string prefix, part;
        std::stringstream ss(name);
        while (std::getline(ss, part, '.')) {
            prefix = prefix.empty() ? part : prefix + "." + part;
            if (prefix != name && is_module_list(prefix)) continue;
            auto it = node_of.find(prefix);
            if (it == node_of.end()) {
                int idx = static_cast<int>(m.calls.size());
                m.calls.push_back(CallNode{prefix, -1, {}, true, true});
                m.calls[cur].children.push_back(idx);
                it = node_of.emplace(prefix, idx).first;
            }
            cur = it->second;
        }
        if (mi >= 0) m.calls[cur].module = mi;
    }
}

}  // namespace

// Modules fed token ids (embeddings, and the containers around them, root included) get no
// post-backward hook: nothing upstream of them needs a gradient.
void mark_gradient_inputs(Model& m) {
    std::function<bool(int)> holds_embedding = [&](int n) {
        auto& node = m.calls[n];
        bool emb = node.module >= 0 && m.modules[node.module].kind == ModuleKind::Embedding;
        for (int c : node.children) emb = holds_embedding(c) || emb;
        if (emb) node.grad_in = false;
        return emb;
    };
    if (!m.calls.empty()) holds_embedding(0);
}

namespace {

ModuleKind guess_kind(const Model& m, const Module& mod) {
    std::string last = mod.name.substr(mod.name.rfind('.') == std::string::npos ? 0 : mod.name.rfind('.') + 1);
    static const char* embed_names[] = {"wte", "wpe", "embed", "emb", "embedding", "embeddings", "embed_in",
                                        "embed_tokens", "word_embeddings", "position_embeddings"};
    for (const char* e : embed_names)
        if (last == e) return ModuleKind::Embedding;
    bool has_matrix = false;
    for (int p : mod.params)
        if (m.params[p].shape.size() >= 2) has_matrix = true;
    if (has_matrix) return ModuleKind::Linear;
    if (last.find("norm") != std::string::npos || last.rfind("ln", 0) == 0) return ModuleKind::Norm;
    return ModuleKind::Other;
}

using ModuleIndex = std::unordered_map<std::string, int>;

// Parameter `p`'s element count, within what zerosim takes for one parameter and, added to
// `total`, for the model.
Status count_parameter_elements(const Model& m, Parameter& p, const std::string& field, int64_t& total) {
    p.numel = 1;
    long double elements = 1;  // exact for the powers of two the message names
    bool wrapped = false;
    for (auto d : p.shape) {
        if (d <= 0)
            return Error{m.source, field + ".shape",
                         "dimensions must be positive, found " + std::to_string(d) + " in '" + p.name + "'"};
        elements *= static_cast<long double>(d);
        wrapped = __builtin_mul_overflow(p.numel, d, &p.numel) || wrapped;
    }
    if (wrapped || p.numel > kMaxModelElements)
        return Error{m.source, field + ".shape",
                     element_count_text(elements) + " elements in '" + p.name + "' exceed " +
                         element_count_text(kMaxModelElements) + ", the most zerosim takes for a model"};
    int64_t before = total;
    if (__builtin_add_overflow(before, p.numel, &total) || total > kMaxModelElements)
        return Error{m.source, field + ".shape",
                     "the parameters up to '" + p.name + "' hold " +
                         element_count_text(static_cast<long double>(before) + p.numel) +
                         " elements, more than " + element_count_text(kMaxModelElements) +
                         ", the most zerosim takes for a model"};
    return std::nullopt;
}

// Every parameter checked (named once, shaped), given its optimizer group, and placed in the
// module its name says (a module created for it where there is none yet).
Status register_parameters(Model& m, GroupPolicy policy, ModuleIndex& module_index) {
    std::set<std::string> seen;
    int64_t total = 0;
    for (size_t i = 0; i < m.params.size(); ++i) {
        auto& p = m.params[i];
        std::string field = "parameters[" + std::to_string(i) + "]";
        if (p.name.empty()) return Error{m.source, field + ".name", "expected a non-empty parameter name"};
        if (!seen.insert(p.name).second)
            return Error{m.source, field + ".name", "parameter '" + p.name + "' appears twice"};
        if (p.shape.empty()) return Error{m.source, field + ".shape", "expected at least one dimension"};
        if (auto failed = count_parameter_elements(m, p, field, total)) return failed;
        if (policy == GroupPolicy::DecayNoDecay && p.group < 0) p.group = p.shape.size() == 1 ? 1 : 0;
        if (p.group < 0) p.group = 0;
        std::string mod = module_of(p.name);
        auto it = module_index.find(mod);
        if (it == module_index.end()) {
            it = module_index.emplace(mod, static_cast<int>(m.modules.size())).first;
            m.modules.push_back(Module{mod, {}, ModuleKind::Other, 0});
        }
        p.module = it->second;
        m.modules[it->second].params.push_back(static_cast<int>(i));
    }
    return std::nullopt;
}

// Tied parameters: another module also uses a parameter registered elsewhere (an LM head
// sharing the token embedding). named_parameters() lists it once; ZeRO-3 fetches it for every
// module that uses it.
Status attach_tied_uses(Model& m, const std::vector<TiedUse>& tied, ModuleIndex& module_index) {
    for (size_t i = 0; i < tied.size(); ++i) {
        std::string field = "tied[" + std::to_string(i) + "]";
        auto pit = std::find_if(m.params.begin(), m.params.end(),
                                [&](const Parameter& p) { return p.name == tied[i].parameter; });
        if (pit == m.params.end())
            return Error{m.source, field + ".parameter", "no parameter named '" + tied[i].parameter + "'"};
        auto it = module_index.find(tied[i].module);
        if (it == module_index.end()) {
            it = module_index.emplace(tied[i].module, static_cast<int>(m.modules.size())).first;
            m.modules.push_back(Module{tied[i].module, {}, ModuleKind::Linear, 0});
        }
        m.modules[it->second].params.push_back(static_cast<int>(pit - m.params.begin()));
    }
    return std::nullopt;
}

// Empty optimizer groups are dropped (DeepSpeed removes param groups with no params); the
// remaining ids keep their order.
void compact_group_ids(Model& m) {
    std::set<int> ids;
    for (const auto& p : m.params) ids.insert(p.group);
    std::map<int, int> compact;
    for (int id : ids) compact[id] = static_cast<int>(compact.size());
    for (auto& p : m.params) p.group = compact[p.group];
    m.num_groups = static_cast<int>(compact.size());
}

// The forward order from the names given (else the modules in registration order), every
// module in it.
Status resolve_forward_order(Model& m, const std::vector<std::string>& forward_order_names, const ModuleIndex& module_index) {
    if (!forward_order_names.empty()) {
        m.forward_order.clear();
        for (size_t i = 0; i < forward_order_names.size(); ++i) {
            auto it = module_index.find(forward_order_names[i]);
            if (it == module_index.end())
                return Error{m.source, "forward_order[" + std::to_string(i) + "]",
                             "'" + forward_order_names[i] + "' is not a module that owns parameters"};
            m.forward_order.push_back(it->second);
        }
    }
    if (m.forward_order.empty())
        for (size_t i = 0; i < m.modules.size(); ++i) m.forward_order.push_back(static_cast<int>(i));
    // Every module with parameters must run, or its gradients would never be produced.
    std::vector<bool> runs(m.modules.size(), false);
    for (int i : m.forward_order) runs[i] = true;
    for (size_t i = 0; i < m.modules.size(); ++i) {
        if (runs[i]) continue;
        bool owns = std::any_of(m.params.begin(), m.params.end(), [&](const Parameter& p) { return p.module == static_cast<int>(i); });
        return Error{m.source, "forward_order",
                     "module '" + m.modules[i].name + (owns ? "' owns parameters" : "' uses a tied parameter") +
                         " but never runs" + (forward_order_names.empty() ? "" : "; forward_order must list it")};
    }
    return std::nullopt;
}

}  // namespace

Status finish_model(Model& m, GroupPolicy policy, const std::vector<std::string>& forward_order_names,
                    const std::vector<TiedUse>& tied) {
    if (m.params.empty()) return Error{m.source, "parameters", "the model has no parameters"};
    ModuleIndex module_index;
    for (const auto& mod : m.modules) module_index[mod.name] = static_cast<int>(&mod - m.modules.data());
    if (auto failed = register_parameters(m, policy, module_index)) return failed;
    if (auto failed = attach_tied_uses(m, tied, module_index)) return failed;
    compact_group_ids(m);
    if (auto failed = resolve_forward_order(m, forward_order_names, module_index)) return failed;
    for (auto& mod : m.modules)
        if (mod.kind == ModuleKind::Other) mod.kind = guess_kind(m, mod);
    if (m.calls.empty()) {
        build_calls_from_names(m);
        mark_gradient_inputs(m);
    }
    return std::nullopt;
}

namespace {

// A list of module names ("parameterless", "checkpointed"): strings, none twice.
std::set<std::string> read_name_list(const JsonField& root, const char* key) {
    std::set<std::string> names;
    if (!root.has(key)) return names;
    auto list = root.at(key);
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) {
        auto f = list.at(i);
        std::string name = f.as_string();
        if (name.empty()) f.fail_here("expected a module name, found \"\"");
        if (!names.insert(name).second) f.fail_here("'" + name + "' is listed twice");
    }
    return names;
}

// "parameterless": modules that own no parameters but are called (nn.GELU, nn.Dropout): ZeRO-3's
// hooks fire on them and its trace records them. Each must be where forward_order says it runs.
void check_parameterless(const Model& m, const JsonField& root, const std::vector<std::pair<std::string, size_t>>& placed) {
    auto list = root.at("parameterless");
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string name = list.at(i).as_string();
        for (const auto& mod : m.modules)
            if (mod.name == name || mod.name.rfind(name + ".", 0) == 0)
                list.at(i).fail_here("'" + name + "' holds parameters (module '" + mod.name +
                                     "'); list only modules without any");
        bool in_order = std::any_of(placed.begin(), placed.end(), [&](const auto& p) { return p.first == name; });
        if (!in_order)
            list.at(i).fail_here("'" + name + "' is not in forward_order; list it there where it runs");
    }
}

// "checkpointed": module calls wrapped in torch.utils.checkpoint.checkpoint (or, with the DeepSpeed
// config's activation_checkpointing section, deepspeed.checkpointing.checkpoint): each a call of
// the model's call tree.
std::vector<std::string> read_checkpointed(const Model& m, const JsonField& root) {
    std::vector<std::string> out;
    if (!root.has("checkpointed")) return out;
    read_name_list(root, "checkpointed");
    auto list = root.at("checkpointed");
    for (size_t i = 0; i < list.size(); ++i) {
        std::string name = list.at(i).as_string();
        bool called = std::any_of(m.calls.begin() + 1, m.calls.end(), [&](const CallNode& c) { return c.name == name; });
        if (!called)
            list.at(i).fail_here("'" + name + "' is not a module call of the model (a module owning parameters, a "
                                 "container of such modules, or one listed in \"parameterless\")");
        out.push_back(std::move(name));
    }
    return out;
}

}  // namespace

Result<Model> model_from_param_list_json(const std::string& file, const std::string& text) {
    auto doc = parse_json_text(text, file);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), file, "");
        root.expect_object();
        Model m;
        m.source = file;
        m.name = root.has("name") ? root.at("name").as_string() : file;
        GroupPolicy policy = GroupPolicy::AllInOne;
        if (root.has("param_groups")) {
            auto pg = root.at("param_groups");
            std::string v = pg.as_string();
            if (v == "decay_no_decay")
                policy = GroupPolicy::DecayNoDecay;
            else if (v != "single")
                pg.fail_here("expected \"decay_no_decay\" or \"single\", found \"" + v + "\"");
        }
        auto params = root.at("parameters");
        params.expect_array();
        for (size_t i = 0; i < params.size(); ++i) {
            auto p = params.at(i);
            p.expect_object();
            Parameter par;
            par.name = p.at("name").as_string();
            auto shape = p.at("shape");
            shape.expect_array();
            for (size_t d = 0; d < shape.size(); ++d) par.shape.push_back(shape.at(d).as_integer());
            par.group = -1;
            if (p.has("group")) {
                auto g = p.at("group");
                int64_t gv = g.as_integer();
                if (gv < 0 || gv > 1000) g.fail_here("expected a group index from 0 to 1000, found " + std::to_string(gv));
                par.group = static_cast<int>(gv);
            }
            m.params.push_back(std::move(par));
        }
        const std::set<std::string> parameterless = read_name_list(root, "parameterless");
        std::vector<std::string> order;
        std::vector<std::pair<std::string, size_t>> parameterless_at;   // name, forward_order position it precedes
        if (root.has("forward_order")) {
            auto fo = root.at("forward_order");
            fo.expect_array();
            for (size_t i = 0; i < fo.size(); ++i) {
                std::string name = fo.at(i).as_string();
                if (parameterless.count(name))
                    parameterless_at.emplace_back(name, order.size());
                else
                    order.push_back(std::move(name));
            }
        }
        // A sequence length above 2^31 - 1 is no model's; bounding it keeps token counts in 64 bits.
        if (root.has("seq_len")) m.default_seq_len = root.at("seq_len").as_integer_in(1, INT32_MAX);
        std::vector<TiedUse> tied_uses;
        if (root.has("tied")) {
            auto tied = root.at("tied");
            tied.expect_array();
            for (size_t i = 0; i < tied.size(); ++i) {
                auto t = tied.at(i);
                tied_uses.push_back({t.at("module").as_string(), t.at("parameter").as_string()});
            }
        }
        if (auto err = finish_model(m, policy, order, tied_uses)) return *err;
        if (!parameterless.empty()) {
            check_parameterless(m, root, parameterless_at);
            build_calls_from_names(m, parameterless_at);
            mark_gradient_inputs(m);
        }
        m.checkpointed = read_checkpointed(m, root);
        // After finish_model: its checks name the parameters first; the parallel parts refer to them.
        read_parallel_parts(root, root.at("parameters"), m);
        return m;
    } catch (const InputFailure& f) {
        return f.error;
    }
}

Result<Model> load_model(const std::string& path) {
    auto read = read_text_file(path, "model file");
    if (!read) return read.error();
    return model_from_json_text(path, read.value());
}

Result<Model> model_from_json_text(const std::string& path, const std::string& text) {
    auto doc = parse_json_text(text, path);
    if (!doc) return doc.error();
    if (!doc->is_object())
        return Error{path, "", "expected a JSON object (a parameter list or a Hugging Face config.json), found " +
                                   json_type_name(doc.value())};
    if (doc->contains("model_type")) return model_from_hf_config_json(path, text);
    if (doc->contains("parameters")) return model_from_param_list_json(path, text);
    return Error{path, "", "not a model description: expected \"parameters\" (a parameter list) or \"model_type\" (a Hugging Face config.json)"};
}

}  // namespace zerosim
