#include "timing/topology.hpp"

#include "schedule/mesh.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "core/json_input.hpp"
#include "timing/collective_model.hpp"

namespace zerosim {

double Hardware::peak_flops(DType t) const {
    // Training GEMMs in fp32 run as TF32 on tensor cores where the GPU has them (PyTorch's
    // default for cuDNN; matmul needs allow_tf32) - use fp32 unless the file gives tf32.
    const char* key = t == DType::FP16 ? "fp16" : t == DType::BF16 ? "bf16" : "fp32";
    auto it = peak_tflops.find(key);
    if (it == peak_tflops.end()) it = peak_tflops.find("fp32");
    return it == peak_tflops.end() ? 0.0 : it->second * 1e12;
}

namespace {

// Unknown keys are errors in a topology (a typo would silently leave a default in place); the
// message suggests the closest known key.
void check_keys(const JsonField& obj, const std::set<std::string>& known) {
    obj.expect_object();
    for (auto it = obj.raw().begin(); it != obj.raw().end(); ++it) {
        if (known.count(it.key())) continue;
        std::string best = closest_key(it.key(), std::vector<std::string>(known.begin(), known.end()));
        std::string hint = best.empty() ? "" : "; did you mean '" + best + "'?";
        fail(obj.file(), obj.child_path(it.key()), "unknown key" + hint);
    }
}

// Every figure of a topology is a physical quantity in the range a real device has
// (topologies/README.md, "Bounds"): a bandwidth of 1e308 GB/s or an efficiency of 1.5 is a typo or
// an attack, never hardware, and would reach SimGrid as a rate it aborts on. One table for all.
enum class Figure { Efficiency, Bandwidth, BandwidthOrOff, Latency, Tflops, MemoryGb, Scale, Bytes };
struct FigureBounds {
    double lo, hi;
    bool lo_open;      // (lo, hi] rather than [lo, hi]
    const char* what;  // "a bandwidth in GB/s"
};
constexpr FigureBounds kFigureBounds[] = {
    {0, 1, true, "a share of the device's peak"},                                   // Efficiency
    {0, 1e5, true, "a bandwidth in GB/s (100 TB/s is above any HBM or link today)"},  // Bandwidth
    {0, 1e5, false, "a bandwidth (0: none)"},                                        // BandwidthOrOff
    {0, 1e6, false, "a latency in us (at most a second)"},                           // Latency
    {0, 1e5, true, "a peak in TFLOP/s"},                                             // Tflops
    {0, 1e5, true, "a memory size in GB"},                                           // MemoryGb
    {1e-3, 1e3, false, "a calibration scale"},                                       // Scale
    {0, 1e12, true, "a size in bytes"},                                              // Bytes
};

double figure(const JsonField& f, Figure kind) {
    const FigureBounds& b = kFigureBounds[static_cast<int>(kind)];
    double v = f.as_number();
    if (!(b.lo_open ? v > b.lo : v >= b.lo) || !(v <= b.hi)) {
        char range[96];
        std::snprintf(range, sizeof range, "%s%g, %g]", b.lo_open ? "(" : "[", b.lo, b.hi);
        f.fail_here(std::string("expected ") + b.what + " in " + range + ", found " + f.raw().dump());
    }
    return v;
}

int64_t positive_int(const JsonField& f) {
    int64_t v = f.as_integer();
    if (v <= 0) f.fail_here("expected a positive whole number, found " + f.raw().dump());
    return v;
}

// nics.gpu_affinity: one list per NIC of the GPUs on its PCIe switch, e.g. [[0], [1], ...] for a
// DGX (a NIC per GPU) or [[0, 1], [2, 3], ...] for two GPUs to a NIC. Every GPU must reach a NIC.
// Checked only: the timing does not depend on it, because NCCL spreads its channels over all of a
// node's NICs and (PXN, on by default) forwards over NVLink to the GPU next to the NIC, so a GPU's
// share is the node's NIC bandwidth over its GPUs either way.
void check_nic_gpu_affinity(const JsonField& f, const Topology& t) {
    f.expect_array();
    if (static_cast<int64_t>(f.size()) != t.nics_per_node)
        f.fail_here("expected one list of GPU indices per NIC (" + std::to_string(t.nics_per_node) + "), found " +
                    std::to_string(f.size()));
    std::vector<bool> reached(static_cast<size_t>(t.gpus_per_node), false);
    for (size_t i = 0; i < f.size(); ++i) {
        JsonField nic = f.at(i);
        nic.expect_array();
        for (size_t j = 0; j < nic.size(); ++j) {
            int64_t g = nic.at(j).as_integer();
            if (g < 0 || g >= t.gpus_per_node)
                nic.at(j).fail_here("expected a GPU index from 0 to " + std::to_string(t.gpus_per_node - 1) + ", found " +
                                    std::to_string(g));
            reached[static_cast<size_t>(g)] = true;
        }
    }
    for (size_t g = 0; g < reached.size(); ++g)
        if (!reached[g]) f.fail_here("GPU " + std::to_string(g) + " is on no NIC's list: every GPU needs a NIC it reaches");
}

// NCCL's tables are indexed by GPU generation (Volta, Ampere, Hopper, Blackwell); a file that
// does not say takes it from the GPU's name.
int compute_capability_of(const std::string& gpu) {
    if (gpu.find("A100") != std::string::npos || gpu.find("A800") != std::string::npos) return 80;
    if (gpu.find("H100") != std::string::npos || gpu.find("H200") != std::string::npos || gpu.find("H800") != std::string::npos) return 90;
    if (gpu.find("B200") != std::string::npos || gpu.find("B100") != std::string::npos || gpu.find("B300") != std::string::npos) return 100;
    if (gpu.find("V100") != std::string::npos) return 70;
    return 0;
}

}  // namespace

namespace {

// More than one node needs NICs and an inter-node network.
Status disconnected(const Topology& t) {
    if (t.nodes > 1 && (t.nics_per_node == 0 || t.fabric == FabricKind::None))
        return Error{t.source, t.nics_per_node == 0 ? "nics" : "network",
                     std::to_string(t.nodes) + " nodes but no " + (t.nics_per_node == 0 ? "NICs" : "inter-node network") +
                         ": the nodes would be disconnected"};
    return std::nullopt;
}

}  // namespace

Result<Topology> scale_to_nodes(const Topology& t, int64_t nodes) {
    Topology scaled = t;
    scaled.nodes = nodes;
    if (auto e = disconnected(scaled)) return *e;
    return scaled;
}

namespace {

void read_gpu_section(const JsonField& gpu, Topology& t) {
    check_keys(gpu, {"name", "peak_tflops", "memory_bandwidth_gbs", "compute_efficiency", "memory_efficiency",
                     "launch_overhead_us", "memory_gb", "compute_capability"});
    if (gpu.has("name")) t.gpu_name = gpu.at("name").as_string();
    t.compute_capability = gpu.has("compute_capability") ? static_cast<int>(positive_int(gpu.at("compute_capability")))
                                                         : compute_capability_of(t.gpu_name);
    auto peak = gpu.at("peak_tflops");
    check_keys(peak, {"fp32", "tf32", "fp16", "bf16", "fp64"});
    for (auto it = peak.raw().begin(); it != peak.raw().end(); ++it)
        t.peak_tflops[it.key()] = figure(peak.at(it.key()), Figure::Tflops);
    t.mem_bandwidth_gbs = figure(gpu.at("memory_bandwidth_gbs"), Figure::Bandwidth);
    if (gpu.has("compute_efficiency")) t.compute_efficiency = figure(gpu.at("compute_efficiency"), Figure::Efficiency);
    if (gpu.has("memory_efficiency")) t.mem_efficiency = figure(gpu.at("memory_efficiency"), Figure::Efficiency);
    if (gpu.has("launch_overhead_us")) t.launch_overhead_us = figure(gpu.at("launch_overhead_us"), Figure::Latency);
    if (gpu.has("memory_gb")) t.gpu_memory_gb = figure(gpu.at("memory_gb"), Figure::MemoryGb);
}

IntraKind intra_kind_of(const JsonField& f) {
    std::string kind = f.as_string();
    if (kind == "nvswitch") return IntraKind::NVSwitch;
    if (kind == "nvlink_mesh") return IntraKind::NVLinkMesh;
    if (kind == "pcie") return IntraKind::PCIe;
    if (kind == "shared_memory") return IntraKind::SharedMemory;
    f.fail_here("expected nvswitch, nvlink_mesh, pcie or shared_memory, found \"" + kind + "\"");
}

void read_intra_node_section(const JsonField& intra, Topology& t) {
    check_keys(intra, {"kind", "bandwidth_gbs", "nccl_channels", "nccl_channel_bandwidth_gbs", "nvls", "nvls_efficiency",
                       "step_latency_us", "base_latency_us", "collectives", "eager_limit_bytes", "rendezvous_latency_us", "cache_bytes_per_rank"});
    t.intra = intra_kind_of(intra.at("kind"));
    t.intra_bandwidth_gbs = figure(intra.at("bandwidth_gbs"), Figure::Bandwidth);
    t.intra_channels = static_cast<int>(intra.has("nccl_channels") ? positive_int(intra.at("nccl_channels")) : 1);
    t.channel_bandwidth_gbs = intra.has("nccl_channel_bandwidth_gbs") ? figure(intra.at("nccl_channel_bandwidth_gbs"), Figure::Bandwidth)
                                                                      : t.intra_bandwidth_gbs / t.intra_channels;
    if (intra.has("nvls")) t.nvls = intra.at("nvls").as_bool();
    if (t.nvls && t.intra != IntraKind::NVSwitch) intra.at("nvls").fail_here("NVLS needs an NVSwitch fabric (kind nvswitch)");
    if (intra.has("nvls_efficiency")) t.nvls_efficiency = figure(intra.at("nvls_efficiency"), Figure::Efficiency);
    if (intra.has("step_latency_us")) t.intra_step_latency_us = figure(intra.at("step_latency_us"), Figure::Latency);
    if (intra.has("base_latency_us")) t.base_latency_us = figure(intra.at("base_latency_us"), Figure::Latency);
    if (intra.has("collectives")) {
        std::string c = intra.at("collectives").as_string();
        const CollectiveModel* model = collective_model_named(c);
        if (model && model->runs_on(t)) t.collective_model = c;
        else intra.at("collectives").fail_here("expected " + collective_model_choices());
    }
    for (const char* key : {"eager_limit_bytes", "rendezvous_latency_us", "cache_bytes_per_rank"})
        if (intra.has(key) && t.collective_model != kOpenMpiTunedModelName)
            intra.at(key).fail_here("describes OpenMPI's shared-memory transport: only with \"collectives\": \"openmpi-4.1-tuned\"");
    if (intra.has("eager_limit_bytes")) t.intra_eager_limit_bytes = figure(intra.at("eager_limit_bytes"), Figure::Bytes);
    if (intra.has("rendezvous_latency_us")) t.intra_rendezvous_latency_us = figure(intra.at("rendezvous_latency_us"), Figure::Latency);
    if (intra.has("cache_bytes_per_rank")) t.intra_cache_bytes = figure(intra.at("cache_bytes_per_rank"), Figure::Bytes);
}

void read_nics_section(const JsonField& nics, Topology& t) {
    check_keys(nics, {"per_node", "bandwidth_gbs", "latency_us", "bulk_call_us", "ring_channel_gbs", "gpu_affinity", "kind", "efficiency", "sharp", "rails"});
    t.nics_per_node = static_cast<int>(positive_int(nics.at("per_node")));
    t.nic_bandwidth_gbs = figure(nics.at("bandwidth_gbs"), Figure::Bandwidth);
    if (nics.has("kind")) {
        std::string k = nics.at("kind").as_string();
        if (k == "infiniband") t.nic_kind = NicKind::InfiniBand;
        else if (k == "roce") t.nic_kind = NicKind::RoCE;
        else if (k == "efa") t.nic_kind = NicKind::EFA;
        else nics.at("kind").fail_here("expected infiniband, roce or efa, found \"" + k + "\"");
    }
    if (nics.has("efficiency")) {
        t.nic_efficiency = figure(nics.at("efficiency"), Figure::Efficiency);
    }
    if (nics.has("sharp")) t.sharp = nics.at("sharp").as_bool();
    // Rails: NICs on separate leaf switches; recorded, not timed (NCCL keeps each channel on
    // one rail, so rings and trees see one NIC's bandwidth per channel either way).
    if (nics.has("rails")) positive_int(nics.at("rails"));
    if (nics.has("latency_us")) t.nic_latency_us = figure(nics.at("latency_us"), Figure::Latency);
    if (nics.has("bulk_call_us")) t.nic_bulk_call_us = figure(nics.at("bulk_call_us"), Figure::Latency);
    if (nics.has("ring_channel_gbs")) t.ring_channel_gbs = figure(nics.at("ring_channel_gbs"), Figure::Bandwidth);
    if (nics.has("gpu_affinity")) check_nic_gpu_affinity(nics.at("gpu_affinity"), t);
}

// network.placement: one leaf switch index per node (fabric mode).
void read_leaf_placement(const JsonField& pl, Topology& t) {
    pl.expect_array();
    for (size_t i = 0; i < pl.size(); ++i) {
        int64_t leaf = pl.at(i).as_integer();
        if (leaf < 0) pl.at(i).fail_here("expected a leaf switch index (0 or more), found " + std::to_string(leaf));
        t.leaf_of_node.push_back(leaf);
    }
}

void read_network_section(const JsonField& net, Topology& t) {
    check_keys(net, {"kind", "levels", "oversubscription", "nodes_per_leaf", "background_spine_load", "placement"});
    std::string k = net.at("kind").as_string();
    if (k == "fat_tree")
        t.fabric = FabricKind::FatTree;
    else if (k == "rail_optimized")
        t.fabric = FabricKind::RailOptimized;
    else
        net.at("kind").fail_here("expected fat_tree or rail_optimized, found \"" + k + "\"");
    if (net.has("levels")) t.fabric_levels = static_cast<int>(positive_int(net.at("levels")));
    if (net.has("oversubscription")) {
        t.oversubscription = net.at("oversubscription").as_number();
        if (!(t.oversubscription >= 1.0 && t.oversubscription <= 1e3))
            net.at("oversubscription").fail_here("expected 1 (non-blocking) to 1000, found " + net.at("oversubscription").raw().dump());
    }
    if (net.has("nodes_per_leaf")) t.nodes_per_leaf = positive_int(net.at("nodes_per_leaf"));
    if (net.has("placement")) read_leaf_placement(net.at("placement"), t);
    if (net.has("background_spine_load")) {
        t.background_spine_load = net.at("background_spine_load").as_number();
        if (!(t.background_spine_load >= 0.0 && t.background_spine_load < 1.0))
            net.at("background_spine_load").fail_here("expected the share of the spine other traffic takes, from 0 to below 1");
    }
}

void read_nccl_section(const JsonField& nccl, Topology& t) {
    check_keys(nccl, {"version", "tuner"});
    if (nccl.has("version")) {
        auto v = NcclVersion::parse(nccl.at("version").as_string());
        if (!v) nccl.at("version").fail_here(std::string("expected an NCCL release, ") + known_nccl_versions());
        t.nccl_version = *v;
    }
    if (nccl.has("tuner")) {
        std::string k = nccl.at("tuner").as_string();
        if (k == "aws-ofi") t.aws_tuner = true;
        else if (k != "nccl") nccl.at("tuner").fail_here("expected nccl or aws-ofi, found \"" + k + "\"");
    }
}

// whatif.degrade / whatif.straggler: a share of the nominal figure per target.
void read_whatif_shares(const JsonField& list, std::vector<std::pair<std::string, double>>& into) {
    list.expect_object();
    for (auto it = list.raw().begin(); it != list.raw().end(); ++it) {
        double share = figure(list.at(it.key()), Figure::Efficiency);
        into.push_back({it.key(), share});
    }
}

// whatif.nodes: mixed node designs; the node numbers are checked against --nodes there.
void read_whatif_node_designs(const JsonField& nodes, Topology& t) {
    nodes.expect_object();
    for (auto it = nodes.raw().begin(); it != nodes.raw().end(); ++it) {
        auto one = nodes.at(it.key());
        const std::string& k = it.key();
        if (k.empty() || k.size() > 9 || k.find_first_not_of("0123456789") != std::string::npos)
            one.fail_here("expected a node number (e.g. \"3\") as the key, found '" + k + "'");
        check_keys(one, {"nics", "nic_bandwidth_gbs"});
        Topology::NodeDesign d;
        d.node = std::stoll(k);
        if (one.has("nics")) {
            const int64_t n = positive_int(one.at("nics"));
            if (n > t.nics_per_node)
                one.at("nics").fail_here("expected 1 to " + std::to_string(t.nics_per_node) +
                                         " NICs (nics.per_node: the node design's), found " + std::to_string(n));
            d.nics = static_cast<int>(n);
        }
        if (one.has("nic_bandwidth_gbs")) d.nic_bandwidth_gbs = figure(one.at("nic_bandwidth_gbs"), Figure::Bandwidth);
        t.whatif_nodes.push_back(d);
    }
}

// Fabric mode's what-ifs (docs/fabric.md); targets checked there.
void read_whatif_section(const JsonField& w, Topology& t) {
    check_keys(w, {"degrade", "straggler", "nodes"});
    if (w.has("degrade")) read_whatif_shares(w.at("degrade"), t.whatif_degrade);
    if (w.has("straggler")) read_whatif_shares(w.at("straggler"), t.whatif_straggler);
    if (w.has("nodes")) read_whatif_node_designs(w.at("nodes"), t);
}

// Stage 3's parameter coordinator on the host (topologies/README.md).
void read_host_section(const JsonField& host, Topology& t) {
    check_keys(host, {"hook_us", "kernel_launch_us", "pcie_gbps", "cpu_adam_gbs", "memory_gb"});
    if (host.has("memory_gb")) t.host_memory_gb = figure(host.at("memory_gb"), Figure::MemoryGb);
    if (host.has("pcie_gbps")) t.host_pcie_gbs = figure(host.at("pcie_gbps"), Figure::BandwidthOrOff) / 8.0;   // Gb/s -> GB/s
    if (host.has("cpu_adam_gbs")) t.host_cpu_adam_gbs = figure(host.at("cpu_adam_gbs"), Figure::BandwidthOrOff);
    if (host.has("hook_us")) t.host_hook_us = figure(host.at("hook_us"), Figure::Latency);
    if (host.has("kernel_launch_us")) t.host_kernel_launch_us = figure(host.at("kernel_launch_us"), Figure::Latency);
}

void read_calibration_section(const JsonField& cal, Topology& t) {
    check_keys(cal, {"bandwidth_scale", "latency_scale", "rendezvous_scale", "memory_scale", "fitted_from", "column",
                     "per_collective", "fit"});
    if (cal.has("bandwidth_scale")) t.bandwidth_scale = figure(cal.at("bandwidth_scale"), Figure::Scale);
    if (cal.has("latency_scale")) t.latency_scale = figure(cal.at("latency_scale"), Figure::Scale);
    if (cal.has("rendezvous_scale")) t.rendezvous_scale = figure(cal.at("rendezvous_scale"), Figure::Scale);
    if (cal.has("memory_scale")) t.memory_scale = figure(cal.at("memory_scale"), Figure::Scale);
    if (!cal.has("per_collective")) return;
    auto per = cal.at("per_collective");
    check_keys(per, {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"});
    for (auto it = per.raw().begin(); it != per.raw().end(); ++it) {
        auto one = per.at(it.key());
        check_keys(one, {"bandwidth_scale", "latency_scale", "rendezvous_scale", "memory_scale", "rows", "r2"});
        t.collective_scales[it.key()] = {figure(one.at("bandwidth_scale"), Figure::Scale), figure(one.at("latency_scale"), Figure::Scale),
                                         one.has("rendezvous_scale") ? figure(one.at("rendezvous_scale"), Figure::Scale) : 0.0,
                                         one.has("memory_scale") ? figure(one.at("memory_scale"), Figure::Scale) : 0.0};
    }
}

}  // namespace

Result<Topology> parse_topology(const std::string& file, const std::string& text, int64_t nodes_override) {
    auto doc = parse_json_text(text, file);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), file, "");
        check_keys(root, {"name", "description", "sources", "nodes", "gpus_per_node", "gpu", "intra_node", "nics",
                          "network", "calibration", "host", "nccl", "whatif"});
        Topology t;
        t.source = file;
        t.name = root.has("name") ? root.at("name").as_string() : file;
        t.nodes = positive_int(root.at("nodes"));
        t.gpus_per_node = positive_int(root.at("gpus_per_node"));
        if (nodes_override > 0) t.nodes = nodes_override;
        if (root.has("sources")) {
            auto src = root.at("sources");
            src.expect_object();
            for (auto it = src.raw().begin(); it != src.raw().end(); ++it) t.sources[it.key()] = src.at(it.key()).as_string();
        }

        read_gpu_section(root.at("gpu"), t);
        read_intra_node_section(root.at("intra_node"), t);
        if (root.has("nics")) read_nics_section(root.at("nics"), t);
        if (root.has("network")) read_network_section(root.at("network"), t);
        if (root.has("nccl")) read_nccl_section(root.at("nccl"), t);
        if (auto e = disconnected(t)) fail(e->file, e->field, e->message);
        if (root.has("whatif")) read_whatif_section(root.at("whatif"), t);
        if (root.has("host")) read_host_section(root.at("host"), t);
        if (root.has("calibration")) read_calibration_section(root.at("calibration"), t);
        return t;
    } catch (const InputFailure& f) {
        return f.error;
    }
}

// The mesh places ranks on nodes (schedule/mesh.hpp, the one place that does).
int64_t nodes_spanned(const Hardware& h, int64_t ranks) { return node_count(ranks, h.gpus_per_node); }

Result<Topology> load_topology(const std::string& path, int64_t nodes_override) {
    auto text = read_text_file(path, "topology file");
    if (!text) return text.error();
    return parse_topology(path, text.value(), nodes_override);
}

Status check_world_fits(const Topology& t, int64_t world) {
    if (world <= t.total_gpus()) return std::nullopt;
    return Error{t.source, "--world",
                 "world size " + std::to_string(world) + " needs more GPUs than " + std::to_string(t.nodes) + " nodes x " +
                     std::to_string(t.gpus_per_node) + "; pass --nodes " + std::to_string(nodes_spanned(t, world))};
}

Result<int64_t> world_on(const Topology& t, int64_t asked) {
    int64_t world = asked > 0 ? asked : t.total_gpus();
    if (auto e = check_world_fits(t, world)) return *e;
    return world;
}

}  // namespace zerosim
