// Hosts for ranks simulated together: one rank per pipeline stage, each with its own links and
// peers (engine_platform.hpp), in a zone of its own under the process's root, built once per shape
// (stage count and which neighbours share a node) and reused by every later simulation.
#include <map>
#include <string>

#include "engine_platform.hpp"
#include "fabric_platform.hpp"

namespace zerosim {

namespace {

RankHosts make_rank(simgrid::s4u::NetZone* zone, const std::string& name) {
    RankHosts h;
    h.rank = zone->create_host(name, 1e9)->seal();
    h.intra_peer = zone->create_host(name + ".intra_peer", 1e9)->seal();
    h.inter_peer = zone->create_host(name + ".inter_peer", 1e9)->seal();
    h.intra = zone->create_link(name + ".intra", 1e9)->set_latency(0)->seal();
    h.nic = zone->create_link(name + ".nic", 1e9)->set_latency(0)->seal();
    h.fabric = zone->create_link(name + ".fabric", 1e9)->set_latency(0)->seal();
    zone->add_route(h.rank->get_netpoint(), h.intra_peer->get_netpoint(), nullptr, nullptr,
                    {simgrid::s4u::LinkInRoute(h.intra)}, false);
    zone->add_route(h.rank->get_netpoint(), h.inter_peer->get_netpoint(), nullptr, nullptr,
                    {simgrid::s4u::LinkInRoute(h.nic), simgrid::s4u::LinkInRoute(h.fabric)}, false);
    return h;
}

// A send from `from` to `to` leaves over the sender's own path.
void route_send(simgrid::s4u::NetZone* zone, const RankHosts& from, const RankHosts& to, bool same_node) {
    std::vector<simgrid::s4u::LinkInRoute> links;
    if (same_node)
        links = {simgrid::s4u::LinkInRoute(from.intra)};
    else
        links = {simgrid::s4u::LinkInRoute(from.nic), simgrid::s4u::LinkInRoute(from.fabric)};
    zone->add_route(from.rank->get_netpoint(), to.rank->get_netpoint(), nullptr, nullptr, links, false);
}

}  // namespace

const std::vector<RankHosts>& stage_hosts(const std::vector<bool>& next_on_same_node) {
    // Never destroyed, like the SimGrid engine the zones live in (SimGrid removes no zone): a map
    // destroyed at exit would leave the detached zones unreferenced, which LeakSanitizer reports as
    // leaked (fabric_platform.cpp keeps its platforms the same way).
    static auto* built = new std::map<std::vector<bool>, std::vector<RankHosts>>();
    static auto* zones = new std::vector<simgrid::s4u::NetZone*>();
    auto it = built->find(next_on_same_node);
    if (it != built->end()) return it->second;
    std::string shape = "stages";
    for (bool same : next_on_same_node) shape += same ? "-n" : "-x";   // n: next on this node, x: on another
    engine_root_zone();   // the engine and its models first: a zone made before them would set other ones
    auto* zone = with_root_models(simgrid::s4u::create_full_zone(shape));   // beside the sealed root
    std::vector<RankHosts> ranks;
    for (size_t k = 0; k <= next_on_same_node.size(); ++k) ranks.push_back(make_rank(zone, shape + ".stage" + std::to_string(k)));
    for (size_t k = 0; k < next_on_same_node.size(); ++k) {
        route_send(zone, ranks[k], ranks[k + 1], next_on_same_node[k]);
        route_send(zone, ranks[k + 1], ranks[k], next_on_same_node[k]);
    }
    zone->seal();
    zones->push_back(zone);
    return built->emplace(next_on_same_node, std::move(ranks)).first->second;
}

}  // namespace zerosim
