// Fabric mode's SimGrid platform (private to sim/timing; timing/fabric.hpp is the public side).
//
// Every GPU is a host on its node's NVSwitch: one star zone whose centre is the switch and whose
// spokes are each GPU's NVLink port, one link per direction. Only GPUs of one node ever exchange
// flows there, so one star stands for every node's switch (a non-blocking crossbar: only the ports
// limit). Every NIC is a host at a leaf port of the fat tree: its link to the leaf switch is
// the NIC's port; the leaf switches connect to spine switches, one link to each, and fewer spines
// than a leaf's ports is the oversubscription (a 2:1 leaf of 32 ports has 16 uplinks). The routing
// is SimGrid FatTreeZone's (d-mod-k), in a zone that builds in linear time (fabric_platform.cpp:
// LeafSpineZone; FatTreeZone's build is quadratic). NVLink and network flows never share a link: NCCL's
// PXN forwards over NVLink to the GPU beside the NIC, and the PCIe hop is left out.
#pragma once

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim {

// The SimGrid root zone of the process (engine.cpp): fabric platforms take its models.
simgrid::s4u::NetZone* engine_root_zone();
// `zone`, given no parent, with the root zone's models: the root is sealed by the engine's first run
// and takes no new children, so later platforms (a fabric, a pipeline's stages) stand beside it.
// Call engine_root_zone() before making `zone`: the engine must exist, with its models, first.
simgrid::s4u::NetZone* with_root_models(simgrid::s4u::NetZone* zone);

struct FabricShape {
    int64_t nodes = 1;
    int64_t gpus_per_node = 1;
    int64_t nics_per_node = 0;       // 0: one node, no network
    int64_t nodes_per_leaf = 1;      // nodes under one leaf switch (a rail-optimised leaf: one NIC of each)
    int64_t spines = 1;              // spine switches = uplinks of each leaf
    bool rail_optimized = false;
    std::vector<int64_t> leaf_of_node;   // placement (empty: node n under leaf n / nodes_per_leaf)
    int64_t leaves() const;
    int64_t leaf_ports() const;      // NIC ports under one leaf switch
    std::string key() const;
    std::string placement_key() const;
};

struct FabricPlatform {
    FabricShape shape;
    std::vector<simgrid::s4u::Host*> gpu;                // node * gpus_per_node + local
    std::vector<simgrid::s4u::Link*> gpu_out, gpu_in;    // the GPU's NVLink port, each direction
    std::vector<simgrid::s4u::Host*> port;               // the fat tree's leaf ports: leaf * leaf_ports() + position
    std::vector<simgrid::s4u::Host*> nic;                // node * nics_per_node + j (each a port)
    std::vector<simgrid::s4u::Link*> nic_out, nic_in;    // the NIC's port on its leaf switch
    std::vector<std::vector<simgrid::s4u::Link*>> uplinks;   // per leaf switch: its links to and from the spines
};

// The platform of this shape, built once per process (SimGrid cannot remove a platform; link
// capacities are set by each use).
FabricPlatform& fabric_platform(const FabricShape& shape);

// Runs the flows (source host, destination host, bytes) concurrently on the current link
// capacities, to completion; returns the time the last one ends. In time about linear in the flows
// (fabric_run.cpp), apart from SimGrid's sharing solved again at each distinct end time.
struct FabricFlow {
    simgrid::s4u::Host* from = nullptr;
    simgrid::s4u::Host* to = nullptr;
    double bytes = 0;
};
double run_fabric_flows(const std::vector<FabricFlow>& flows);

}  // namespace zerosim
