// Process groups (issue 17 part 5): the sub-communicators of hpZ and MiCS, created once at start,
// each op's collective run on its group, and MiCS's replication all_reduce of the shard-group
// gradient partitions.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "backends/dtype.hpp"
#include "handlers.hpp"
#include "schedule/mesh.hpp"

namespace zerorun {
namespace detail {

std::optional<GroupRole> group_role(zerosim::GroupKind group) {
    using zerosim::GroupKind;
    switch (group) {
        case GroupKind::Dp: return GroupRole::World;
        case GroupKind::Hpz: return GroupRole::HpzSecondary;
        case GroupKind::QgzIntra: return GroupRole::QgzIntraNode;
        case GroupKind::QgzInter: return GroupRole::QgzInterNode;
        case GroupKind::MicsShard: return GroupRole::MicsShard;
        case GroupKind::MicsReplica: return GroupRole::MicsReplica;
        case GroupKind::FsdpShard:
        case GroupKind::FsdpReplica: return std::nullopt;   // what-if groups: plain sub-groups here
        // 3D groups (issue 29): the model's own collectives (activations, scalars) run on them.
        case GroupKind::Pipe:
        case GroupKind::Tensor:
        case GroupKind::ModelParallel:
        case GroupKind::Sequence:
        case GroupKind::Expert:
        case GroupKind::ExpertData: return std::nullopt;
    }
    return std::nullopt;
}

ZeroGroup zero_group(const Schedule& s, int grank, int world) {
    ZeroGroup z;
    if (!s.meta.layout.is_3d()) {
        for (int r = 0; r < world; ++r) z.members.push_back(r);
        z.index = grank;
        return z;
    }
    auto mesh = zerosim::Mesh::build(s.meta.layout);
    if (!mesh) throw std::runtime_error("meta.layout: " + mesh.error().message);
    const auto kind = s.meta.layout.sequence > 1 ? zerosim::MeshGroup::SequenceData : zerosim::MeshGroup::Data;
    const auto& all = mesh->groups(kind);
    for (size_t k = 0; k < all.size(); ++k) {
        auto it = std::find(all[k].begin(), all[k].end(), grank);
        if (it == all[k].end()) continue;
        z.members = all[k];
        z.index = static_cast<int>(it - all[k].begin());
        z.color = static_cast<int>(k);
    }
    if (z.members.empty()) throw std::runtime_error("meta.layout: no data-parallel group holds rank " + std::to_string(grank));
    return z;
}

// ZeRO's group is the world, or the rank's data group (zero_group). Every group kind of
// meta.groups cuts the world into disjoint sets; each rank joins the set holding it, as DeepSpeed
// v0.14.2 creates one torch process group per set (utils/groups.py _create_zero_param_parallel_group for hpZ, runtime/zero/mics_utils.py
// create_mics_comm_groups for MiCS's shard and replication groups).
// The 3D kinds (pipe, tensor, model_parallel, sequence, expert, expert_data) are the mesh's groups
// (schedule/mesh.hpp), as DeepSpeed's grid and mpu form them (runtime/pipe/topology.py, utils/groups.py).
void Executor::build_groups() {
    // ZeRO's group: the world, or in a 3D layout the data-parallel group on its own
    // sub-communicator (every rank splits once, so the collective split matches on all).
    ZeroGroup z = zero_group(s_, grank_, be_.world());
    world_group_.members = z.members;
    world_group_.index = z.index;
    if (s_.meta.layout.is_3d()) {
        world_group_.handle = be_.split_group(z.color);
        if (world_group_.handle < 0) throw std::runtime_error("the " + be_.name() + " backend has no sub-communicators");
    }
    for (const auto& g : s_.meta.groups) {
        GroupView v;
        v.role = group_role(g.kind).value_or(GroupRole::Other);
        int color = -1;
        for (size_t k = 0; k < g.members.size(); ++k) {
            auto it = std::find(g.members[k].begin(), g.members[k].end(), grank_);
            if (it == g.members[k].end()) continue;
            color = static_cast<int>(k);
            v.members = g.members[k];
            v.index = static_cast<int>(it - g.members[k].begin());
        }
        if (color < 0) throw std::runtime_error(std::string("process group ") + zerosim::group_name(g.kind) + " has no set holding rank " + std::to_string(grank_));
        v.handle = be_.split_group(color);
        if (v.handle < 0)
            throw std::runtime_error("the " + be_.name() + " backend has no sub-communicators for group " + zerosim::group_name(g.kind));
        groups_[g.kind] = v;
    }
    quantized_ = s_.meta.variants.qwz || s_.meta.variants.qgz;
    over_.assign(s_.params.size(), &world_group_);
    for (const auto& G : s_.meta.partition.groups) {
        if (G.over == zerosim::GroupKind::Dp) continue;
        auto it = groups_.find(G.over);
        if (it == groups_.end()) throw std::runtime_error(std::string("meta.partition: group ") + zerosim::group_name(G.over) + " not in meta.groups");
        for (int p : G.order) over_[static_cast<size_t>(p)] = &it->second;
    }
    const GroupView* mics = group_with(GroupRole::MicsShard);
    shard_group_ = mics ? mics : &world_group_;
}

const GroupView& Executor::group_of(const Op& op) const {
    if (group_role(op.group) == GroupRole::World) return world_group_;
    auto it = groups_.find(op.group);
    if (it == groups_.end()) broken(op, std::string("names group ") + zerosim::group_name(op.group) + ", not in meta.groups");
    return it->second;
}

const GroupView* Executor::group_with(GroupRole role) const {
    for (const auto& g : s_.meta.groups) {
        auto it = groups_.find(g.kind);
        if (it != groups_.end() && it->second.role == role) return &it->second;
    }
    return nullptr;
}

// MiCS at the accumulation boundary (DeepSpeed v0.14.2 mics.py allreduce_mics_shard_grads): each
// rank's gradient partition of every parameter of the op, which the shard-group reduce-scatter
// left holding its shard group's sum, all-reduced over the replication group ({i, i+s, ...}) so it
// holds the whole world's sum. Checked against that sum, recomputed from the loss.
void MicsReplicaReduction::stage(const Op& op) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    int64_t n = 0;
    for (int p : op.params) n += x.part_[p];
    if (n != op.elements) broken(op, "carries " + std::to_string(op.elements) + " elements, the partitions hold " + std::to_string(n));
    in_ = x.comm_buffer(n, t);
    int64_t pos = 0;
    for (int p : op.params) {
        const Unit& u = x.units_[x.owned_[p].unit];
        if (u.grad_step != op.step) broken(op, "all-reduces the partition of " + x.s_.params[p].name + " before its reduce-scatter");
        pack_floats(u.grad.as<float>(), static_cast<char*>(in_.data()) + pos * es, t, x.part_[p]);
        pos += x.part_[p];
    }
}

void MicsReplicaReduction::call(const Op& op) { x.be_.all_reduce(in_.data(), in_.data(), op.elements, op.dtype, op.redop); }

Check MicsReplicaReduction::take(const Op& op) {
    Check c;
    int64_t pos = 0;
    for (int p : op.params) {
        Unit& u = x.units_[x.owned_[p].unit];
        const bool have = x.verify_ && sums_.step[p] == op.step;
        for (int64_t j = 0; j < x.part_[p]; ++j, ++pos) {
            double v = load_element(in_.data(), op.dtype, pos);
            u.grad.as<float>()[j] = static_cast<float>(v);
            if (have) c.see(std::fabs(v - sums_.sum[p][j].first) <= sums_.sum[p][j].second);
        }
    }
    return c;
}

}  // namespace detail
}  // namespace zerorun
