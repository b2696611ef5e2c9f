// A cluster as the timing model sees it: nodes of identical GPUs, the intra-node fabric, the NICs
// and the inter-node fabric, device compute, and NCCL-level terms. Read from the JSON files in
// topologies/ (documented in topologies/README.md); every figure there names its source.
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "timing/nccl_version.hpp"

namespace zerosim {

enum class IntraKind { NVSwitch, NVLinkMesh, PCIe, SharedMemory };
enum class FabricKind { FatTree, RailOptimized, None };
// The NICs' transport: InfiniBand verbs, RoCE (verbs over Ethernet), AWS EFA (libfabric through
// the aws-ofi-nccl plugin).
enum class NicKind { InfiniBand, RoCE, EFA };

struct Topology {
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
    int compute_capability = 0;                  // SM version x10 (80 A100, 90 H100/H200, 100 B200); 0 = unknown

    // Intra-node fabric, per GPU.
    IntraKind intra = IntraKind::NVSwitch;
    double intra_bandwidth_gbs = 0;     // per direction, GB/s (e.g. 12 NVLink3 x 25 = 300)
    int intra_channels = 1;             // NCCL rings (channels) over it, e.g. one per NVLink
    double channel_bandwidth_gbs = 0;   // NCCL's per-channel bandwidth for this link type
    bool nvls = false;                  // NVSwitch in-switch reduction (NVLink SHARP)
    double nvls_efficiency = 0.85;

    // NICs and inter-node fabric.
    int nics_per_node = 0;
    double nic_bandwidth_gbs = 0;       // per NIC, per direction, GB/s
    double nic_latency_us = 0;
    NicKind nic_kind = NicKind::InfiniBand;
    // Share of the line rate one NCCL transfer reaches (e.g. 48 of 50 GB/s on NDR); 1 = line rate.
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

    // The NCCL release whose tuner is predicted (--nccl overrides) and whether AWS's tuner plugin
    // (aws-ofi-nccl >= 1.9) replaces NCCL's choice across nodes.
    NcclVersion nccl_version;
    bool aws_tuner = false;

    // Overrides of NCCL's latency table, for fabrics NCCL does not describe (MPI over shared
    // memory on localhost): per-step and base latency in µs; 0 = NCCL's figure for the link.
    double intra_step_latency_us = 0;
    double base_latency_us = 0;
    // Who runs the collectives: NCCL (its tuner picks ring/tree/NVLS), or OpenMPI 4.1's coll/tuned
    // over shared memory (intra_node "collectives": "openmpi-4.1-tuned"; timing/mpi_transport.hpp).
    bool openmpi_tuned = false;
    // With openmpi_tuned: the shared-memory BTL's eager limit (OpenMPI 4.1 vader: btl_vader_eager_limit,
    // 4096 by default, `ompi_info --param btl vader --level 9`) and the latency a step pays when its
    // message does not fit an eager fragment (the rendezvous and single-copy handshake); 0 = none.
    double intra_eager_limit_bytes = 0;
    double intra_rendezvous_latency_us = 0;
    // With openmpi_tuned: the cache one rank's buffers fit in (a core's L2; 0 = not modelled). A
    // call whose buffers outgrow it moves the share beyond at the memory's pace, fitted by
    // calibrate as memory_scale (timing/mpi_transport.hpp).
    double intra_cache_bytes = 0;

    // Calibration terms (fitted by `zerosim calibrate`; 1.0 = the hardware figures as they are):
    // global ones, and per collective (nccl-tests name) where the measurements told them apart.
    double bandwidth_scale = 1.0;
    double latency_scale = 1.0;
    double rendezvous_scale = 0;   // of intra_rendezvous_latency_us; 0 = the latency scale's
    double memory_scale = 0;       // of the bandwidth beyond intra_cache_bytes; 0 = the bandwidth scale's
    struct Scales {
        double bandwidth = 1.0, latency = 1.0;
        double rendezvous = 0;     // 0: scaled as the other latencies (a fit that could not tell them apart)
        double memory = 0;         // 0: the bytes beyond the cache at the same bandwidth
        double rendezvous_or_latency() const { return rendezvous > 0 ? rendezvous : latency; }
        double memory_or_bandwidth() const { return memory > 0 ? memory : bandwidth; }
    };
    std::map<std::string, Scales> collective_scales;
    Scales scales_for(const std::string& collective) const {
        auto it = collective_scales.find(collective);
        return it == collective_scales.end() ? Scales{bandwidth_scale, latency_scale, rendezvous_scale, memory_scale} : it->second;
    }
    double max_bandwidth_scale() const {
        double m = bandwidth_scale;
        for (const auto& [k, v] : collective_scales) m = std::max(m, v.bandwidth);
        return m;
    }

    int64_t total_gpus() const { return nodes * gpus_per_node; }
    // Per-GPU network bandwidth (GB/s): the node's NICs shared by its GPUs.
    double nic_bandwidth_per_gpu_gbs() const {
        return gpus_per_node > 0 ? nic_bandwidth_gbs * nics_per_node / static_cast<double>(gpus_per_node) : 0.0;
    }
    double peak_flops(DType t) const;   // FLOP/s for a training dtype
};

// Reads a topology file; `nodes_override` > 0 scales the node design to that many nodes.
Result<Topology> load_topology(const std::string& path, int64_t nodes_override = 0);
Result<Topology> parse_topology(const std::string& file_name, const std::string& text, int64_t nodes_override = 0);
// A parsed node design scaled to `nodes` (--nodes), refused as parse_topology refuses it when the
// nodes would be disconnected.
Result<Topology> scale_to_nodes(const Topology& t, int64_t nodes);

// `world` ranks placed node by node need that many GPUs; more is an error naming --world and the
// --nodes that would hold them (predict, bench, report and the engine say it the same way).
Status check_world_fits(const Topology& t, int64_t world);
// The ranks a command runs: `asked`, or every GPU of the topology when `asked` is 0 or less; checked
// with check_world_fits.
Result<int64_t> world_on(const Topology& t, int64_t asked);

}  // namespace zerosim
