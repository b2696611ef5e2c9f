// Fabric mode's SimGrid platform and flow runner (sim/timing/fabric_platform.hpp, private to
// sim/timing): the fat tree routes every pair of ports over the same links as SimGrid's own
// FatTreeZone built beside it, and concurrent flows end when max-min sharing, worked by hand, says.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <simgrid/kernel/routing/NetZoneImpl.hpp>

#include "../../sim/timing/fabric_platform.hpp"
#include "timing/fabric.hpp"

using namespace zerosim;
namespace sg = simgrid::s4u;

namespace {

// The shape of a plain fat tree with `ports` NIC ports under each of `leaves` leaf switches:
// nodes of 2 NICs, ports / 2 nodes per leaf.
FabricShape tree_shape(int64_t ports, int64_t leaves, int64_t spines) {
    FabricShape s;
    s.nics_per_node = 2;
    s.nodes_per_leaf = ports / 2;
    s.nodes = s.nodes_per_leaf * leaves;
    s.gpus_per_node = 1;
    s.spines = spines;
    return s;
}

// SimGrid's FatTreeZone for the same shape, in a zone of its own beside the engine's root (as
// fabric mode built it before): one host per port, by port slot.
std::vector<sg::Host*> reference_tree(const FabricShape& s, const std::string& name) {
    auto* root = engine_root_zone()->get_impl();
    auto* holder = sg::create_empty_zone(name);
    holder->get_impl()->set_network_model(root->get_network_model());
    holder->get_impl()->set_cpu_pm_model(root->get_cpu_pm_model());
    holder->get_impl()->set_cpu_vm_model(root->get_cpu_vm_model());
    holder->get_impl()->set_disk_model(root->get_disk_model());
    holder->get_impl()->set_host_model(root->get_host_model());
    const auto ports = static_cast<unsigned>(s.leaf_ports()), leaves = static_cast<unsigned>(s.leaves());
    std::vector<sg::Host*> by_slot(ports * leaves, nullptr);
    auto leaf_cb = [&](sg::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
        auto* h = zone->create_host(name + ".port" + std::to_string(id), 1e9)->seal();
        by_slot.at(id) = h;
        return std::make_pair(h->get_netpoint(), static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
    };
    sg::FatTreeParams params = leaves == 1 ? sg::FatTreeParams(1, {ports}, {1}, {1})
                                           : sg::FatTreeParams(2, {ports, leaves}, {1, static_cast<unsigned>(s.spines)}, {1, 1});
    sg::create_fatTree_zone(name + ".fabric", holder, params, sg::ClusterCallbacks(leaf_cb), 1e9, 0,
                            sg::Link::SharingPolicy::SPLITDUPLEX)
        ->seal();
    holder->seal();
    return by_slot;
}

std::vector<sg::Link*> route(sg::Host* a, sg::Host* b) {
    std::vector<sg::Link*> links;
    double latency = 0;
    a->route_to(b, links, &latency);
    return links;
}

}  // namespace

TEST(FabricPlatform, FatTreeRoutesAreFatTreeZones) {
    // For every ordered pair of ports, our route and FatTreeZone's have the same length and their
    // links correspond one to one across all routes (a bijection: FatTreeZone may number its
    // spines from another port count, which only renames them). A route picking its spine by the
    // source port instead of the destination's ("d-mod-k") would map two of FatTreeZone's uplinks
    // on one of ours and fail.
    const struct { int64_t ports, leaves, spines; } shapes[] = {{4, 1, 1}, {4, 3, 2}, {4, 3, 4}, {6, 4, 4}, {6, 3, 3}, {2, 5, 1}};
    static int made = 0;   // SimGrid refuses a second zone of one name (--gtest_repeat)
    for (const auto& sh : shapes) {
        const FabricShape s = tree_shape(sh.ports, sh.leaves, sh.spines);
        const FabricPlatform& ours = fabric_platform(s);
        const std::vector<sg::Host*> ref = reference_tree(s, "reference-tree" + std::to_string(made++));
        ASSERT_EQ(ours.port.size(), ref.size());
        std::map<sg::Link*, sg::Link*> to_ours, to_ref;
        for (size_t a = 0; a < ref.size(); ++a)
            for (size_t b = 0; b < ref.size(); ++b) {
                if (a == b) continue;
                const auto r = route(ref[a], ref[b]), o = route(ours.port[a], ours.port[b]);
                const bool same_leaf = static_cast<int64_t>(a) / sh.ports == static_cast<int64_t>(b) / sh.ports;
                ASSERT_EQ(o.size(), same_leaf ? 2u : 4u) << "ports " << a << " to " << b;
                ASSERT_EQ(r.size(), o.size()) << "ports " << a << " to " << b;
                for (size_t i = 0; i < r.size(); ++i) {
                    auto [f, fresh_f] = to_ours.emplace(r[i], o[i]);
                    auto [g, fresh_g] = to_ref.emplace(o[i], r[i]);
                    ASSERT_EQ(f->second, o[i]) << "ports " << a << " to " << b << ", link " << i;
                    ASSERT_EQ(g->second, r[i]) << "ports " << a << " to " << b << ", link " << i;
                }
            }
        // Every port's two links and, across leaves, each leaf's two links per spine.
        const size_t links = 2 * ref.size() + (sh.leaves > 1 ? 2 * static_cast<size_t>(sh.leaves * sh.spines) : 0);
        EXPECT_EQ(to_ours.size(), links);
    }
}

TEST(FabricPlatform, ConcurrentFlowsShareByMaxMin) {
    // 2 nodes of 8 GPUs on the NVSwitch star, every GPU's port at 1 GB/s each way.
    FabricShape s;
    s.nodes = 2;
    s.gpus_per_node = 8;
    FabricPlatform& p = fabric_platform(s);
    for (size_t i = 0; i < p.gpu.size(); ++i) {
        p.gpu_out[i]->set_bandwidth(1e9);
        p.gpu_in[i]->set_bandwidth(1e9);
    }
    // GPU 0 sends 100, 200 and 300 MB to GPUs 1, 2, 3: its port is shared three ways (1/3 GB/s
    // each) until 0.3 s, when the first ends; two ways (1/2 GB/s) until 0.5 s; then the last 100 MB
    // alone: 0.6 s, the port's 600 MB at 1 GB/s.
    EXPECT_NEAR(run_fabric_flows({{p.gpu[0], p.gpu[1], 1e8}, {p.gpu[0], p.gpu[2], 2e8}, {p.gpu[0], p.gpu[3], 3e8}}), 0.6, 1e-9);
    // 150 flows from GPU 4 to GPU 5 and one from GPU 6 to GPU 5 (more than one sender's share,
    // sources interleaved): GPU 5's in-port carries 151 x 10 MB = 1.51 GB at 1 GB/s.
    std::vector<FabricFlow> many;
    for (int i = 0; i < 150; ++i) many.push_back({p.gpu[4], p.gpu[5], 1e7});
    many.insert(many.begin() + 70, FabricFlow{p.gpu[6], p.gpu[5], 1e7});
    EXPECT_NEAR(run_fabric_flows(many), 1.51, 1e-9);
    // A ring over all 16 GPUs, flow i of (i + 1) x 10 MB, each alone on its two ports: the last
    // ends after the largest, 160 MB at 1 GB/s; GPU 7's port at a quarter speed slows only its
    // 80 MB, to 0.32 s.
    std::vector<FabricFlow> ring;
    for (size_t i = 0; i < p.gpu.size(); ++i) ring.push_back({p.gpu[i], p.gpu[(i + 1) % p.gpu.size()], 1e7 * static_cast<double>(i + 1)});
    EXPECT_NEAR(run_fabric_flows(ring), 0.16, 1e-9);
    p.gpu_out[7]->set_bandwidth(0.25e9);
    EXPECT_NEAR(run_fabric_flows(ring), 0.32, 1e-9);
    p.gpu_out[7]->set_bandwidth(1e9);
    EXPECT_EQ(run_fabric_flows({}), 0.0);
}
