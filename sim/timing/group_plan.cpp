// A collective on a process group of the ZeRO variants (hpZ, qgZ, MiCS), timed on the links that
// group uses. Ranks are placed on nodes in order (rank r on node r / gpus_per_node, as launchers
// place them and as DeepSpeed's groups assume), so rank 0's group tells how many of its members
// share a node and how many nodes it spans: an hpZ group of 8 consecutive ranks on an 8-GPU node
// is one node (NVLink only); qgZ's inter-node group is one rank on each node. The group is planned
// as a collective on a topology of that shape whose NIC bandwidth is the members' share of the
// node's (every group of the kind runs at once and they share the node's NICs).
#include "timing/group_plan.hpp"

#include <algorithm>

#include "schedule/mesh.hpp"

namespace zerosim {

CollectivePlan plan_for_members(const Topology& t, const Op& op, const std::vector<int>& members) {
    const double bytes = static_cast<double>(op.bytes());
    const int64_t n = static_cast<int64_t>(members.size());
    // Where the members sit (schedule/mesh.hpp, the one place that places ranks on nodes).
    const GroupPlacement at = place_members(members, t.gpus_per_node);
    Topology sub = t;
    sub.gpus_per_node = std::max<int64_t>(at.first_node_members, 1);
    sub.nodes = at.node_count();
    sub.nic_bandwidth_gbs = t.nic_bandwidth_gbs * static_cast<double>(sub.gpus_per_node) / static_cast<double>(at.gpus_per_node);
    if (op.kind == OpKind::AllToAll) return plan_all_to_all(sub, bytes, n);
    // p2p.py send/recv: NCCL's ncclSend/ncclRecv move the tensor once over the pair's path, which is
    // what a broadcast of two ranks plans (one step, no reduction).
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return plan_collective(sub, OpKind::Broadcast, bytes, n);
    return plan_collective(sub, op.kind, bytes, n);
}

std::vector<int> own_group_members(const ScheduleMeta& meta, GroupKind kind) {
    if (!meta.layout.is_3d()) return {};
    ParallelLayout L = meta.layout;
    auto mesh = Mesh::build(L);
    if (!mesh) return {};
    for (MeshGroup g : kMeshGroups) {
        auto k = ir_group_kind(g);
        if (!k || *k != kind) continue;
        // ZeRO's group under Ulysses is sequence x data; Data and SequenceData both map to Dp.
        if (kind == GroupKind::Dp && g != (L.sequence > 1 ? MeshGroup::SequenceData : MeshGroup::Data)) continue;
        return mesh->group_of(g, meta.rank);
    }
    return {};
}

CollectivePlan plan_for_group(const Topology& t, const Op& op, const ScheduleMeta& meta) {
    if (op.group == GroupKind::Dp && op.kind != OpKind::AllToAll && !meta.layout.is_3d())
        return plan_collective(t, op.kind, static_cast<double>(op.bytes()), meta.world);
    std::vector<int> members = own_group_members(meta, op.group);
    if (members.empty())
        for (const auto& g : meta.groups)
            if (g.kind == op.group && !g.members.empty()) members = g.members[0];
    if (members.empty())
        for (int64_t r = 0; r < meta.world; ++r) members.push_back(static_cast<int>(r));
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv)
        members = {static_cast<int>(op.kind == OpKind::Send ? meta.rank : op.peer),
                   static_cast<int>(op.kind == OpKind::Send ? op.peer : meta.rank)};
    return plan_for_members(t, op, members);
}

double quantization_seconds(const Topology& t, const Op& op, const ScheduleMeta& meta) {
    const double rate = t.mem_bandwidth_gbs * 1e9 * t.mem_efficiency;
    if (rate <= 0) return 0.0;
    const double e = static_cast<double>(op.elements);
    double bytes = 0;
    if (op.payload == Payload::QuantizedShards) {
        const double k = static_cast<double>(std::max<int64_t>(meta.group_size(op.group), 1));
        bytes = e * (dtype_size(meta.model_dtype) + 1) + 3 * k * e;
    } else if (op.rule == RuleId::QgzIntraAllToAll) {
        bytes = e * (2 * dtype_size(meta.comm_dtype) + 1);
    } else if (op.rule == RuleId::QgzInterAllToAll) {
        bytes = e * static_cast<double>(std::max<int64_t>(meta.variants.gpus_per_node, 1) + 6);
    }
    return bytes / rate;
}

}  // namespace zerosim
