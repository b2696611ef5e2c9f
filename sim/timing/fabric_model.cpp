// Fabric mode's model (timing/fabric.hpp): the topology and its what-ifs as a platform's link
// capacities, and the hook that divides each collective's bandwidth by its traffic's slowdown.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "fabric_impl.hpp"
#include "schedule/mesh.hpp"

namespace zerosim {

namespace {

// "node3.nic2" -> {"node", 3, "nic", 2}: the words and numbers of a target, or nothing.
bool split_target(const std::string& s, std::vector<std::string>& words, std::vector<int64_t>& numbers) {
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, '.')) {
        size_t d = part.find_first_of("0123456789");
        if (d == std::string::npos) {
            words.push_back(part);
            numbers.push_back(-1);
            continue;
        }
        if (d == 0 || part.find_first_not_of("0123456789", d) != std::string::npos || part.size() - d > 9) return false;
        words.push_back(part.substr(0, d));
        numbers.push_back(std::stoll(part.substr(d)));
    }
    return !words.empty();
}

Error what_if_error(const FabricWhatIf& w, const std::string& message) { return Error{w.file, w.field, message}; }

Error out_of_range(const FabricWhatIf& w, const std::string& what, int64_t n, int64_t count) {
    return what_if_error(w, "'" + w.target + "': " + what + " " + std::to_string(n) + " is not in the cluster, which has " +
                                std::to_string(count) + " (" + what + "0 to " + what + std::to_string(count - 1) + ")");
}

constexpr const char* kDegradeTargets = "expected node<N>.nic<J>, node<N>.gpu<G>.nvlink or leaf<L>.uplink";

}  // namespace

Result<FabricWhatIf> parse_fabric_what_if(const std::string& text, const std::string& field) {
    FabricWhatIf w;
    w.field = field;
    size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
        return Error{"", field, "expected TARGET=SHARE (e.g. node3.nic2=0.5), found '" + text + "'"};
    w.target = text.substr(0, eq);
    const std::string v = text.substr(eq + 1);
    char* end = nullptr;
    w.share = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !(w.share > 0) || w.share > 1)
        return Error{"", field, "'" + w.target + "': expected a share of the nominal figure in (0, 1], found '" + v + "'"};
    return w;
}

FlowPattern flow_pattern(OpKind kind, Algorithm a) {
    if (kind == OpKind::AllToAll) return FlowPattern::AllToAll;
    if (a == Algorithm::Tree || a == Algorithm::NVLSTree || a == Algorithm::CollNetDirect || a == Algorithm::CollNetChain)
        return FlowPattern::Tree;
    return FlowPattern::Ring;
}

int64_t FabricModel::Impl::design_nic_of(int rank) const {
    const int64_t g = ideal.gpus_per_node, k = std::max(ideal.nics_per_node, 1);
    return node_of(rank) * k + local_rank(rank, g) * k / g;
}

// A node with fewer NICs than its design: the rails whose NIC is missing leave through NIC
// (rail mod the node's NICs), so its GPUs share the NICs left (NCCL spreads a node's channels over
// the NICs it finds: src/graph/search.cc).
int64_t FabricModel::Impl::nic_of(int rank) const {
    const int64_t k = std::max(ideal.nics_per_node, 1), n = node_of(rank), j = design_nic_of(rank) - n * k;
    const auto on = static_cast<size_t>(n);
    return on < nics_on_node.size() ? n * k + j % nics_on_node[on] : n * k + j;
}

void FabricModel::Impl::apply() const {
    FabricPlatform& p = *platform;
    for (size_t i = 0; i < p.gpu.size(); ++i) {
        p.gpu_out[i]->set_bandwidth(gpu_capacity * gpu_share[i]);
        p.gpu_in[i]->set_bandwidth(gpu_capacity * gpu_share[i]);
    }
    for (size_t i = 0; i < p.nic.size(); ++i) {
        p.nic_out[i]->set_bandwidth(nic_capacity * nic_share[i]);
        p.nic_in[i]->set_bandwidth(nic_capacity * nic_share[i]);
    }
    for (size_t l = 0; l < p.uplinks.size(); ++l)
        for (auto* link : p.uplinks[l]) link->set_bandwidth(uplink_capacity * (1.0 - background_load) * leaf_share[l]);
}

namespace {

// network.placement: the leaf switch of each node, checked against the ports a leaf has.
Status place_nodes_on_leaves(const Topology& t, int64_t nodes, FabricShape& s) {
    if (static_cast<int64_t>(t.leaf_of_node.size()) < nodes)
        return Error{t.source, "network.placement", "a leaf for each of the " + std::to_string(nodes) + " nodes expected, found " +
                                                        std::to_string(t.leaf_of_node.size())};
    s.leaf_of_node.assign(t.leaf_of_node.begin(), t.leaf_of_node.begin() + nodes);
    std::map<int64_t, int64_t> nodes_under;   // counted once (a count per node would be quadratic)
    int64_t most = 0;   // without nodes_per_leaf, a leaf takes as many nodes as the placement puts there
    for (int64_t l : s.leaf_of_node) most = std::max(most, ++nodes_under[l]);
    s.nodes_per_leaf = t.nodes_per_leaf > 0 ? t.nodes_per_leaf : most;
    for (int64_t l : s.leaf_of_node) {
        const int64_t under = nodes_under[l];
        if (under > s.nodes_per_leaf)
            return Error{t.source, "network.placement", std::to_string(under) + " nodes under leaf " + std::to_string(l) +
                                                            " but a leaf switch takes network.nodes_per_leaf = " +
                                                            std::to_string(s.nodes_per_leaf)};
    }
    return std::nullopt;
}

// Mixed node designs (docs/fabric.md): a node with fewer NICs, or slower ones.
Status apply_node_designs(FabricModel::Impl& im, const Topology& t, const FabricShape& s) {
    const int64_t nodes = s.nodes;
    for (const Topology::NodeDesign& d : t.whatif_nodes) {
        const FabricWhatIf w{"node" + std::to_string(d.node), 1.0, t.source, "whatif.nodes." + std::to_string(d.node)};
        if (d.node >= nodes) return out_of_range(w, "node", d.node, nodes);
        if (s.nics_per_node == 0) continue;   // one node: no network
        if (d.nics > 0) im.nics_on_node[static_cast<size_t>(d.node)] = d.nics;
        if (d.nic_bandwidth_gbs > 0)
            for (int64_t j = 0; j < s.nics_per_node; ++j)
                im.nic_share[static_cast<size_t>(d.node * s.nics_per_node + j)] *= d.nic_bandwidth_gbs / t.nic_bandwidth_gbs;
    }
    return std::nullopt;
}

// A link or GPU named by two what-ifs (two --degrade of one NIC, or a flag and the topology's
// whatif section): the shares would multiply without a word, so it is refused naming both.
using WhatIfSeen = std::map<std::pair<int, int64_t>, const FabricWhatIf*>;
Status what_if_once(WhatIfSeen& seen, int kind, int64_t index, const FabricWhatIf& w) {
    auto [it, fresh] = seen.emplace(std::make_pair(kind, index), &w);
    if (fresh) return std::nullopt;
    const FabricWhatIf& first = *it->second;
    return what_if_error(w, "'" + w.target + "': the same target as '" + first.target + "' (" +
                                (first.file.empty() ? first.field : first.file + ": " + first.field) +
                                "); give each one once, with its share (two shares would multiply)");
}

// --degrade: a NIC, a GPU's NVLink or a leaf's uplinks at a share of their nominal bandwidth.
Status apply_degrade_what_ifs(FabricModel::Impl& im, const std::vector<FabricWhatIf>& degrade, const FabricShape& s) {
    const int64_t nodes = s.nodes, g = s.gpus_per_node;
    WhatIfSeen seen;
    for (const FabricWhatIf& w : degrade) {
        std::vector<std::string> words;
        std::vector<int64_t> n;
        if (!split_target(w.target, words, n)) return what_if_error(w, "'" + w.target + "': " + kDegradeTargets);
        if (words.size() == 2 && words[0] == "node" && words[1] == "nic" && n[0] >= 0 && n[1] >= 0) {
            if (n[0] >= nodes) return out_of_range(w, "node", n[0], nodes);
            const int64_t has = s.nics_per_node > 0 ? im.nics_on_node[static_cast<size_t>(n[0])] : 0;
            if (n[1] >= has)
                return what_if_error(w, "'" + w.target + "': node " + std::to_string(n[0]) + " has " + std::to_string(has) +
                                            " NICs on the network (nic0 to nic" + std::to_string(has - 1) + ")");
            if (auto twice = what_if_once(seen, 0, n[0] * s.nics_per_node + n[1], w)) return twice;
            im.nic_share[static_cast<size_t>(n[0] * s.nics_per_node + n[1])] *= w.share;
        } else if (words.size() == 3 && words[0] == "node" && words[1] == "gpu" && words[2] == "nvlink" && n[0] >= 0 && n[1] >= 0) {
            if (n[0] >= nodes) return out_of_range(w, "node", n[0], nodes);
            if (n[1] >= g) return out_of_range(w, "gpu", n[1], g);
            if (auto twice = what_if_once(seen, 1, n[0] * g + n[1], w)) return twice;
            im.gpu_share[static_cast<size_t>(n[0] * g + n[1])] *= w.share;
        } else if (words.size() == 2 && words[0] == "leaf" && words[1] == "uplink" && n[0] >= 0) {
            if (im.leaf_share.empty())
                return what_if_error(w, "'" + w.target + "': the cluster's " + std::to_string(nodes) +
                                            " nodes are under one leaf switch (network.nodes_per_leaf): no uplinks");
            if (n[0] >= static_cast<int64_t>(im.leaf_share.size()))
                return out_of_range(w, "leaf", n[0], static_cast<int64_t>(im.leaf_share.size()));
            if (auto twice = what_if_once(seen, 2, n[0], w)) return twice;
            im.leaf_share[static_cast<size_t>(n[0])] *= w.share;
        } else {
            return what_if_error(w, "'" + w.target + "': " + kDegradeTargets);
        }
    }
    return std::nullopt;
}

// --straggler: the slowest rank's share of its nominal compute speed (1: no straggler).
Result<double> slowest_straggler_share(const std::vector<FabricWhatIf>& straggler, int64_t world) {
    double slowest = 1.0;
    WhatIfSeen seen;
    for (const FabricWhatIf& w : straggler) {
        std::vector<std::string> words;
        std::vector<int64_t> n;
        if (!split_target(w.target, words, n) || words.size() != 1 || words[0] != "rank" || n[0] < 0)
            return what_if_error(w, "'" + w.target + "': expected rank<R> (a GPU's rank, e.g. rank17)");
        if (n[0] >= world) return out_of_range(w, "rank", n[0], world);
        if (auto twice = what_if_once(seen, 3, n[0], w)) return *twice;
        slowest = std::min(slowest, w.share);
    }
    return slowest;
}

}  // namespace

Result<std::shared_ptr<FabricModel>> FabricModel::build(const Topology& t, int64_t world, const FabricOptions& o) {
    auto m = std::shared_ptr<FabricModel>(new FabricModel());
    m->impl_ = std::make_unique<Impl>();
    Impl& im = *m->impl_;
    im.world = world;
    im.ideal = t;
    im.ideal.oversubscription = 1.0;
    im.background_load = t.background_spine_load;
    const int64_t g = std::max<int64_t>(t.gpus_per_node, 1);
    const int64_t nodes = nodes_spanned(t, world);
    FabricShape s;
    s.nodes = nodes;
    s.gpus_per_node = g;
    s.nics_per_node = nodes > 1 ? t.nics_per_node : 0;
    s.nodes_per_leaf = t.nodes_per_leaf > 0 && t.nodes_per_leaf < nodes ? t.nodes_per_leaf : nodes;
    s.rail_optimized = t.fabric == FabricKind::RailOptimized;
    if (!t.leaf_of_node.empty() && nodes > 1)
        if (auto e = place_nodes_on_leaves(t, nodes, s)) return *e;
    // A leaf of P ports at O:1 has P/O uplinks; where that is not whole, the spines' links carry the
    // rest of the figure in their bandwidth.
    const double want = s.nics_per_node > 0 ? static_cast<double>(s.leaf_ports()) / t.oversubscription : 1.0;
    s.spines = std::max<int64_t>(1, static_cast<int64_t>(std::llround(want)));
    const LinkCapacities cap = link_capacities(im.ideal, world);
    im.gpu_capacity = cap.intra > 0 ? cap.intra : 1e9;
    im.nic_capacity = t.nic_bandwidth_gbs > 0 ? t.nic_bandwidth_gbs * t.nic_efficiency * 1e9 : 1e9;
    im.uplink_capacity = im.nic_capacity * want / static_cast<double>(s.spines);
    im.platform = &fabric_platform(s);
    im.gpu_share.assign(im.platform->gpu.size(), 1.0);
    im.nic_share.assign(im.platform->nic.size(), 1.0);
    im.leaf_share.assign(im.platform->uplinks.size(), 1.0);
    im.nics_on_node.assign(static_cast<size_t>(nodes), std::max<int64_t>(s.nics_per_node, 1));
    if (auto e = apply_node_designs(im, t, s)) return *e;
    if (auto e = apply_degrade_what_ifs(im, o.degrade, s)) return *e;
    auto slowest = slowest_straggler_share(o.straggler, world);
    if (!slowest) return slowest.error();
    im.compute_slowdown = 1.0 / slowest.value();
    return m;
}

FabricModel::~FabricModel() = default;

const Topology& FabricModel::ideal_topology() const { return impl_->ideal; }
double FabricModel::compute_slowdown() const { return impl_->compute_slowdown; }
int FabricModel::flow_simulations() const { return impl_->simulations; }
std::vector<std::string> FabricModel::summary() const { return impl_->lines; }

EngineAdjust FabricModel::engine_adjust(const ScheduleMeta& meta) {
    EngineAdjust a;
    a.compute_slowdown = impl_->compute_slowdown;
    std::map<GroupKind, std::vector<std::vector<int>>> groups;
    for (const auto& pg : meta.groups) groups[pg.kind] = pg.members;
    std::vector<int> all(static_cast<size_t>(meta.world));
    for (int64_t r = 0; r < meta.world; ++r) all[static_cast<size_t>(r)] = static_cast<int>(r);
    groups[GroupKind::Dp] = {all};
    // A 3D layout: ZeRO's groups are the mesh's data groups (sequence x data under Ulysses), every one
    // of them at once, strided over the world as DeepSpeed's grid lays them.
    if (meta.layout.is_3d())
        if (auto mesh = Mesh::build(meta.layout))
            groups[GroupKind::Dp] = mesh->groups(meta.layout.sequence > 1 ? MeshGroup::SequenceData : MeshGroup::Data);
    a.collective = [this, groups](const Op& op, CollectivePlan& plan) {
        if (op.kind == OpKind::Barrier || (plan.intra_bytes <= 0 && plan.inter_bytes <= 0)) return;
        const FlowPattern p = flow_pattern(op.kind, plan.reported_pair().algorithm);
        static const char* names[] = {"ring", "tree", "all_to_all"};
        const std::string key = std::string(names[static_cast<int>(p)]) + " traffic on " + group_name(op.group);
        auto it = impl_->cache.find(key);
        if (it == impl_->cache.end()) {
            auto g = groups.find(op.group);
            FabricFactors f = factors(p, g != groups.end() ? g->second : groups.at(GroupKind::Dp));
            it = impl_->cache.emplace(key, f).first;
            char line[200];
            std::snprintf(line, sizeof line, "%s: NVLink x%.3f, network x%.3f", key.c_str(), f.intra, f.inter);
            impl_->lines.push_back(line);
        }
        plan.intra_rate /= it->second.intra;
        plan.inter_rate /= it->second.inter;
    };
    return a;
}

}  // namespace zerosim
