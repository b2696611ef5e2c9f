// The mesh: every process group of a parallel layout, as DeepSpeed v0.14.2 forms them, and where
// their members live on the nodes (schedule/mesh.hpp).
#include "schedule/mesh.hpp"

#include <algorithm>
#include <string>

namespace zerosim {

// Helpers in a named namespace: the library is a unity build, and stage3_variants.cpp has its own
// consecutive() / strided().
namespace mesh_impl {
namespace {

// The mesh lists every group of every kind (two ints per rank and kind): a bound that keeps a
// mistyped world an error rather than an allocation failure.
constexpr int64_t kMaxMeshWorld = int64_t{1} << 20;

std::string str(int64_t v) { return std::to_string(v); }

Error layout_error(const std::string& field, const std::string& message) {
    return Error{"", "parallel_layout." + field, message};
}

size_t kind_index(MeshGroup g) { return static_cast<size_t>(g); }

Status check_sizes(const ParallelLayout& l) {
    if (l.world < 1) return layout_error("world", "expected at least 1 rank, found " + str(l.world));
    if (l.world > kMaxMeshWorld)
        return layout_error("world", "expected at most " + str(kMaxMeshWorld) + " ranks, found " + str(l.world));
    const std::pair<const char*, int64_t> axes[] = {{"pipe", l.pipe}, {"tensor", l.tensor}, {"sequence", l.sequence},
                                                    {"expert", l.expert}};
    for (const auto& [name, v] : axes)
        if (v < 1) return layout_error(name, "expected at least 1, found " + str(v));
    const std::pair<const char*, int64_t> subs[] = {{"hpz", l.hpz}, {"mics_shard", l.mics_shard},
                                                    {"qgz_ranks_per_node", l.qgz_ranks_per_node}, {"fsdp_shard", l.fsdp_shard}};
    for (const auto& [name, v] : subs)
        if (v < 0) return layout_error(name, "expected 0 (off) or more, found " + str(v));
    for (MeshAxis a : {MeshAxis::Pipe, MeshAxis::Data, MeshAxis::Sequence, MeshAxis::Tensor})
        if (std::count(l.order.begin(), l.order.end(), a) != 1)
            return layout_error("order", "expected each of pipe, data, sequence and tensor exactly once");
    // topology.py PipelineParallelGrid._is_grid_valid: the axes' product is the world. Each factor is
    // checked against what is left of the world, so the product never overflows.
    int64_t left = l.world;
    for (const auto& [name, v] : {axes[0], axes[2], axes[1]}) {
        if (left % v != 0)
            return layout_error(name, "pipe (" + str(l.pipe) + ") x sequence (" + str(l.sequence) + ") x tensor (" +
                                          str(l.tensor) + ") must divide the world (" + str(l.world) + ")");
        left /= v;
    }
    return std::nullopt;
}

Status check_expert(const ParallelLayout& l) {
    // groups.py _get_expert_parallel_ranks: _ensure_divisibility(dp_world_size, expert_parallel_size_).
    if (l.data() % l.expert != 0)
        return layout_error("expert", "DeepSpeed needs the expert-parallel size (" + str(l.expert) +
                                          ") to divide the data-parallel size (" + str(l.data()) + ") (groups.py)");
    // groups.py builds expert groups from data groups without the sequence axis in them (mpu's
    // data-parallel size, its rank lists by tensor stride); with Ulysses ranks would be left out.
    if (l.expert > 1 && l.sequence > 1)
        return layout_error("expert", "expert parallelism (" + str(l.expert) + ") with sequence parallelism (" +
                                          str(l.sequence) + ") is not modelled: DeepSpeed v0.14.2's expert groups "
                                                            "(groups.py _get_expert_parallel_ranks) leave sequence ranks out");
    return std::nullopt;
}

Status check_sub_groups(const ParallelLayout& l) {
    const int64_t W = l.world;
    // groups.py _create_zero_param_parallel_group: min(k, world) must divide the world.
    if (l.hpz > 1 && W % std::min(l.hpz, W) != 0)
        return layout_error("hpz", "DeepSpeed needs zero_hpz_partition_size (" + str(l.hpz) + ") to divide the world (" +
                                       str(W) + ") (groups.py)");
    // mics_utils.py _generate_mics_config: the world reshaped into rows of s ranks.
    if (l.mics_shard > 0 && (l.mics_shard > W || W % l.mics_shard != 0))
        return layout_error("mics_shard", "DeepSpeed needs the world (" + str(W) + ") to be a multiple of mics_shard_size (" +
                                              str(l.mics_shard) + ") (mics_utils.py)");
    // groups.py _get_local_all_to_all_group: one node must be exactly the world; more must fill whole nodes.
    const int64_t L = l.qgz_ranks_per_node;
    if (L > 0 && W > 1) {
        const int64_t nodes = W / L;
        if ((nodes == 1 && W != L) || (nodes > 1 && W % L != 0))
            return layout_error("qgz_ranks_per_node", "DeepSpeed's all-to-all groups need the world (" + str(W) +
                                                          ") to be a whole number of nodes of " + str(L) + " ranks");
    }
    // FSDP's HYBRID_SHARD (torch/distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups): whole nodes.
    if (l.fsdp_shard > 0 && W % l.fsdp_shard != 0 && W > l.fsdp_shard)
        return layout_error("fsdp_shard", "hybrid shard needs whole nodes: the world (" + str(W) +
                                              ") is not a multiple of the ranks per node (" + str(l.fsdp_shard) + ")");
    return std::nullopt;
}

// The strides of the row-major grid: an axis' stride is the product of the sizes after it.
std::array<int64_t, 4> strides(const ParallelLayout& l) {
    std::array<int64_t, 4> s{};
    int64_t after = 1;
    for (size_t i = l.order.size(); i-- > 0;) {
        s[i] = after;
        after *= l.axis_size(l.order[i]);
    }
    return s;
}

// The groups whose members share every coordinate but those of `vary` (topology.py
// get_axis_comm_lists for one axis): the fixed coordinates in row-major order (the last axis
// fastest), each group's members with the varying coordinates in row-major order, so ascending.
std::vector<std::vector<int>> axis_groups(const ParallelLayout& l, const std::vector<MeshAxis>& vary) {
    const auto st = strides(l);
    std::vector<size_t> fixed, varying;
    for (size_t i = 0; i < l.order.size(); ++i)
        (std::find(vary.begin(), vary.end(), l.order[i]) != vary.end() ? varying : fixed).push_back(i);
    // Every offset reachable through a set of axes, row-major (first listed slowest).
    auto offsets = [&](const std::vector<size_t>& axes) {
        std::vector<int64_t> out{0};
        for (size_t i : axes) {
            std::vector<int64_t> next;
            for (int64_t base : out)
                for (int64_t c = 0; c < l.axis_size(l.order[i]); ++c) next.push_back(base + c * st[i]);
            out = std::move(next);
        }
        return out;
    };
    const auto inside = offsets(varying);
    std::vector<std::vector<int>> groups;
    for (int64_t base : offsets(fixed)) {
        std::vector<int> g;
        for (int64_t o : inside) g.push_back(static_cast<int>(base + o));
        groups.push_back(std::move(g));
    }
    return groups;
}

// [0..k-1], [k..2k-1], ... (groups.py _create_zero_param_parallel_group and local_i, mics_utils.py's
// shard groups, FSDP's intra-node groups).
std::vector<std::vector<int>> consecutive(int64_t world, int64_t k) {
    std::vector<std::vector<int>> out;
    for (int64_t start = 0; start < world; start += k) {
        std::vector<int> m;
        for (int64_t r = start; r < start + k; ++r) m.push_back(static_cast<int>(r));
        out.push_back(std::move(m));
    }
    return out;
}

// {i, i+k, i+2k, ...} for i in [0, k) (groups.py global_i, mics_utils.py's replicate groups with
// pp_size 1, FSDP's inter-node groups).
std::vector<std::vector<int>> strided(int64_t world, int64_t k) {
    std::vector<std::vector<int>> out;
    for (int64_t i = 0; i < k; ++i) {
        std::vector<int> m;
        for (int64_t r = i; r < world; r += k) m.push_back(static_cast<int>(r));
        out.push_back(std::move(m));
    }
    return out;
}

}  // namespace
}  // namespace mesh_impl

const char* mesh_group_name(MeshGroup g) {
    switch (g) {
        case MeshGroup::Pipe: return "pipe";
        case MeshGroup::Data: return "data";
        case MeshGroup::Tensor: return "tensor";
        case MeshGroup::ModelParallel: return "model_parallel";
        case MeshGroup::Sequence: return "sequence";
        case MeshGroup::SequenceData: return "sequence_data";
        case MeshGroup::Expert: return "expert";
        case MeshGroup::ExpertData: return "expert_data";
        case MeshGroup::Hpz: return "hpz";
        case MeshGroup::QgzIntra: return "qgz_intra";
        case MeshGroup::QgzInter: return "qgz_inter";
        case MeshGroup::MicsShard: return "mics_shard";
        case MeshGroup::MicsReplica: return "mics_replica";
        case MeshGroup::FsdpShard: return "fsdp_shard";
        case MeshGroup::FsdpReplica: return "fsdp_replica";
    }
    return "?";
}

int64_t ParallelLayout::data() const {
    const int64_t others = pipe * sequence * tensor;
    return others > 0 ? world / others : 0;
}
int64_t ParallelLayout::expert_data() const { return expert > 0 ? data() / expert : 0; }
int64_t ParallelLayout::sequence_data() const { return sequence * data(); }

int64_t ParallelLayout::axis_size(MeshAxis a) const {
    switch (a) {
        case MeshAxis::Pipe: return pipe;
        case MeshAxis::Data: return data();
        case MeshAxis::Sequence: return sequence;
        case MeshAxis::Tensor: return tensor;
    }
    return 1;
}

Status check_parallel_layout(const ParallelLayout& l) {
    if (auto e = mesh_impl::check_sizes(l)) return e;
    if (auto e = mesh_impl::check_expert(l)) return e;
    return mesh_impl::check_sub_groups(l);
}

int64_t node_count(int64_t ranks, int64_t gpus_per_node) {
    const int64_t n = std::max<int64_t>(ranks, 1);
    const int64_t per_node = std::min(std::max<int64_t>(gpus_per_node, 1), n);
    return (n + per_node - 1) / per_node;
}

int64_t node_of(int64_t rank, int64_t gpus_per_node) { return rank / std::max<int64_t>(gpus_per_node, 1); }

int64_t local_rank(int64_t rank, int64_t gpus_per_node) { return rank % std::max<int64_t>(gpus_per_node, 1); }

double GroupPlacement::nic_share() const {
    return static_cast<double>(std::max<int64_t>(first_node_members, 1)) / static_cast<double>(gpus_per_node);
}

GroupPlacement place_members(const std::vector<int>& members, int64_t gpus_per_node) {
    GroupPlacement p;
    p.gpus_per_node = std::max<int64_t>(gpus_per_node, 1);
    for (int r : members) {
        const int64_t n = node_of(r, p.gpus_per_node);
        const auto at = std::lower_bound(p.nodes.begin(), p.nodes.end(), n);
        const auto i = at - p.nodes.begin();
        if (at == p.nodes.end() || *at != n) {
            p.nodes.insert(at, n);
            p.members_on_node.insert(p.members_on_node.begin() + i, 0);
        }
        ++p.members_on_node[static_cast<size_t>(i)];
    }
    if (!members.empty()) {
        const int64_t first = node_of(members[0], p.gpus_per_node);
        p.first_node_members = static_cast<int64_t>(
            std::count_if(members.begin(), members.end(), [&](int r) { return node_of(r, p.gpus_per_node) == first; }));
    }
    return p;
}

Result<Mesh> Mesh::build(const ParallelLayout& layout) {
    if (auto e = check_parallel_layout(layout)) return *e;
    Mesh m;
    m.layout_ = layout;
    const ParallelLayout& l = m.layout_;
    const int64_t W = l.world;
    auto set = [&](MeshGroup g, std::vector<std::vector<int>> groups) { m.groups_[mesh_impl::kind_index(g)] = std::move(groups); };
    set(MeshGroup::Pipe, mesh_impl::axis_groups(l, {MeshAxis::Pipe}));
    set(MeshGroup::Data, mesh_impl::axis_groups(l, {MeshAxis::Data}));
    set(MeshGroup::Tensor, mesh_impl::axis_groups(l, {MeshAxis::Tensor}));
    // topology.py 302-311: ds_model_proc_group, the ranks of one data index (pipe x model). Under
    // Ulysses (pipe = tensor = 1) that is the sequence group, as parallel_state_sp.py aliases it.
    set(MeshGroup::ModelParallel, mesh_impl::axis_groups(l, {MeshAxis::Pipe, MeshAxis::Sequence, MeshAxis::Tensor}));
    set(MeshGroup::Sequence, mesh_impl::axis_groups(l, {MeshAxis::Sequence}));
    set(MeshGroup::SequenceData, mesh_impl::axis_groups(l, {MeshAxis::Data, MeshAxis::Sequence}));
    // groups.py _get_expert_parallel_ranks (E + D): each data group cut in slices of ep ranks (the
    // expert groups); the i-th member of every slice forms an expert-data group (zip(*slices)).
    std::vector<std::vector<int>> expert, expert_data;
    for (const auto& dp : m.groups_[mesh_impl::kind_index(MeshGroup::Data)]) {
        for (size_t i = 0; i < dp.size(); i += static_cast<size_t>(l.expert))
            expert.emplace_back(dp.begin() + static_cast<std::ptrdiff_t>(i), dp.begin() + static_cast<std::ptrdiff_t>(i + l.expert));
        for (int64_t j = 0; j < l.expert; ++j) {
            std::vector<int> g;
            for (size_t i = static_cast<size_t>(j); i < dp.size(); i += static_cast<size_t>(l.expert)) g.push_back(dp[i]);
            expert_data.push_back(std::move(g));
        }
    }
    set(MeshGroup::Expert, std::move(expert));
    set(MeshGroup::ExpertData, std::move(expert_data));
    const int64_t k = std::min(l.hpz, W);
    if (k > 1) set(MeshGroup::Hpz, mesh_impl::consecutive(W, k));
    if (l.mics_shard > 0) {
        set(MeshGroup::MicsShard, mesh_impl::consecutive(W, l.mics_shard));
        // mics_utils.py create_mics_comm_groups: one shard group replicates as one-rank groups.
        set(MeshGroup::MicsReplica, mesh_impl::strided(W, l.mics_shard));
    }
    // stage3.py __avg_scatter_grads: the quantized path (and its groups) only with more than one node.
    if (l.qgz_ranks_per_node > 0 && W / l.qgz_ranks_per_node > 1) {
        set(MeshGroup::QgzIntra, mesh_impl::consecutive(W, l.qgz_ranks_per_node));
        set(MeshGroup::QgzInter, mesh_impl::strided(W, l.qgz_ranks_per_node));
    }
    if (l.fsdp_shard > 0) {
        const int64_t s = std::min(l.fsdp_shard, W);
        set(MeshGroup::FsdpShard, mesh_impl::consecutive(W, s));
        set(MeshGroup::FsdpReplica, mesh_impl::strided(W, s));
    }
    m.index_groups();
    return m;
}

void Mesh::index_groups() {
    for (size_t g = 0; g < groups_.size(); ++g) {
        if (groups_[g].empty()) continue;
        index_[g].assign(static_cast<size_t>(layout_.world), -1);
        for (size_t i = 0; i < groups_[g].size(); ++i)
            for (int r : groups_[g][i]) index_[g][static_cast<size_t>(r)] = static_cast<int>(i);
    }
}

const std::vector<std::vector<int>>& Mesh::groups(MeshGroup kind) const { return groups_[mesh_impl::kind_index(kind)]; }

const std::vector<int>& Mesh::group_of(MeshGroup kind, int64_t rank) const {
    static const std::vector<int> none;
    const auto& index = index_[mesh_impl::kind_index(kind)];
    if (rank < 0 || rank >= static_cast<int64_t>(index.size())) return none;
    const int i = index[static_cast<size_t>(rank)];
    return i < 0 ? none : groups_[mesh_impl::kind_index(kind)][static_cast<size_t>(i)];
}

int64_t Mesh::size(MeshGroup kind) const {
    const auto& g = groups(kind);
    return g.empty() ? 0 : static_cast<int64_t>(g[0].size());
}

int64_t Mesh::coordinate(MeshAxis axis, int64_t rank) const {
    const auto st = mesh_impl::strides(layout_);
    for (size_t i = 0; i < layout_.order.size(); ++i)
        if (layout_.order[i] == axis) return rank / st[i] % layout_.axis_size(axis);
    return 0;
}

GroupPlacement Mesh::placement(MeshGroup kind, int64_t rank, int64_t gpus_per_node) const {
    return place_members(group_of(kind, rank), gpus_per_node);
}

std::optional<GroupKind> ir_group_kind(MeshGroup g) {
    switch (g) {
        case MeshGroup::Data: return GroupKind::Dp;
        case MeshGroup::SequenceData: return GroupKind::Dp;   // ZeRO's group under Ulysses
        case MeshGroup::Pipe: return GroupKind::Pipe;
        case MeshGroup::Tensor: return GroupKind::Tensor;
        case MeshGroup::ModelParallel: return GroupKind::ModelParallel;
        case MeshGroup::Sequence: return GroupKind::Sequence;
        case MeshGroup::Expert: return GroupKind::Expert;
        case MeshGroup::ExpertData: return GroupKind::ExpertData;
        case MeshGroup::Hpz: return GroupKind::Hpz;
        case MeshGroup::QgzIntra: return GroupKind::QgzIntra;
        case MeshGroup::QgzInter: return GroupKind::QgzInter;
        case MeshGroup::MicsShard: return GroupKind::MicsShard;
        case MeshGroup::MicsReplica: return GroupKind::MicsReplica;
        case MeshGroup::FsdpShard: return GroupKind::FsdpShard;
        case MeshGroup::FsdpReplica: return GroupKind::FsdpReplica;
    }
    return std::nullopt;
}

ProcessGroup mesh_process_group(const Mesh& mesh, MeshGroup kind) {
    return ProcessGroup{ir_group_kind(kind).value(), mesh.groups(kind)};
}

}  // namespace zerosim
