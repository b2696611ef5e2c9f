// Fabric mode's platform (fabric_platform.hpp): SimGrid zones; the fat tree's routing is FatTreeZone's.
#include "fabric_platform.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>

#include <algorithm>
#include <map>
#include <memory>

namespace zerosim {

namespace sg = simgrid::s4u;

int64_t FabricShape::leaves() const {
    int64_t groups = (nodes + nodes_per_leaf - 1) / nodes_per_leaf;
    if (!leaf_of_node.empty()) groups = *std::max_element(leaf_of_node.begin(), leaf_of_node.end()) + 1;
    return rail_optimized ? groups * nics_per_node : groups;
}

int64_t FabricShape::leaf_ports() const { return rail_optimized ? nodes_per_leaf : nodes_per_leaf * nics_per_node; }

std::string FabricShape::placement_key() const {
    std::string k;
    for (int64_t l : leaf_of_node) k += "." + std::to_string(l);
    return k;
}

std::string FabricShape::key() const {
    return std::to_string(nodes) + "x" + std::to_string(gpus_per_node) + "g" + std::to_string(nics_per_node) + "n" +
           std::to_string(nodes_per_leaf) + "l" + std::to_string(spines) + "s" + (rail_optimized ? "r" : "f") + placement_key();
}

simgrid::s4u::NetZone* with_root_models(simgrid::s4u::NetZone* zone) {
    auto* root = engine_root_zone()->get_impl();
    auto* impl = zone->get_impl();
    impl->set_network_model(root->get_network_model());
    impl->set_cpu_pm_model(root->get_cpu_pm_model());
    impl->set_cpu_vm_model(root->get_cpu_vm_model());
    impl->set_disk_model(root->get_disk_model());
    impl->set_host_model(root->get_host_model());
    return zone;
}

namespace {

namespace kr = simgrid::kernel::routing;

// The fat tree's port slot (leaf switch * ports + position) of NIC j of each node. A plain fat tree
// puts a node's NICs side by side on its leaf switch; a rail-optimised one puts NIC j of every node
// of a group on leaf switch j of that group, so a ring on one rail stays under one switch. A placed
// node takes the next free position on its leaf.
std::vector<int64_t> port_slots(const FabricShape& s) {
    std::vector<int64_t> slots;
    slots.reserve(static_cast<size_t>(s.nodes * s.nics_per_node));
    std::map<int64_t, int64_t> placed;   // nodes put under each leaf so far
    for (int64_t node = 0; node < s.nodes; ++node) {
        int64_t group = node / s.nodes_per_leaf, pos = node % s.nodes_per_leaf;
        if (!s.leaf_of_node.empty()) {
            group = s.leaf_of_node[static_cast<size_t>(node)];
            pos = placed[group]++;
        }
        for (int64_t j = 0; j < s.nics_per_node; ++j)
            slots.push_back(s.rail_optimized ? (group * s.nics_per_node + j) * s.nodes_per_leaf + pos
                                             : (group * s.nodes_per_leaf + pos) * s.nics_per_node + j);
    }
    return slots;
}

// Leaf and spine switches, routed as SimGrid's FatTreeZone routes the two-level trees this
// platform had from it (src/kernel/routing/FatTreeZone.cpp, get_local_route): a port up to its
// leaf switch; to another leaf's port, up to spine (destination slot mod spines) ("d-mod-k") and
// down to that leaf; down to the port. Between two ports of one leaf, only their two links.
// FatTreeZone itself is not used: SimGrid 3.32 builds it by testing every port against every
// switch above it, making a std::stringstream per test (connect_node_to_parents, are_related), and
// walks every child of the spine on each route down: 8.4 million streams for 32,768 ports under
// 256 leaves. This zone is built in time linear in its ports and links and routes in constant time.
// (FatTreeZone counts port positions across every tree of the process, add_processing_node's
// static counter, which only renames its spines: the loads are the same.)
class LeafSpineZone final : public kr::NetZoneImpl {
public:
    LeafSpineZone(const std::string& name, int64_t ports, int64_t spines) : NetZoneImpl(name), ports_(ports), spines_(spines) {}
    std::vector<int64_t> slot_of_point;             // netpoint id in this zone -> port slot
    std::vector<sg::Host*> port;                    // per slot
    std::vector<sg::Link*> port_up, port_down;      // per slot: port to leaf switch, leaf switch to port
    std::vector<sg::Link*> to_spine, from_spine;    // per leaf * spines + spine

    void get_local_route(const kr::NetPoint* src, const kr::NetPoint* dst, kr::Route* into, double* latency) override {
        const int64_t s = slot_of_point.at(src->id()), d = slot_of_point.at(dst->id());
        if (s == d) return;   // FatTreeZone without a loopback: no link
        auto add = [&](sg::Link* l) {
            into->link_list_.push_back(l->get_impl());
            if (latency) *latency += l->get_latency();
        };
        add(port_up[static_cast<size_t>(s)]);
        const int64_t from_leaf = s / ports_, to_leaf = d / ports_;
        if (from_leaf != to_leaf) {
            const int64_t spine = d % spines_;
            add(to_spine[static_cast<size_t>(from_leaf * spines_ + spine)]);
            add(from_spine[static_cast<size_t>(to_leaf * spines_ + spine)]);
        }
        add(port_down[static_cast<size_t>(d)]);
    }

private:
    int64_t ports_, spines_;
};

sg::Link* plain_link(kr::NetZoneImpl* zone, const std::string& name) {
    return zone->get_iface()->create_link(name, 1e9)->set_latency(0)->seal();
}

// The fat tree: a host per leaf port (slot), its two links, each leaf's links to and from each spine.
LeafSpineZone* leaf_spine_zone(const FabricShape& s, const std::string& prefix, sg::NetZone* holder) {
    const int64_t ports = s.leaf_ports(), leaves = s.leaves(), spines = leaves > 1 ? s.spines : 1;
    auto* z = new LeafSpineZone(prefix + ".fabric", ports, spines);
    z->set_parent(holder->get_impl());
    const auto slots = static_cast<size_t>(ports * leaves);
    z->slot_of_point.assign(slots, -1);
    for (size_t i = 0; i < slots; ++i) {
        const std::string name = prefix + ".port" + std::to_string(i);
        sg::Host* h = z->get_iface()->create_host(name, 1e9)->seal();
        if (h->get_netpoint()->id() >= z->slot_of_point.size()) z->slot_of_point.resize(h->get_netpoint()->id() + 1, -1);
        z->slot_of_point[h->get_netpoint()->id()] = static_cast<int64_t>(i);
        z->port.push_back(h);
        z->port_up.push_back(plain_link(z, name + ".up"));
        z->port_down.push_back(plain_link(z, name + ".down"));
    }
    if (leaves > 1)
        for (int64_t l = 0; l < leaves; ++l)
            for (int64_t k = 0; k < spines; ++k) {
                const std::string name = prefix + ".leaf" + std::to_string(l) + ".spine" + std::to_string(k);
                z->to_spine.push_back(plain_link(z, name + ".up"));
                z->from_spine.push_back(plain_link(z, name + ".down"));
            }
    z->get_iface()->seal();
    return z;
}

sg::NetZone* detached_zone(const std::string& name) {
    engine_root_zone();   // the engine and its models first: a zone made before them would set other ones
    return with_root_models(sg::create_empty_zone(name));
}

std::unique_ptr<FabricPlatform> build(const FabricShape& s, const std::string& prefix) {
    auto p = std::make_unique<FabricPlatform>();
    p->shape = s;
    sg::NetZone* holder = detached_zone(prefix);
    // Every GPU on its node's NVSwitch: a spoke (one link each way) per GPU.
    auto* star = sg::create_star_zone(prefix + ".nvswitch");
    star->set_parent(holder);
    const int64_t gpus = s.nodes * s.gpus_per_node;
    for (int64_t i = 0; i < gpus; ++i) {
        const std::string name = prefix + ".gpu" + std::to_string(i);
        auto* h = star->create_host(name, 1e9)->seal();
        auto* out = star->create_link(name + ".out", 1e9)->set_latency(0)->seal();
        auto* in = star->create_link(name + ".in", 1e9)->set_latency(0)->seal();
        star->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg::LinkInRoute(out)}, false);
        star->add_route(nullptr, h->get_netpoint(), nullptr, nullptr, {sg::LinkInRoute(in)}, false);
        p->gpu.push_back(h);
        p->gpu_out.push_back(out);
        p->gpu_in.push_back(in);
    }
    star->seal();
    if (s.nodes > 1 && s.nics_per_node > 0) {
        LeafSpineZone* tree = leaf_spine_zone(s, prefix, holder);
        p->port = tree->port;
        for (int64_t slot : port_slots(s)) {
            p->nic.push_back(p->port[static_cast<size_t>(slot)]);
            p->nic_out.push_back(tree->port_up[static_cast<size_t>(slot)]);
            p->nic_in.push_back(tree->port_down[static_cast<size_t>(slot)]);
        }
        // Each leaf switch's links to and from the spines.
        const auto spines = static_cast<size_t>(s.spines);
        if (!tree->to_spine.empty()) {
            p->uplinks.resize(static_cast<size_t>(s.leaves()));
            for (size_t l = 0; l < p->uplinks.size(); ++l)
                for (size_t k = 0; k < spines; ++k) {
                    p->uplinks[l].push_back(tree->to_spine[l * spines + k]);
                    p->uplinks[l].push_back(tree->from_spine[l * spines + k]);
                }
        }
    }
    holder->seal();
    return p;
}

}  // namespace

FabricPlatform& fabric_platform(const FabricShape& shape) {
    // Never destroyed, like the SimGrid engine the zones live in (a zone outlives no engine and
    // SimGrid removes none): a map destroyed at exit would leave the detached zones unreferenced,
    // which LeakSanitizer reports as leaked.
    static auto* built = new std::map<std::string, std::unique_ptr<FabricPlatform>>();
    auto& slot = (*built)[shape.key()];
    if (!slot) slot = build(shape, "fabric" + std::to_string(built->size()));
    return *slot;
}

}  // namespace zerosim
