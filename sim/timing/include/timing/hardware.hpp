// The machine, whoever runs collectives on it: nodes of identical GPUs, the intra-node fabric, the
// NICs and the inter-node fabric, device compute and the host. Read from the JSON files in
// topologies/ (topologies/README.md) together with the collective model's parameters; a Topology
// (timing/topology.hpp) is this plus those. Every figure in a file names its source.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"

namespace zerosim {

enum class IntraKind { NVSwitch, NVLinkMesh, PCIe, SharedMemory };
enum class FabricKind { FatTree, RailOptimized, None };
// The NICs' transport: InfiniBand verbs, RoCE (verbs over Ethernet), AWS EFA (libfabric through
// the aws-ofi-nccl plugin).
enum class NicKind { InfiniBand, RoCE, EFA };

struct Hardware {
    std::string name;
    std::string source;              // file it came from
    int64_t nodes = 1;
    int64_t gpus_per_node = 8;

    // Device.
    std::string gpu_name;
    std::map<std::string, double> peak_tflops;   // by dtype: fp32, tf32, fp16, bf16, fp64
    double mem_bandwidth_gbs = 0;                // HBM, GB/s
    double compute_efficiency = 0.5;             // achieved / peak for GEMMs
    double mem_efficiency = 0.8;
    double launch_overhead_us = 0;               // host-side cost of launching a collective kernel
    double gpu_memory_gb = 0;                    // device memory, GB (1e9 bytes); 0 = not given

    // Host, for stage 3's host timeline (topologies/README.md "host"; 0 = free).
    double host_hook_us = 0;           // one parameter-coordinator call (a module hook) on the host
    double host_kernel_launch_us = 0;  // launching one compute segment's kernels (backward: twice)
    // ZeRO-Offload (topologies/README.md "host"; 0 = free): one GPU's PCIe link to the host, one
    // direction, and the host's optimizer-state traffic per rank for DeepSpeed's CPU Adam.
    double host_pcie_gbs = 0;
    double host_cpu_adam_gbs = 0;
    double host_memory_gb = 0;         // a node's RAM, GB (1e9 bytes), for offloaded states; 0 = not given
    int compute_capability = 0;                  // SM version x10 (80 A100, 90 H100/H200, 100 B200); 0 = unknown

    // Intra-node fabric, per GPU.
    IntraKind intra = IntraKind::NVSwitch;
    double intra_bandwidth_gbs = 0;     // per direction, GB/s (e.g. 12 NVLink3 x 25 = 300)
    bool nvls = false;                  // NVSwitch in-switch reduction (NVLink SHARP)

    // NICs and inter-node fabric.
    int nics_per_node = 0;
    double nic_bandwidth_gbs = 0;       // per NIC, per direction, GB/s
    double nic_latency_us = 0;
    // The bulk protocols' call cost across nodes: a fixed time every collective that crosses nodes
    // with LL128 or Simple pays as run, beyond NCCL's own estimate (which its tuner never sees), so
    // it lengthens the call without moving NCCL's choice. Not derivable from NCCL's source
    // (docs/collectives.md §5, "The bulk call cost"); 0 = none, fitted by `zerosim calibrate` from
    // one nccl-tests table of the cluster.
    double nic_bulk_call_us = 0;
    // What one ring channel moves across nodes with LL128 or Simple, as bus bandwidth, GB/s: the
    // rings' ceiling beside the NICs', as run only (NCCL's tuner rates a ring on the NICs; its
    // per-channel tables cap LL128 and trees only). 0 = none. Measured per cluster, not derivable
    // from NCCL's source (docs/collectives.md §5, "A ring channel's rate"); fitted by `zerosim
    // calibrate` from a ring table.
    double ring_channel_gbs = 0;
    NicKind nic_kind = NicKind::InfiniBand;
    // Share of the line rate one transfer reaches (e.g. 48 of 50 GB/s on NDR); 1 = line rate.
    double nic_efficiency = 1.0;
    // The switches reduce in the network (SHARP) and CollNet is enabled: CollNet Direct/Chain.
    bool sharp = false;
    FabricKind fabric = FabricKind::None;
    int fabric_levels = 1;
    double oversubscription = 1.0;      // at the first level above the leaf switches
    int64_t nodes_per_leaf = 0;         // nodes under one leaf switch (0 = all)
    // Fabric mode (timing/fabric.hpp): the share of every spine link other jobs' traffic takes,
    // and the file's what-ifs ("whatif": {"degrade": {"node3.nic2": 0.5}, "straggler": {...}}).
    double background_spine_load = 0;
    std::vector<int64_t> leaf_of_node;  // fabric mode's placement: node n under leaf switch [n] (empty: n / nodes_per_leaf)
    std::vector<std::pair<std::string, double>> whatif_degrade, whatif_straggler;
    // Mixed node designs ("whatif": {"nodes": {"3": {"nics": 4, "nic_bandwidth_gbs": 25}}}): node 3
    // with fewer NICs (its GPUs share the ones left) or NICs of another speed; 0 = the design's.
    struct NodeDesign {
        int64_t node = 0;
        int nics = 0;
        double nic_bandwidth_gbs = 0;
    };
    std::vector<NodeDesign> whatif_nodes;

    int64_t total_gpus() const { return nodes * gpus_per_node; }
    // Per-GPU network bandwidth (GB/s): the node's NICs shared by its GPUs.
    double nic_bandwidth_per_gpu_gbs() const {
        return gpus_per_node > 0 ? nic_bandwidth_gbs * nics_per_node / static_cast<double>(gpus_per_node) : 0.0;
    }
    double peak_flops(DType t) const;   // FLOP/s for a training dtype
};

// The nodes `ranks` ranks placed node by node occupy (rank r on node r / gpus_per_node, as
// launchers place them): ceil(ranks / gpus_per_node), at least one. The one place the cost models,
// the fabric and the checks of a world's fit count them.
int64_t nodes_spanned(const Hardware& h, int64_t ranks);

}  // namespace zerosim
