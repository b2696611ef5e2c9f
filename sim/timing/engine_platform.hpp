// The engine's SimGrid hosts and links (private to sim/timing). A simulated rank is a host with
// two peers: one behind its intra-node link (NVLink, NVSwitch, PCIe or shared memory), one behind
// its share of the node's NICs and the fabric above them. A collective is a latency and at most
// two flows to those peers (engine.cpp run_collective). Ranks simulated together (one per pipeline
// stage) each have their own hosts and links, and a route to the ranks of the stages beside them.
#pragma once

#include <simgrid/s4u.hpp>

#include <vector>

#include "timing/collectives.hpp"

namespace zerosim {

struct RankHosts {
    simgrid::s4u::Host* rank = nullptr;
    simgrid::s4u::Host* intra_peer = nullptr;
    simgrid::s4u::Host* inter_peer = nullptr;
    simgrid::s4u::Link* intra = nullptr;   // this rank's NVLink / NVSwitch / PCIe / shared-memory path
    simgrid::s4u::Link* nic = nullptr;     // its share of the node's NICs
    simgrid::s4u::Link* fabric = nullptr;  // its share of the fabric above the leaf switches
};

// The representative rank of the process's platform (engine.cpp).
const RankHosts& representative_hosts();

// The capacities of one rank's links for a simulation (SimGrid keeps one platform per process;
// simulations follow each other on its clock, each setting the capacities it needs).
void set_link_capacities(const RankHosts& h, const LinkCapacities& c);

// One rank per pipeline stage, in stage order. `next_on_same_node[k]` says whether stage k's rank
// and stage k+1's share a node: their sends go over the sender's intra link then, else over its
// NIC share and the fabric (a NIC is full duplex: a send loads the sender's outbound path; the
// receiver's inbound path is not a bottleneck of its own). Built once per shape (stage_platform.cpp).
const std::vector<RankHosts>& stage_hosts(const std::vector<bool>& next_on_same_node);

}  // namespace zerosim
