// FabricModel's state (private to sim/timing): the platform, the link capacities this model gives
// it (nominal, then the what-ifs), and the factors simulated so far.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fabric_platform.hpp"
#include "schedule/mesh.hpp"
#include "timing/fabric.hpp"

namespace zerosim {

struct FabricModel::Impl {
    Topology ideal;                  // the NCCL plans' topology: oversubscription left to the flows
    FabricPlatform* platform = nullptr;
    int64_t world = 1;
    double gpu_capacity = 1e9;       // nominal NVLink port, B/s (the representative model's)
    double nic_capacity = 1e9;       // nominal NIC port, B/s
    double uplink_capacity = 1e9;    // one leaf-to-spine link, B/s, before the background load
    std::vector<double> gpu_share, nic_share, leaf_share;   // what-ifs: a share of the nominal bandwidth
    std::vector<int64_t> nics_on_node;   // mixed node designs: NICs each node has (its first ones)
    double background_load = 0;      // share of every spine link other jobs take
    double compute_slowdown = 1.0;
    std::map<std::string, FabricFactors> cache;
    std::vector<std::string> lines;
    int simulations = 0;

    // Gives the platform this model's capacities (another model may have used it since).
    void apply() const;
    int64_t node_of(int rank) const { return zerosim::node_of(rank, ideal.gpus_per_node); }   // schedule/mesh.hpp
    int64_t nic_of(int rank) const;          // global NIC index of the NIC the rank's traffic leaves by
    int64_t design_nic_of(int rank) const;   // the same on the node design (every node with all its NICs)
};

}  // namespace zerosim
