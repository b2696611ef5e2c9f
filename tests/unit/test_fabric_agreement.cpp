// Fabric mode against the representative mode on every shipped topology (all symmetric and
// non-blocking): the flow simulation itself must find no slowdown there (within 2%, no short
// cut: SimGrid routes the flows over the fat tree, with the leaves split so the spine is used),
// and so each collective and each step agrees within 2% (docs/fabric.md "Agreement").
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "timing/topology.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

std::vector<std::string> shipped_topologies() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies"))
        if (e.path().extension() == ".json") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

// The shipped node design on 4 nodes where it has a network (1 otherwise).
Topology scaled(const std::string& path) {
    auto one = load_topology(path);
    EXPECT_TRUE(one.ok()) << path;
    const int64_t nodes = one->nics_per_node > 0 && one->fabric != FabricKind::None ? 4 : 1;
    auto t = load_topology(path, nodes);
    EXPECT_TRUE(t.ok()) << path;
    return t.value();
}

}  // namespace

TEST(FabricAgreement, FlowSimulationFindsNoSlowdownOnShippedTopologies) {
    for (const auto& path : shipped_topologies()) {
        Topology t = scaled(path);
        const int64_t world = t.total_gpus();
        std::vector<int> ranks(static_cast<size_t>(world));
        std::iota(ranks.begin(), ranks.end(), 0);
        // As shipped (one leaf for 4 nodes), and with 2 nodes per leaf so that flows cross the spine.
        for (int64_t per_leaf : {int64_t{0}, int64_t{2}}) {
            Topology u = t;
            if (per_leaf) u.nodes_per_leaf = per_leaf;
            auto m = FabricModel::build(u, world, {});
            ASSERT_TRUE(m.ok()) << path;
            for (FlowPattern p : {FlowPattern::Ring, FlowPattern::Tree, FlowPattern::AllToAll}) {
                FabricFactors f = m.value()->factors(p, {ranks});
                EXPECT_NEAR(f.intra, 1.0, 0.02) << path << " pattern " << static_cast<int>(p);
                EXPECT_NEAR(f.inter, 1.0, 0.02) << path << " pattern " << static_cast<int>(p) << " per leaf " << per_leaf;
            }
            // The simulations ran (per pattern: NVLink, and the network where there is one), not a short cut.
            EXPECT_EQ(m.value()->flow_simulations(), t.nodes > 1 ? 6 : 3) << path;
        }
    }
}

TEST(FabricAgreement, EachCollectiveWithinTwoPercent) {
    for (const auto& path : shipped_topologies()) {
        Topology t = scaled(path);
        const int64_t world = t.total_gpus();
        auto m = FabricModel::build(t, world, {});
        ASSERT_TRUE(m.ok()) << path;
        ScheduleMeta meta;
        meta.world = world;
        EngineAdjust a = m.value()->engine_adjust(meta);
        for (OpKind k : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce})
            for (double bytes : {4096.0, 1048576.0, 268435456.0}) {
                double rep = simulate_single_collective(t, k, bytes, world);
                double fab = simulate_single_collective(m.value()->ideal_topology(), k, bytes, world, nullptr, {}, &a);
                EXPECT_NEAR(fab / rep, 1.0, 0.02) << path << " " << op_record_name(k) << " " << bytes;
            }
    }
}

TEST(FabricAgreement, EachStepWithinTwoPercent) {
    auto model = load_model(test::reference("deepspeed-v0.14.2-cpu/model.json"));
    ASSERT_TRUE(model.ok());
    for (const char* cfg : {"z1_seed_w4", "z3_default_w4"}) {
        auto c = load_ds_config(test::reference(std::string("deepspeed-v0.14.2-cpu/") + cfg + "/ds_config.json"));
        ASSERT_TRUE(c.ok());
        for (const auto& path : shipped_topologies()) {
            Topology t = scaled(path);
            ScheduleOptions o;
            o.world = t.total_gpus();
            o.steps = 2;
            auto s = build_schedule(model.value(), c.value(), o);
            ASSERT_TRUE(s.ok()) << path;
            auto m = FabricModel::build(t, o.world, {});
            ASSERT_TRUE(m.ok());
            EngineAdjust a = m.value()->engine_adjust(s->meta);
            for (TimingMode mode : {TimingMode::Synchronized, TimingMode::Overlapped}) {
                auto rep = simulate(s.value(), t, mode);
                auto fab = simulate(s.value(), m.value()->ideal_topology(), mode, INT64_MAX, &a);
                ASSERT_TRUE(rep.ok() && fab.ok()) << path;
                ASSERT_EQ(rep->steps.size(), fab->steps.size());
                for (size_t i = 0; i < rep->steps.size(); ++i)
                    EXPECT_NEAR(fab->steps[i].step_s() / rep->steps[i].step_s(), 1.0, 0.02) << path << " " << cfg << " step " << i;
            }
        }
    }
}
