// The parallel layout and its mesh (schedule/mesh.hpp). Expectations are written out by hand from
// DeepSpeed v0.14.2's own examples: runtime/pipe/topology.py's docstrings (rank = the row-major
// index of the coordinates, the last axis fastest) and utils/groups.py's docstrings of
// _create_expert_and_data_parallel and _get_expert_parallel_ranks. The last tests check that the
// mesh forms exactly the groups today's generators build (stage3_variants.cpp for hpZ, MiCS and
// qgZ; what_if_fsdp.cpp for FSDP hybrid shard), for several worlds.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/what_if.hpp"
#include "schedule/mesh.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

using Groups = std::vector<std::vector<int>>;

Mesh mesh(const ParallelLayout& l) {
    auto m = Mesh::build(l);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.ok() ? m.value() : Mesh::build(ParallelLayout{}).value();
}

ParallelLayout layout(int64_t world, int64_t pipe = 1, int64_t tensor = 1, int64_t sequence = 1, int64_t expert = 1) {
    ParallelLayout l;
    l.world = world;
    l.pipe = pipe;
    l.tensor = tensor;
    l.sequence = sequence;
    l.expert = expert;
    return l;
}

// topology.py get_axis_comm_lists' docstring: axes ['pipe', 'data', 'model'], dims [2, 2, 2].
TEST(MeshTopology, DocstringPipeGroupsAndFilter) {
    Mesh m = mesh(layout(8, 2, 2));
    EXPECT_EQ(m.layout().data(), 2);
    EXPECT_EQ(m.groups(MeshGroup::Pipe), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
    // filter_match(pipe=0, data=1) = [2, 3]: the model group of rank 2.
    EXPECT_EQ(m.group_of(MeshGroup::Tensor, 2), (std::vector<int>{2, 3}));
}

// World 16, pipe 2, tensor 2, so data 4: rank = pipe x 8 + data x 2 + model.
TEST(MeshTopology, PipeDataModelOnSixteenRanks) {
    Mesh m = mesh(layout(16, 2, 2));
    EXPECT_EQ(m.layout().data(), 4);
    EXPECT_EQ(m.groups(MeshGroup::Pipe), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::Tensor),
              (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
    // ds_model_proc_group (topology.py 302-311): the ranks of one data index, across the stages.
    EXPECT_EQ(m.groups(MeshGroup::ModelParallel), (Groups{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}));
    // No sequence parallelism: one-rank sequence groups; sequence x data is the data group.
    EXPECT_EQ(m.size(MeshGroup::Sequence), 1);
    EXPECT_EQ(m.groups(MeshGroup::SequenceData), m.groups(MeshGroup::Data));
    EXPECT_EQ(m.group_of(MeshGroup::Data, 13), (std::vector<int>{9, 11, 13, 15}));
    EXPECT_EQ(m.group_of(MeshGroup::Pipe, 13), (std::vector<int>{5, 13}));
    // 13 = 1 x 8 + 2 x 2 + 1.
    EXPECT_EQ(m.coordinate(MeshAxis::Pipe, 13), 1);
    EXPECT_EQ(m.coordinate(MeshAxis::Data, 13), 2);
    EXPECT_EQ(m.coordinate(MeshAxis::Tensor, 13), 1);
    EXPECT_EQ(m.size(MeshGroup::Pipe), 2);
    EXPECT_EQ(m.size(MeshGroup::Data), 4);
    EXPECT_EQ(m.size(MeshGroup::ModelParallel), 4);
}

// ProcessTopology takes the axes in any order: ['data', 'pipe'] puts stages side by side.
TEST(MeshTopology, AxisOrderIsTheLayouts) {
    ParallelLayout l = layout(4, 2);
    l.order = {MeshAxis::Data, MeshAxis::Pipe, MeshAxis::Sequence, MeshAxis::Tensor};
    Mesh m = mesh(l);
    EXPECT_EQ(m.groups(MeshGroup::Pipe), (Groups{{0, 1}, {2, 3}}));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 2}, {1, 3}}));
    EXPECT_EQ(m.coordinate(MeshAxis::Pipe, 1), 1);
    EXPECT_EQ(m.coordinate(MeshAxis::Data, 1), 0);
}

TEST(MeshTopology, PureDataParallelIsTheWorld) {
    Mesh m = mesh(layout(4));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 1, 2, 3}}));
    EXPECT_EQ(m.groups(MeshGroup::Pipe), (Groups{{0}, {1}, {2}, {3}}));
    EXPECT_EQ(m.groups(MeshGroup::ModelParallel), (Groups{{0}, {1}, {2}, {3}}));
    for (MeshGroup g : {MeshGroup::Hpz, MeshGroup::QgzIntra, MeshGroup::QgzInter, MeshGroup::MicsShard,
                        MeshGroup::MicsReplica, MeshGroup::FsdpShard, MeshGroup::FsdpReplica}) {
        EXPECT_FALSE(m.has(g)) << mesh_group_name(g);
        EXPECT_EQ(m.size(g), 0);
        EXPECT_TRUE(m.group_of(g, 0).empty());
    }
    EXPECT_TRUE(m.group_of(MeshGroup::Data, 4).empty());
    EXPECT_TRUE(m.group_of(MeshGroup::Data, -1).empty());
}

// groups.py _create_expert_and_data_parallel's docstring, on 8 ranks with ep 2.
TEST(MeshExpert, ExpertAndExpertDataOnEightRanks) {
    Mesh m = mesh(layout(8, 1, 1, 1, 2));
    EXPECT_EQ(m.groups(MeshGroup::Expert), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_EQ(m.groups(MeshGroup::ExpertData), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
    EXPECT_EQ(m.layout().expert_data(), 4);
    EXPECT_EQ(m.group_of(MeshGroup::ExpertData, 5), (std::vector<int>{1, 3, 5, 7}));
}

// groups.py _get_expert_parallel_ranks' docstring: world 16, model 2, expert 4, in its order.
TEST(MeshExpert, ExpertWithTensorParallelismAsTheDocstring) {
    Mesh m = mesh(layout(16, 1, 2, 1, 4));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::Expert), (Groups{{0, 2, 4, 6}, {8, 10, 12, 14}, {1, 3, 5, 7}, {9, 11, 13, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::ExpertData),
              (Groups{{0, 8}, {2, 10}, {4, 12}, {6, 14}, {1, 9}, {3, 11}, {5, 13}, {7, 15}}));
}

// Within each pipeline stage (pp_stride = world / pp): world 8, pipe 2, ep 2.
TEST(MeshExpert, ExpertGroupsStayInsideAStage) {
    Mesh m = mesh(layout(8, 2, 1, 1, 2));
    EXPECT_EQ(m.groups(MeshGroup::Expert), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_EQ(m.groups(MeshGroup::ExpertData), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
}

// Ulysses, sp 2 and dp 2 (parallel_state_sp.py initialize_sequence_parallel; Megatron-DeepSpeed's
// data groups range(j, world, sp)).
TEST(MeshSequence, SequenceTwoDataTwo) {
    Mesh m = mesh(layout(4, 1, 1, 2));
    EXPECT_EQ(m.layout().data(), 2);
    EXPECT_EQ(m.layout().sequence_data(), 4);
    EXPECT_EQ(m.groups(MeshGroup::Sequence), (Groups{{0, 1}, {2, 3}}));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 2}, {1, 3}}));
    EXPECT_EQ(m.groups(MeshGroup::SequenceData), (Groups{{0, 1, 2, 3}}));
    // parallel_state_sp.py aliases the model-parallel group to the sequence group.
    EXPECT_EQ(m.groups(MeshGroup::ModelParallel), m.groups(MeshGroup::Sequence));
}

TEST(MeshSequence, SequenceTwoOnEightRanks) {
    Mesh m = mesh(layout(8, 1, 1, 2));
    EXPECT_EQ(m.groups(MeshGroup::Sequence), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_EQ(m.groups(MeshGroup::Data), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
    EXPECT_EQ(m.groups(MeshGroup::SequenceData), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(MeshPlacement, NodesOfTheWorld) {
    EXPECT_EQ(node_count(16, 8), 2);
    EXPECT_EQ(node_count(17, 8), 3);
    EXPECT_EQ(node_count(4, 8), 1);
    EXPECT_EQ(node_count(1, 8), 1);
    EXPECT_EQ(node_count(5, 0), 5);   // no node size given: one rank a node
    EXPECT_EQ(node_of(9, 8), 1);
    EXPECT_EQ(local_rank(9, 8), 1);
    EXPECT_EQ(node_of(7, 8), 0);
}

// World 16 (pipe 2, tensor 2, data 4) on nodes of 8 GPUs: node 0 holds stage 0, node 1 stage 1.
TEST(MeshPlacement, WhichGroupsCrossNodes) {
    Mesh m = mesh(layout(16, 2, 2));
    GroupPlacement pipe = m.placement(MeshGroup::Pipe, 0, 8);   // {0, 8}
    EXPECT_EQ(pipe.nodes, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(pipe.members_on_node, (std::vector<int64_t>{1, 1}));
    EXPECT_FALSE(pipe.inside_one_node());
    EXPECT_EQ(pipe.first_node_members, 1);
    EXPECT_DOUBLE_EQ(pipe.nic_share(), 0.125);
    GroupPlacement data = m.placement(MeshGroup::Data, 9, 8);   // {9, 11, 13, 15}
    EXPECT_EQ(data.nodes, (std::vector<int64_t>{1}));
    EXPECT_TRUE(data.inside_one_node());
    EXPECT_EQ(data.first_node_members, 4);
    EXPECT_DOUBLE_EQ(data.nic_share(), 0.5);
    EXPECT_TRUE(m.placement(MeshGroup::Tensor, 6, 8).inside_one_node());
    GroupPlacement mp = m.placement(MeshGroup::ModelParallel, 0, 8);   // {0, 1, 8, 9}
    EXPECT_EQ(mp.nodes, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(mp.members_on_node, (std::vector<int64_t>{2, 2}));
    EXPECT_DOUBLE_EQ(mp.nic_share(), 0.25);
    EXPECT_EQ(mp.node_count(), 2);
}

// A world that does not fill its last node: 12 ranks on nodes of 8.
TEST(MeshPlacement, UnevenLastNode) {
    Mesh m = mesh(layout(12));
    GroupPlacement p = m.placement(MeshGroup::Data, 11, 8);
    EXPECT_EQ(p.nodes, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(p.members_on_node, (std::vector<int64_t>{8, 4}));
    EXPECT_EQ(p.first_node_members, 8);
    EXPECT_DOUBLE_EQ(p.nic_share(), 1.0);
    GroupPlacement one = place_members({10}, 8);
    EXPECT_EQ(one.nodes, (std::vector<int64_t>{1}));
    EXPECT_EQ(one.first_node_members, 1);
    EXPECT_EQ(place_members({}, 8).node_count(), 0);
}

// ZeRO++ and MiCS on 16 ranks, nodes of 8.
TEST(MeshSubGroups, ZeroPlusPlusAndMicsOnSixteenRanks) {
    ParallelLayout l = layout(16);
    l.hpz = 8;
    l.qgz_ranks_per_node = 8;
    l.mics_shard = 4;
    Mesh m = mesh(l);
    EXPECT_EQ(m.groups(MeshGroup::Hpz), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::QgzIntra), m.groups(MeshGroup::Hpz));
    EXPECT_EQ(m.groups(MeshGroup::QgzInter), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::MicsShard), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
    EXPECT_EQ(m.groups(MeshGroup::MicsReplica), (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
    EXPECT_TRUE(m.placement(MeshGroup::Hpz, 12, 8).inside_one_node());
    GroupPlacement inter = m.placement(MeshGroup::QgzInter, 3, 8);
    EXPECT_EQ(inter.nodes, (std::vector<int64_t>{0, 1}));
    EXPECT_DOUBLE_EQ(inter.nic_share(), 0.125);
    GroupPlacement replica = m.placement(MeshGroup::MicsReplica, 0, 8);   // {0, 4, 8, 12}
    EXPECT_EQ(replica.members_on_node, (std::vector<int64_t>{2, 2}));
}

TEST(MeshSubGroups, EdgeSizesAsDeepSpeed) {
    ParallelLayout l = layout(8);
    l.hpz = 16;                 // groups.py: min(k, world)
    l.mics_shard = 8;           // one shard group: one-rank replicate groups (mics_utils.py)
    l.qgz_ranks_per_node = 8;   // one node: no quantized path, no groups (stage3.py)
    l.fsdp_shard = 16;          // more ranks a node than the world: one shard group
    Mesh m = mesh(l);
    EXPECT_EQ(m.groups(MeshGroup::Hpz), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
    EXPECT_EQ(m.groups(MeshGroup::MicsReplica), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
    EXPECT_FALSE(m.has(MeshGroup::QgzIntra));
    EXPECT_FALSE(m.has(MeshGroup::QgzInter));
    EXPECT_EQ(m.groups(MeshGroup::FsdpShard), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
    EXPECT_EQ(m.size(MeshGroup::FsdpReplica), 1);
    l.hpz = 1;
    EXPECT_FALSE(mesh(l).has(MeshGroup::Hpz));
}

std::string layout_error(const ParallelLayout& l) {
    auto m = Mesh::build(l);
    EXPECT_FALSE(m.ok());
    return m.ok() ? "" : m.error().what();
}

TEST(MeshLayoutErrors, AxisSizes) {
    EXPECT_EQ(layout_error(layout(0)), "field 'parallel_layout.world': expected at least 1 rank, found 0");
    EXPECT_EQ(layout_error(layout(4, 1, 0)), "field 'parallel_layout.tensor': expected at least 1, found 0");
    EXPECT_EQ(layout_error(layout(4, -2)), "field 'parallel_layout.pipe': expected at least 1, found -2");
    EXPECT_EQ(layout_error(layout(2000000)), "field 'parallel_layout.world': expected at most 1048576 ranks, found 2000000");
    EXPECT_EQ(layout_error(layout(16, 3)),
              "field 'parallel_layout.pipe': pipe (3) x sequence (1) x tensor (1) must divide the world (16)");
    EXPECT_EQ(layout_error(layout(12, 2, 4)),
              "field 'parallel_layout.tensor': pipe (2) x sequence (1) x tensor (4) must divide the world (12)");
    EXPECT_EQ(layout_error(layout(16, 2, 1, 3)),
              "field 'parallel_layout.sequence': pipe (2) x sequence (3) x tensor (1) must divide the world (16)");
    // A product past int64 is refused without computing it.
    const int64_t huge = std::numeric_limits<int64_t>::max();
    EXPECT_EQ(layout_error(layout(16, 4, huge)),
              "field 'parallel_layout.tensor': pipe (4) x sequence (1) x tensor (" + std::to_string(huge) +
                  ") must divide the world (16)");
    ParallelLayout twice = layout(4);
    twice.order = {MeshAxis::Pipe, MeshAxis::Data, MeshAxis::Data, MeshAxis::Tensor};
    EXPECT_EQ(layout_error(twice), "field 'parallel_layout.order': expected each of pipe, data, sequence and tensor exactly once");
}

TEST(MeshLayoutErrors, Expert) {
    EXPECT_EQ(layout_error(layout(8, 2, 1, 1, 3)),
              "field 'parallel_layout.expert': DeepSpeed needs the expert-parallel size (3) to divide the data-parallel "
              "size (4) (groups.py)");
    EXPECT_EQ(layout_error(layout(8, 1, 1, 2, 2)),
              "field 'parallel_layout.expert': expert parallelism (2) with sequence parallelism (2) is not modelled: "
              "DeepSpeed v0.14.2's expert groups (groups.py _get_expert_parallel_ranks) leave sequence ranks out");
}

TEST(MeshLayoutErrors, SubGroups) {
    ParallelLayout l = layout(8);
    l.hpz = 3;
    EXPECT_EQ(layout_error(l), "field 'parallel_layout.hpz': DeepSpeed needs zero_hpz_partition_size (3) to divide the world (8) (groups.py)");
    l = layout(8);
    l.mics_shard = 16;
    EXPECT_EQ(layout_error(l),
              "field 'parallel_layout.mics_shard': DeepSpeed needs the world (8) to be a multiple of mics_shard_size (16) (mics_utils.py)");
    l = layout(8);
    l.qgz_ranks_per_node = 3;
    EXPECT_EQ(layout_error(l), "field 'parallel_layout.qgz_ranks_per_node': DeepSpeed's all-to-all groups need the world (8) "
                               "to be a whole number of nodes of 3 ranks");
    l = layout(6);
    l.qgz_ranks_per_node = 4;   // one node of 4 in a world of 6
    EXPECT_EQ(layout_error(l), "field 'parallel_layout.qgz_ranks_per_node': DeepSpeed's all-to-all groups need the world (6) "
                               "to be a whole number of nodes of 4 ranks");
    l = layout(8);
    l.fsdp_shard = 3;
    EXPECT_EQ(layout_error(l), "field 'parallel_layout.fsdp_shard': hybrid shard needs whole nodes: the world (8) is not a "
                               "multiple of the ranks per node (3)");
    l = layout(8);
    l.mics_shard = -1;
    EXPECT_EQ(layout_error(l), "field 'parallel_layout.mics_shard': expected 0 (off) or more, found -1");
}

// ---- Today's layouts: the groups the existing generators put in meta.groups, for several worlds.

Schedule stage3_schedule(const std::string& zero_keys, int64_t world, int64_t gpus_per_node) {
    auto m = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3)" +
                                            zero_keys + "}}");
    EXPECT_TRUE(m.ok() && c.ok()) << (c.ok() ? "" : c.error().what());
    ScheduleOptions o;
    o.world = world;
    o.gpus_per_node = gpus_per_node;
    auto s = build_schedule(m.value(), c.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.ok() ? s.value() : Schedule{};
}

// Every group the schedule names is the mesh's group of the same name, and the mesh has no
// sub-group the schedule lacks.
void expect_same_groups(const Schedule& s, const Mesh& m) {
    int sub_kinds = 0;
    for (MeshGroup k : {MeshGroup::Hpz, MeshGroup::QgzIntra, MeshGroup::QgzInter, MeshGroup::MicsShard,
                        MeshGroup::MicsReplica, MeshGroup::FsdpShard, MeshGroup::FsdpReplica})
        sub_kinds += m.has(k);
    EXPECT_EQ(static_cast<int>(s.meta.groups.size()), sub_kinds);
    for (const ProcessGroup& g : s.meta.groups) {
        bool found = false;
        for (MeshGroup k : kMeshGroups) {
            if (std::string(group_name(g.kind)) != mesh_group_name(k)) continue;
            found = true;
            EXPECT_EQ(g.members, m.groups(k)) << g.kind << " on " << s.meta.world << " ranks";
        }
        EXPECT_TRUE(found) << g.kind;
    }
}

TEST(MeshTodaysLayouts, HpzAsStage3Variants) {
    for (int64_t world : {2, 4, 8, 16})
        for (int64_t k : {2, 4, 8}) {
            if (world % std::min(k, world) != 0) continue;
            Schedule s = stage3_schedule(", \"zero_hpz_partition_size\": " + std::to_string(k), world, 0);
            ParallelLayout l = layout(world);
            l.hpz = k;
            expect_same_groups(s, mesh(l));
            EXPECT_EQ(s.meta.variants.hpz, mesh(l).size(MeshGroup::Hpz)) << world << " " << k;
        }
}

TEST(MeshTodaysLayouts, MicsAsStage3Variants) {
    for (int64_t world : {2, 4, 8, 16})
        for (int64_t s_size : {1, 2, 4, 8}) {
            if (s_size > world) continue;
            Schedule s = stage3_schedule(", \"mics_shard_size\": " + std::to_string(s_size), world, 0);
            ParallelLayout l = layout(world);
            l.mics_shard = s_size;
            expect_same_groups(s, mesh(l));
        }
}

TEST(MeshTodaysLayouts, QgzAsStage3Variants) {
    for (int64_t world : {4, 8, 16})
        for (int64_t per_node : {1, 2, 4, 8}) {
            if (per_node > world) continue;
            Schedule s = stage3_schedule(", \"zero_quantized_gradients\": true", world, per_node);
            ParallelLayout l = layout(world);
            l.qgz_ranks_per_node = per_node;
            Mesh m = mesh(l);
            expect_same_groups(s, m);
            EXPECT_EQ(s.meta.variants.qgz, m.has(MeshGroup::QgzInter)) << world << " " << per_node;
        }
}

TEST(MeshTodaysLayouts, HybridShardAsWhatIfFsdp) {
    for (int64_t world : {2, 4, 8})
        for (int64_t per_node : {1, 2, 4, 8, 16}) {
            Schedule s = stage3_schedule("", world, per_node);
            auto units = apply_what_if("hybrid-shard", s);
            ASSERT_TRUE(units.ok()) << units.error().what();
            ParallelLayout l = layout(world);
            l.fsdp_shard = per_node;
            expect_same_groups(s, mesh(l));
        }
}

}  // namespace
}  // namespace zerosim
