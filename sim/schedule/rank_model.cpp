// The model as one rank of a 3D layout holds it (ZeRO sees only these parameters): the layers of
// its pipeline stage, its tensor-parallel shard of each split parameter, and its experts.
#include <cmath>
#include <regex>
#include <limits>

#include "build.hpp"

namespace zerosim::detail {

std::vector<int64_t> partition_uniform(int64_t items, int64_t parts) {
    // runtime/utils.py partition_uniform (~560): chunks of items / parts, the first `residual` one longer;
    // with no more items than parts, one item per part and the rest empty.
    std::vector<int64_t> out(static_cast<size_t>(parts) + 1, 0);
    if (items <= parts) {
        for (int64_t p = 0; p <= parts; ++p) out[static_cast<size_t>(p)] = std::min(p, items);
        return out;
    }
    const int64_t chunk = items / parts, residual = items - chunk * parts;
    for (int64_t p = 0; p <= parts; ++p) out[static_cast<size_t>(p)] = p * chunk + std::min(p, residual);
    return out;
}

std::vector<int64_t> partition_balanced(const std::vector<int64_t>& weights, int64_t parts) {
    // runtime/utils.py partition_balanced (~581): the linear partition problem by dynamic programming,
    // minimising (largest part - smallest part); ties go to the later cut (`>=`), as there. Its
    // tables start at infinity (numpy.inf) except dp_max/dp_cost[0][0], and so do these.
    const auto n = static_cast<int64_t>(weights.size());
    if (n <= parts) return partition_uniform(n, parts);
    const double inf = std::numeric_limits<double>::infinity();
    const size_t cols = static_cast<size_t>(parts) + 1;
    auto at = [cols](int64_t i, int64_t j) { return static_cast<size_t>(i) * cols + static_cast<size_t>(j); };
    std::vector<double> dp_max(static_cast<size_t>(n + 1) * cols, inf), dp_min(dp_max), dp_cost(dp_max);
    std::vector<int64_t> position(dp_max.size(), 0);
    std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
    for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + static_cast<double>(weights[static_cast<size_t>(i)]);
    dp_max[at(0, 0)] = 0;
    dp_cost[at(0, 0)] = 0;
    for (int64_t i = 1; i <= n; ++i)
        for (int64_t j = 1; j <= std::min(i, parts); ++j)
            for (int64_t k = 0; k < i; ++k) {
                const double part = prefix[static_cast<size_t>(i)] - prefix[static_cast<size_t>(k)];
                const double max_sum = std::max(dp_max[at(k, j - 1)], part), min_sum = std::min(dp_min[at(k, j - 1)], part);
                const double cost = max_sum - min_sum;
                if (dp_cost[at(i, j)] >= cost) {
                    dp_cost[at(i, j)] = cost;
                    dp_max[at(i, j)] = max_sum;
                    dp_min[at(i, j)] = min_sum;
                    position[at(i, j)] = k;
                }
            }
    std::vector<int64_t> cuts{n};
    for (int64_t j = parts; j >= 1; --j) cuts.push_back(position[at(cuts.back(), j)]);
    return {cuts.rbegin(), cuts.rend()};
}

namespace {

bool starts_with_part(const std::string& name, const std::string& prefix) {
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}

Status split_for_tensor(Model& m, int64_t tp) {
    for (auto& p : m.params) {
        if (p.tp == TpSplit::None) continue;
        // Column: output features (a [out, in] weight's dimension 0, a bias's); row: input features.
        const auto dim = static_cast<size_t>(p.shape.size() < 2 ? 0 : p.tp_dim);
        if (p.shape[dim] % tp != 0)
            return Error{m.source, "parameters." + p.name + ".tp",
                         std::string(p.tp == TpSplit::Column ? "its " : "its input ") + "features (" + std::to_string(p.shape[dim]) +
                             ") do not divide over --tp " + std::to_string(tp) + " (Megatron splits them evenly)"};
        p.shape[dim] /= tp;
        p.numel /= tp;
    }
    return std::nullopt;
}

// The expert a parameter belongs to and the rest of its name, or -1.
int64_t expert_of(const MoeLayer& l, const std::string& name, std::string& rest) {
    if (!starts_with_part(name, l.experts)) return -1;
    std::string tail = name.substr(l.experts.size() + 1);
    size_t dot = tail.find('.');
    // An index of more than 9 digits names no expert a layer has (num_local_experts is at most 2^20).
    if (dot == std::string::npos || dot == 0 || dot > 9 || tail.find_first_not_of("0123456789") != dot) return -1;
    rest = tail.substr(dot);
    return std::stoll(tail.substr(0, dot));
}

}  // namespace

std::vector<int> pipe_layer_params(const Model& m, size_t layer) {
    std::vector<int> out;
    for (size_t p = 0; p < m.params.size(); ++p)
        if (starts_with_part(m.params[p].name, m.parallel.pipe_layers[layer].name)) out.push_back(static_cast<int>(p));
    return out;
}

namespace {

// The stage's layers of a pipeline (kept: their parameters) and which stage the rank is.
std::vector<bool> pipe_keep(const Model& m, const Mesh& mesh, int64_t rank, PipePartition how, const std::string& type,
                            RankModel& out) {
    const int64_t stages = mesh.layout().pipe;
    const auto layers = static_cast<int64_t>(m.parallel.pipe_layers.size());
    std::vector<int64_t> parts;
    if (how == PipePartition::Uniform) {
        parts = partition_uniform(layers, stages);
    } else if (how == PipePartition::Type) {
        // module.py 386-391: weight 1 for each layer whose type name the regex finds, balanced.
        std::vector<int64_t> matches;
        const std::regex re = pipe_type_regex(type);
        for (const auto& l : m.parallel.pipe_layers) matches.push_back(pipe_layer_matches(l, re) ? 1 : 0);
        parts = partition_balanced(matches, stages);
    } else {
        // module.py _count_layer_params: each layer's trainable parameter count, parameterless ones 0.
        std::vector<int64_t> counts;
        for (size_t l = 0; l < m.parallel.pipe_layers.size(); ++l) {
            int64_t n = 0;
            for (int p : pipe_layer_params(m, l)) n += m.params[static_cast<size_t>(p)].numel;
            counts.push_back(n);
        }
        parts = partition_balanced(counts, stages);
    }
    out.stage = mesh.coordinate(MeshAxis::Pipe, rank);
    std::vector<bool> keep(m.params.size(), false);
    for (int64_t l = parts[static_cast<size_t>(out.stage)]; l < parts[static_cast<size_t>(out.stage) + 1]; ++l) {
        out.stage_layers.push_back(l);
        for (int p : pipe_layer_params(m, static_cast<size_t>(l))) keep[static_cast<size_t>(p)] = true;
    }
    return keep;
}

// Drops the experts other ranks hold and renames the rank's from 0 (layer.py MoE builds
// num_experts / ep_size local experts, deepspeed_experts.0 ..).
void keep_local_experts(Model& m, const Mesh& mesh, int64_t rank, std::vector<bool>& keep) {
    const int64_t ep = mesh.layout().expert;
    const auto& group = mesh.group_of(MeshGroup::Expert, rank);
    const int64_t ep_rank = std::find(group.begin(), group.end(), static_cast<int>(rank)) - group.begin();
    for (const auto& l : m.parallel.moe) {
        const int64_t local = l.num_experts / ep;
        for (size_t p = 0; p < m.params.size(); ++p) {
            std::string rest;
            const int64_t e = expert_of(l, m.params[p].name, rest);
            if (e < 0) continue;
            if (e / local != ep_rank) {
                keep[p] = false;
            } else {
                m.params[p].name = l.experts + "." + std::to_string(e % local) + rest;
            }
        }
    }
}

}  // namespace

std::regex pipe_type_regex(const std::string& type) { return std::regex(type, std::regex::ECMAScript | std::regex::icase); }

bool pipe_layer_matches(const PipeLayer& layer, const std::regex& type) {
    // _find_layer_type (298-317): regex.search(name); check_layout compiled the expression first.
    return std::regex_search(layer.type.empty() ? layer.name : layer.type, type);
}

Result<RankModel> rank_model(const Model& whole, const Mesh& mesh, int64_t rank, PipePartition partition,
                             const std::string& partition_type) {
    RankModel out;
    Model m = whole;
    const auto& L = mesh.layout();
    if (L.tensor > 1)
        if (auto e = split_for_tensor(m, L.tensor)) return *e;
    // Megatron gives each tensor rank heads / tp of every attention: its scores and weighted values too.
    for (auto& mod : m.modules) mod.attention_width /= L.tensor;
    std::vector<bool> keep(m.params.size(), true);
    if (L.pipelined()) keep = pipe_keep(m, mesh, rank, partition, partition_type, out);
    if (L.expert > 1) keep_local_experts(m, mesh, rank, keep);
    bool all = std::find(keep.begin(), keep.end(), false) == keep.end();
    if (all) {
        if (L.sequence > 1) add_attention_calls(m);   // DistributedAttention wraps each attention
        out.model = std::move(m);
        return out;
    }
    // Rebuild modules, forward order and the call tree from the kept parameters; every other field
    // (name, source, sequence length, parallel parts, head counts) is the whole model's.
    Model r = m;
    r.params.clear();
    r.modules.clear();
    r.forward_order.clear();
    r.calls.clear();
    for (size_t p = 0; p < m.params.size(); ++p)
        if (keep[p]) r.params.push_back(m.params[p]);
    std::vector<std::string> order;
    for (int mod : m.forward_order) {
        bool held = false;
        for (int p : m.modules[static_cast<size_t>(mod)].params) held = held || keep[static_cast<size_t>(p)];
        if (held) order.push_back(m.modules[static_cast<size_t>(mod)].name);
    }
    // Expert modules were renamed: their forward order follows registration (the local experts in order).
    if (L.expert > 1) order.clear();
    if (r.params.empty()) return Error{whole.source, "parameters", "rank " + std::to_string(rank) + " holds no parameter in this layout"};
    if (auto e = finish_model(r, GroupPolicy::AllInOne, order)) return *e;
    for (auto& mod : r.modules)   // finish_model rebuilt the modules: their attention cores stay the model's
        for (const auto& was : m.modules)
            if (was.name == mod.name) mod.attention_width = was.attention_width;
    if (L.sequence > 1) add_attention_calls(r);
    out.model = std::move(r);
    return out;
}

}  // namespace zerosim::detail
