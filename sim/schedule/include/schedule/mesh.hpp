// The parallel layout of a run and the one mesh of process groups built from it.
//
// A ParallelLayout holds the world and the sizes and order of the axes DeepSpeed v0.14.2 lays ranks
// on (runtime/pipe/topology.py ProcessTopology: row-major, the LAST axis varies fastest;
// PipeModelDataParallelTopology's axes are ['pipe', 'data', 'model']), the expert axis that splits
// the data axis (utils/groups.py _get_expert_parallel_ranks), and the ZeRO++ / MiCS / FSDP sub-groups
// DeepSpeed and PyTorch build over the whole world. Mesh::build checks it as DeepSpeed asserts it and
// forms every group as DeepSpeed forms them, in DeepSpeed's creation order; the placement helpers
// are the one place that puts ranks on nodes (rank r on node r / gpus_per_node, as launchers place
// them and as DeepSpeed's node-shaped groups assume). docs/architecture.md ("The mesh") has a picture.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "schedule/layout.hpp"

namespace zerosim {

// Every kind of process group the mesh forms.
enum class MeshGroup {
    Pipe,           // one rank per stage, same data/sequence/tensor coordinate (grid.pipe_groups)
    Data,           // same pipe/sequence/tensor coordinate (grid.dp_groups)
    Tensor,         // same pipe/data/sequence coordinate (grid.model_groups, "model")
    ModelParallel,  // every rank with the same data coordinate (grid.ds_model_proc_group)
    Sequence,       // Ulysses: same pipe/data/tensor coordinate
    SequenceData,   // what ZeRO shards over under Ulysses: same pipe/tensor coordinate
    Expert,         // ep consecutive members of a data group (all_to_all of MoE layers)
    ExpertData,     // the same expert in every expert group of a data group (MoE grads)
    Hpz,            // ZeRO++ hpZ secondary partition: k consecutive ranks
    QgzIntra,       // ZeRO++ qgZ: the ranks of one node
    QgzInter,       // ZeRO++ qgZ: the same local rank on every node
    MicsShard,      // MiCS: s consecutive ranks
    MicsReplica,    // MiCS: the same position in every shard group
    FsdpShard,      // FSDP hybrid shard: the ranks of one node
    FsdpReplica,    // FSDP hybrid shard: the same local rank on every node
};
inline constexpr std::array<MeshGroup, 15> kMeshGroups = {
    MeshGroup::Pipe,     MeshGroup::Data,       MeshGroup::Tensor,      MeshGroup::ModelParallel, MeshGroup::Sequence,
    MeshGroup::SequenceData, MeshGroup::Expert, MeshGroup::ExpertData,  MeshGroup::Hpz,           MeshGroup::QgzIntra,
    MeshGroup::QgzInter, MeshGroup::MicsShard,  MeshGroup::MicsReplica, MeshGroup::FsdpShard,     MeshGroup::FsdpReplica};
const char* mesh_group_name(MeshGroup g);   // "pipe", "data", ..., "fsdp_replica"

// The layout's refusals, as DeepSpeed's assertions (field "parallel_layout.NAME"); nullopt when valid.
Status check_parallel_layout(const ParallelLayout& l);

// Where a group's members live when rank r is on node r / gpus_per_node (gpus_per_node below 1
// counts as 1, as timing/group_plan.cpp and fabric_model.cpp clamp it).
struct GroupPlacement {
    std::vector<int64_t> nodes;            // the nodes the group spans, ascending
    std::vector<int64_t> members_on_node;  // members on each of those nodes
    int64_t gpus_per_node = 1;             // the node design's GPUs (after the clamp)
    int64_t first_node_members = 0;        // members on the first member's node (NCCL's ranks per node)
    bool inside_one_node() const { return nodes.size() <= 1; }
    int64_t node_count() const { return static_cast<int64_t>(nodes.size()); }
    // The share of a node's NICs the group's members on the first node hold when every group of
    // its kind runs at once: first_node_members / gpus_per_node (at least one member).
    double nic_share() const;
};

// Nodes that hold `ranks` consecutive ranks (ceil(ranks / min(gpus_per_node, ranks))), the node of a
// rank, its index on that node.
int64_t node_count(int64_t ranks, int64_t gpus_per_node);
int64_t node_of(int64_t rank, int64_t gpus_per_node);
int64_t local_rank(int64_t rank, int64_t gpus_per_node);
GroupPlacement place_members(const std::vector<int>& members, int64_t gpus_per_node);

class Mesh {
public:
    static Result<Mesh> build(const ParallelLayout& layout);

    const ParallelLayout& layout() const { return layout_; }
    int64_t world() const { return layout_.world; }
    // Every group of a kind, each ascending, in the order DeepSpeed creates them; empty when the
    // kind is off (no hpZ, qgZ on one node, ...). The axis kinds always exist (one-rank groups too).
    const std::vector<std::vector<int>>& groups(MeshGroup kind) const;
    bool has(MeshGroup kind) const { return !groups(kind).empty(); }
    // The group of `rank`; empty when the kind is off or the rank is outside the world.
    const std::vector<int>& group_of(MeshGroup kind, int64_t rank) const;
    // Members of each group of the kind (they are all the same size); 0 when off.
    int64_t size(MeshGroup kind) const;
    // The coordinate of a rank on an axis (topology.py get_coord).
    int64_t coordinate(MeshAxis axis, int64_t rank) const;
    GroupPlacement placement(MeshGroup kind, int64_t rank, int64_t gpus_per_node) const;

private:
    ParallelLayout layout_;
    std::array<std::vector<std::vector<int>>, kMeshGroups.size()> groups_;
    std::array<std::vector<int>, kMeshGroups.size()> index_;   // per kind: rank -> its group
    void index_groups();
};

// The IR's group kind of a mesh group (ScheduleMeta::groups and Op::group): Data, and SequenceData
// under Ulysses, are ZeRO's group, GroupKind::Dp; every other kind has its own.
std::optional<GroupKind> ir_group_kind(MeshGroup g);
// Every group of a mesh kind as the IR's ProcessGroup (ir_group_kind(kind) must exist).
ProcessGroup mesh_process_group(const Mesh& mesh, MeshGroup kind);

}  // namespace zerosim
