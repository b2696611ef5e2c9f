// Fabric mode's platform (fabric_platform.hpp): built with SimGrid's own zones, routed by them.
#include "fabric_platform.hpp"

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

namespace {

// The fat tree's leaf (a NIC port) for NIC j of node n. A plain fat tree puts a node's NICs side by
// side on its leaf switch; a rail-optimised one puts NIC j of every node of a group on leaf switch j
// of that group, so a ring on one rail stays under one switch.
int64_t slot_of(const FabricShape& s, int64_t node, int64_t j) {
    int64_t group = node / s.nodes_per_leaf, pos = node % s.nodes_per_leaf;
    if (!s.leaf_of_node.empty()) {   // placed: the node's leaf, and its place among that leaf's nodes
        group = s.leaf_of_node[static_cast<size_t>(node)];
        pos = std::count(s.leaf_of_node.begin(), s.leaf_of_node.begin() + node, group);
    }
    if (s.rail_optimized) return (group * s.nics_per_node + j) * s.nodes_per_leaf + pos;
    return (group * s.nodes_per_leaf + pos) * s.nics_per_node + j;
}

std::vector<sg::Link*> route(sg::Host* a, sg::Host* b) {
    std::vector<sg::Link*> links;
    double latency = 0;
    a->route_to(b, links, &latency);
    return links;
}

// A zone with no parent, holding a fabric: the engine's root zone is sealed by its first run and
// takes no new children, so a fabric platform hangs beside it with the root's models.
sg::NetZone* detached_zone(const std::string& name) {
    auto* root = engine_root_zone()->get_impl();
    auto* z = sg::create_empty_zone(name);
    auto* impl = z->get_impl();
    impl->set_network_model(root->get_network_model());
    impl->set_cpu_pm_model(root->get_cpu_pm_model());
    impl->set_cpu_vm_model(root->get_cpu_vm_model());
    impl->set_disk_model(root->get_disk_model());
    impl->set_host_model(root->get_host_model());
    return z;
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
        auto* h = star->create_host(prefix + ".gpu" + std::to_string(i), 1e9)->seal();
        auto* out = star->create_link(prefix + ".gpu" + std::to_string(i) + ".out", 1e9)->set_latency(0)->seal();
        auto* in = star->create_link(prefix + ".gpu" + std::to_string(i) + ".in", 1e9)->set_latency(0)->seal();
        star->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg::LinkInRoute(out)}, false);
        star->add_route(nullptr, h->get_netpoint(), nullptr, nullptr, {sg::LinkInRoute(in)}, false);
        p->gpu.push_back(h);
        p->gpu_out.push_back(out);
        p->gpu_in.push_back(in);
    }
    star->seal();
    if (s.nodes > 1 && s.nics_per_node > 0) {
        const auto ports = static_cast<unsigned>(s.leaf_ports()), leaves = static_cast<unsigned>(s.leaves());
        std::vector<sg::Host*> by_slot(static_cast<size_t>(s.leaf_ports() * s.leaves()), nullptr);
        auto leaf_cb = [&](sg::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
            auto* h = zone->create_host(prefix + ".port" + std::to_string(id), 1e9)->seal();
            if (id < by_slot.size()) by_slot[id] = h;
            return std::make_pair(h->get_netpoint(), static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
        };
        // One leaf switch: a one-level tree; more: leaves and spines, each leaf linked once to each spine.
        sg::FatTreeParams params = leaves == 1 ? sg::FatTreeParams(1, {ports}, {1}, {1})
                                               : sg::FatTreeParams(2, {ports, leaves}, {1, static_cast<unsigned>(s.spines)}, {1, 1});
        auto* tree = sg::create_fatTree_zone(prefix + ".fabric", holder, params, sg::ClusterCallbacks(leaf_cb), 1e9, 0,
                                             sg::Link::SharingPolicy::SPLITDUPLEX);
        tree->seal();
        for (int64_t n = 0; n < s.nodes; ++n)
            for (int64_t j = 0; j < s.nics_per_node; ++j) p->nic.push_back(by_slot[static_cast<size_t>(slot_of(s, n, j))]);
        // Each NIC's port: the first link of its routes out, the last of its routes in.
        for (size_t i = 0; i < p->nic.size(); ++i) {
            sg::Host* other = p->nic[i == 0 ? 1 : 0];
            p->nic_out.push_back(route(p->nic[i], other).front());
            p->nic_in.push_back(route(other, p->nic[i]).back());
        }
        // Each leaf switch's spine links, found on its routes to and from the next leaf's ports.
        if (leaves > 1) {
            p->uplinks.resize(leaves);
            for (unsigned l = 0; l < leaves; ++l) {
                const unsigned next = (l + 1) % leaves;
                std::vector<sg::Link*>& up = p->uplinks[l];
                for (unsigned k = 0; k < ports; ++k) {
                    auto a = route(by_slot[l * ports], by_slot[next * ports + k]);
                    auto b = route(by_slot[next * ports + k], by_slot[l * ports + (k % ports)]);
                    if (a.size() == 4) up.push_back(a[1]);
                    if (b.size() == 4) up.push_back(b[2]);
                }
                std::sort(up.begin(), up.end());
                up.erase(std::unique(up.begin(), up.end()), up.end());
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

double run_fabric_flows(const std::vector<FabricFlow>& flows) {
    if (flows.empty()) return 0;
    double elapsed = 0;
    sg::Actor::create("fabric-flows", flows.front().from, [&] {
        const double start = sg::Engine::get_clock();
        std::vector<sg::CommPtr> comms;
        comms.reserve(flows.size());
        for (const FabricFlow& f : flows)
            comms.push_back(sg::Comm::sendto_async(f.from, f.to, static_cast<uint64_t>(f.bytes)));
        sg::Comm::wait_all(comms);
        elapsed = sg::Engine::get_clock() - start;
    });
    sg::Engine::get_instance()->run();
    return elapsed;
}

}  // namespace zerosim
