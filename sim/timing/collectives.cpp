#include "timing/collectives.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace zerosim {

namespace {
std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace

const char* algorithm_name(Algorithm a) {
    switch (a) {
        case Algorithm::Ring: return "ring";
        case Algorithm::Tree: return "tree";
        case Algorithm::NVLS: return "nvls";
    }
    return "?";
}

std::string algorithm_protocol_name(Algorithm a, Protocol p) {
    return std::string(algorithm_name(a)) + "/" + protocol_name(p);
}

std::optional<Algorithm> algorithm_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::NVLS})
        if (n == algorithm_name(a)) return a;
    return std::nullopt;
}

std::optional<Protocol> protocol_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
        if (n == lowercase(protocol_name(p))) return p;
    return std::nullopt;
}

const char* protocol_name(Protocol p) {
    switch (p) {
        case Protocol::LL: return "LL";
        case Protocol::LL128: return "LL128";
        case Protocol::Simple: return "Simple";
    }
    return "?";
}

namespace {

double nm1_over_n(int64_t n) { return n > 1 ? static_cast<double>(n - 1) / static_cast<double>(n) : 0.0; }

const CollectiveInfo kAllReduce{"all_reduce", [](double s, int64_t) { return s; },
                                [](int64_t n) { return 2 * nm1_over_n(n); }, [](int64_t n) { return 2 * (n - 1); },
                                [](int64_t nodes) { return 2 * (nodes - 1); }, true};
const CollectiveInfo kAllGather{"all_gather", [](double s, int64_t n) { return s * static_cast<double>(n); },
                                [](int64_t n) { return nm1_over_n(n); }, [](int64_t n) { return n - 1; },
                                [](int64_t nodes) { return nodes - 1; }, false};
const CollectiveInfo kReduceScatter{"reduce_scatter", [](double s, int64_t) { return s; },
                                    [](int64_t n) { return nm1_over_n(n); }, [](int64_t n) { return n - 1; },
                                    [](int64_t nodes) { return nodes - 1; }, true};
const CollectiveInfo kBroadcast{"broadcast", [](double s, int64_t) { return s; },
                                [](int64_t n) { return n > 1 ? 1.0 : 0.0; }, [](int64_t n) { return n - 1; },
                                [](int64_t nodes) { return nodes - 1; }, false};
const CollectiveInfo kReduce{"reduce", [](double s, int64_t) { return s; }, [](int64_t n) { return n > 1 ? 1.0 : 0.0; },
                             [](int64_t n) { return n - 1; }, [](int64_t nodes) { return nodes - 1; }, true};
// torch.distributed's barrier on NCCL is an all_reduce of one element.
const CollectiveInfo kBarrier{"barrier", [](double, int64_t) { return 1.0; }, [](int64_t n) { return 2 * nm1_over_n(n); },
                              [](int64_t n) { return 2 * (n - 1); }, [](int64_t nodes) { return 2 * (nodes - 1); }, true};

// NCCL's latency table (src/graph/tuning.cc, via docs/collectives.md), µs, indexed by protocol
// LL, LL128, Simple.
struct LatencyRow {
    double v[3];
};
const LatencyRow kBaseRing{{6.6, 14.0, 8.4}};
const LatencyRow kBaseTree{{6.8, 14.0, 8.4}};
const LatencyRow kNvlinkRing{{0.6, 1.9, 3.4}};
const LatencyRow kNvlinkTree{{0.6, 1.25, 4.0}};
const LatencyRow kPcieRing{{1.0, 2.5, 5.7}};
const LatencyRow kPcieTree{{1.0, 1.9, 4.0}};
const LatencyRow kNetRing{{2.7, 4.0, 14.0}};
const LatencyRow kNetTree{{5.0, 8.5, 14.0}};
constexpr double kNvlsLatencyNvlinkUs = 25.0;

// Protocol bandwidth caps (LL moves 8 bytes of payload per 16, LL128 120 per 128).
double protocol_cap(Protocol p) { return p == Protocol::LL ? 0.5 : p == Protocol::LL128 ? 0.92 : 1.0; }
int proto_index(Protocol p) { return p == Protocol::LL ? 0 : p == Protocol::LL128 ? 1 : 2; }

// NCCL's tree all_reduce, as its tuner rates it (src/graph/tuning.cc up to 2.27; src/tuning/tree.cc
// since): the bus bandwidth capped at 0.92, then LL at 1/3.8 of it, LL128 at 120/128 across nodes
// and 7/9 inside one; and a per-size correction, NVIDIA's own note being that "trees are not
// perfectly sticking to the model for medium sizes": powers of two of the buffer from 64 B, by
// protocol (LL, LL128, Simple). Applied to the bandwidth, so it moves both NCCL's choice and the
// time of a tree.
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

double tree_bandwidth_factor(Protocol p, int64_t nodes, double buffer_bytes) {
    double f = 0.92;
    if (p == Protocol::LL) f /= 3.8;
    if (p == Protocol::LL128) f *= nodes > 1 ? 120.0 / 128.0 : 7.0 / 9.0;
    // log2i(nBytes >> 6): the floor of log2 of the buffer in 64-byte units (0 below 128 B);
    // NCCL corrects entries 0..22.
    int log_size = 0;
    for (auto units = static_cast<uint64_t>(std::max(0.0, buffer_bytes)) >> 6; units >>= 1;) ++log_size;
    if (log_size < 23) f *= kTreeCorrection[proto_index(p)][log_size];
    return f;
}

bool nvlink(const Topology& t) { return t.intra == IntraKind::NVSwitch || t.intra == IntraKind::NVLinkMesh; }

double intra_step_latency(const Topology& t, Algorithm a, Protocol p) {
    if (t.intra_step_latency_us > 0) return t.intra_step_latency_us;
    const LatencyRow& row = nvlink(t) ? (a == Algorithm::Tree ? kNvlinkTree : kNvlinkRing)
                                      : (a == Algorithm::Tree ? kPcieTree : kPcieRing);
    return row.v[proto_index(p)];
}

double base_latency(const Topology& t, Algorithm a, Protocol p) {
    if (t.base_latency_us > 0) return t.base_latency_us;
    return (a == Algorithm::Tree ? kBaseTree : kBaseRing).v[proto_index(p)];
}

// NCCL's channel and thread tuning for small ring/tree collectives (src/enqueue.cc,
// topoGetAlgoInfo; in NCCL <= 2.18 getAlgoInfo): after the tuner has picked algorithm and
// protocol on its full-bandwidth estimate, NCCL drops channels (one thread block each) while the
// buffer is smaller than channels x threads x per-thread threshold, so each thread keeps at least
// a threshold's worth of work. A collective then runs on fewer blocks, and its bandwidth shrinks
// with them. Figures, all from NCCL's source:
// - threads per block: LL 512, LL128 640, Simple 512 (NCCL_LL_MAX_NTHREADS,
//   NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS in src/include/device.h);
// - per-thread thresholds in bytes: LL 8, LL128 8, Simple 64 (NCCL_*_THREAD_THRESHOLD in
//   src/include/comm.h), the ring LL one multiplied by the rank count (ncclTopoTuneModel in
//   src/graph/tuning.cc);
// - channels: the communicator runs twice the channels its ring search found (ncclTopoPostset in
//   src/graph/connect.cc: "nChannels = comm->nChannels = min(MAXCHANNELS, nChannels*2)"), so each
//   runtime channel carries half a search channel's bandwidth; MAXCHANNELS is 64 (32 in older
//   releases).
// The bytes NCCL tests are the larger of what a rank sends and receives (ncclFuncMaxSendRecvCount
// x type size): the whole buffer S for every collective here. NCCL also halves the threads once a
// single channel is left; what that does to one block's throughput is not in NCCL's model, so it
// is left out. NVLS keeps its own channel count (topoGetAlgoInfo) and is not trimmed.
double channel_fraction(const Topology& t, double buffer_bytes, int64_t n, Algorithm a, Protocol p) {
    if (a == Algorithm::NVLS || t.intra == IntraKind::SharedMemory || n <= 1) return 1.0;
    double threads = p == Protocol::LL128 ? 640 : 512;
    double threshold = p == Protocol::Simple ? 64 : 8;
    if (a == Algorithm::Ring && p == Protocol::LL) threshold *= static_cast<double>(n);
    int channels = std::min(64, 2 * std::max(1, t.intra_channels));
    int nc = channels;
    while (nc > 1 && buffer_bytes < nc * threads * threshold) --nc;
    return static_cast<double>(nc) / static_cast<double>(channels);
}

}  // namespace

const CollectiveInfo& collective_info(OpKind k) {
    switch (k) {
        case OpKind::AllReduce: return kAllReduce;
        case OpKind::AllGather: return kAllGather;
        case OpKind::ReduceScatter: return kReduceScatter;
        case OpKind::Broadcast: return kBroadcast;
        case OpKind::Reduce: return kReduce;
        default: return kBarrier;
    }
}

std::optional<OpKind> collective_named(const std::string& name) {
    for (OpKind k : {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast, OpKind::Reduce})
        if (name == collective_info(k).name) return k;
    return std::nullopt;
}

double logged_bytes_of_buffer(OpKind k, double buffer_bytes, int64_t world) {
    return buffer_bytes / collective_info(k).buffer_bytes(1.0, world);
}

double CollectivePlan::time_alone_s() const {
    double t = 0;
    if (intra_bytes > 0) t = std::max(t, intra_bytes / intra_rate);
    if (inter_bytes > 0) t = std::max(t, inter_bytes / inter_rate);
    return latency_s + t;
}

namespace {

// The links a rank's collectives cross, their bandwidths times `scale` (a calibrated term).
LinkCapacities scaled_link_capacities(const Topology& t, int64_t world, double scale) {
    LinkCapacities c;
    // NCCL drives the intra-node link through its channels; their sum, not the raw link, is what
    // a collective reaches (e.g. 12 channels x 20 GB/s on A100's 12 NVLinks).
    double ring = std::min(t.intra_channels * t.channel_bandwidth_gbs, t.intra_bandwidth_gbs);
    c.intra = ring * 1e9;
    c.nic = t.nic_bandwidth_per_gpu_gbs() * 1e9;
    int64_t nodes = (world + t.gpus_per_node - 1) / t.gpus_per_node;
    c.fabric = c.nic;
    // Traffic between leaves of an oversubscribed fat tree shares the uplinks; a rail-optimised
    // fabric keeps ring traffic on its rail.
    if (t.fabric == FabricKind::FatTree && t.oversubscription > 1.0 && (t.nodes_per_leaf == 0 || nodes > t.nodes_per_leaf))
        c.fabric = c.nic / t.oversubscription;
    c.intra *= scale;
    c.nic *= scale;
    c.fabric *= scale;
    return c;
}

// NCCL's own estimate for one algorithm/protocol (src/graph/tuning.cc): what its tuner compares.
CollectivePlan nccl_estimate(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p) {
    const CollectiveInfo& info = collective_info(kind);
    CollectivePlan plan;
    plan.algorithm = a;
    plan.protocol = p;
    int64_t n = std::max<int64_t>(world, 1);
    int64_t g = std::min<int64_t>(t.gpus_per_node, n);
    int64_t nodes = (n + g - 1) / g;
    plan.buffer_bytes = info.buffer_bytes(logged, n);
    plan.bus_factor = info.bus_factor(n);
    const Topology::Scales sc = t.scales_for(info.name);
    LinkCapacities cap = scaled_link_capacities(t, n, sc.bandwidth);
    double pc = protocol_cap(p);
    double lat_us = 0;
    double bus_bytes = plan.buffer_bytes * plan.bus_factor;  // what each rank sends in a ring
    plan.intra_rate = cap.intra * pc;
    plan.inter_rate = std::min(cap.nic, cap.fabric) * pc;
    if (n == 1) {
        plan.latency_s = base_latency(t, a, p) * 1e-6 * sc.latency;
        return plan;
    }
    if (a == Algorithm::NVLS) {
        // In-switch reduction, as NCCL's NVLS all_reduce moves the data: rank r owns 1/n of the
        // buffer; its multimem load-reduce makes the switch read that share from every GPU, so each
        // GPU's whole buffer goes up its link once (S) and r's reduced share comes back (S/n); r's
        // multimem store sends the share up once (S/n) and the switch writes it to every GPU (S
        // arriving per GPU). S(1 + 1/n) each way, on the NVLink bandwidth NCCL sees, at NCCL's NVLS
        // efficiency (0.85 on Hopper). The 1/n is why NVLS gains more with more GPUs (reference
        // Table C1: algbw 259 GB/s on 5 H200s, 270 on 8), where NCCL's own conversion (bus x n /
        // 2(n-1), as for a ring) has it shrink.
        plan.intra_bytes = plan.buffer_bytes * (1.0 + 1.0 / static_cast<double>(n));
        plan.intra_rate = cap.intra * t.nvls_efficiency;
        lat_us = kNvlsLatencyNvlinkUs;
    } else if (a == Algorithm::Tree) {
        // Double binary tree across nodes, chains inside them: every rank of a chain moves the
        // buffer up and down once (2S: NCCL's algorithm bandwidth, half the bus's), its node's
        // share crossing the NICs; at the tree's own rates (above).
        plan.intra_bytes = 2 * plan.buffer_bytes;
        plan.inter_bytes = nodes > 1 ? 2 * plan.buffer_bytes / static_cast<double>(g) : 0;
        double f = tree_bandwidth_factor(p, nodes, plan.buffer_bytes);
        plan.intra_rate = cap.intra * f;
        plan.inter_rate = std::min(cap.nic, cap.fabric) * f;
        double log2n = nodes > 1 ? std::ceil(std::log2(static_cast<double>(nodes))) : 0;
        lat_us = base_latency(t, a, p) +
                 2 * ((g - 1) * intra_step_latency(t, a, p) + log2n * (kNetTree.v[proto_index(p)] + t.nic_latency_us));
    } else {
        // Ring: of each ring's n edges, `nodes` cross a node boundary; NCCL spreads the rings so
        // every GPU's NIC carries one crossing.
        int64_t steps = info.ring_steps(n);
        int64_t inter_steps = nodes > 1 ? info.ring_inter_steps(nodes) : 0;
        plan.intra_bytes = bus_bytes * static_cast<double>(n - nodes) / static_cast<double>(n);
        plan.inter_bytes = nodes > 1 ? bus_bytes * static_cast<double>(nodes) / static_cast<double>(n) : 0;
        if (nodes == 1) plan.intra_bytes = bus_bytes;
        lat_us = base_latency(t, a, p) + static_cast<double>(steps - inter_steps) * intra_step_latency(t, a, p) +
                 static_cast<double>(inter_steps) * (kNetRing.v[proto_index(p)] + t.nic_latency_us);
        // NCCL's empirical correction for multi-node Ring/Simple all_reduce.
        if (nodes > 1 && p == Protocol::Simple && kind == OpKind::AllReduce) lat_us *= 1.4;
    }
    plan.latency_s = (lat_us + t.launch_overhead_us) * 1e-6 * sc.latency;
    return plan;
}

// The plan as NCCL runs it: the estimate's rates on the channels NCCL keeps for this size.
CollectivePlan as_run(const Topology& t, int64_t world, CollectivePlan plan) {
    double f = channel_fraction(t, plan.buffer_bytes, std::max<int64_t>(world, 1), plan.algorithm,
                                plan.protocol);
    plan.intra_rate *= f;
    plan.inter_rate *= f;
    return plan;
}

}  // namespace

LinkCapacities link_capacities(const Topology& t, int64_t world) {
    return scaled_link_capacities(t, world, t.max_bandwidth_scale());
}

CollectivePlan plan_collective_with(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p) {
    return as_run(t, world, nccl_estimate(t, kind, logged, world, a, p));
}

std::vector<TunerCandidate> tuner_candidates(const Topology& t, OpKind kind, int64_t world) {
    std::vector<TunerCandidate> out;
    // Shared memory (MPI on one host) has one protocol; LL128 needs NVLink (or the network).
    int64_t g = std::min<int64_t>(t.gpus_per_node, std::max<int64_t>(world, 1));
    int64_t nodes = (std::max<int64_t>(world, 1) + g - 1) / g;
    std::vector<Protocol> protocols = t.intra == IntraKind::SharedMemory ? std::vector<Protocol>{Protocol::Simple}
                                      : t.intra == IntraKind::PCIe && nodes == 1
                                          ? std::vector<Protocol>{Protocol::LL, Protocol::Simple}
                                          : std::vector<Protocol>{Protocol::LL, Protocol::LL128, Protocol::Simple};
    for (Protocol p : protocols) out.push_back({Algorithm::Ring, p});
    // Tree runs all_reduce only, on one node too (a chain); NVLS needs the switch's reduction and,
    // across nodes, a SHARP network (CollNet), which the topologies here do not have.
    if (kind == OpKind::AllReduce && world > 1 && t.intra != IntraKind::SharedMemory)
        for (Protocol p : protocols) out.push_back({Algorithm::Tree, p});
    if (kind == OpKind::AllReduce && t.nvls && nodes == 1 && world > 1)
        out.push_back({Algorithm::NVLS, Protocol::Simple});
    return out;
}

CollectivePlan plan_collective(const Topology& t, OpKind kind, double logged, int64_t world, const TunerChoice& only) {
    CollectivePlan best;
    double best_t = std::numeric_limits<double>::infinity();
    // NCCL picks on its full-channel estimate and trims channels afterwards (topoGetAlgoInfo).
    for (const TunerCandidate& c : tuner_candidates(t, kind, world)) {
        if (!only.allows(c)) continue;
        CollectivePlan e = nccl_estimate(t, kind, logged, world, c.algorithm, c.protocol);
        double tt = e.time_alone_s();
        if (tt < best_t) {
            best_t = tt;
            best = e;
        }
    }
    // A choice that leaves nothing is refused before planning (tuner_candidates); should one
    // arrive anyway, the unrestricted tuner answers rather than an empty plan.
    if (!std::isfinite(best_t)) return plan_collective(t, kind, logged, world);
    return as_run(t, world, best);
}

double back_to_back_call_us(const Topology& t, double collective_us, int gpus_per_thread) {
    return std::max(collective_us, static_cast<double>(std::max(1, gpus_per_thread)) * t.launch_overhead_us);
}

Result<TunerChoice> tuner_choice_named(const std::string& algo, const std::string& proto, const Topology& t, OpKind kind,
                                       const std::string& op_name, int64_t world) {
    TunerChoice c;
    if (!algo.empty()) {
        c.algorithm = algorithm_named(algo);
        if (!c.algorithm) return Error{"", "--algo", "unknown algorithm '" + algo + "'; expected ring, tree or nvls"};
    }
    if (!proto.empty()) {
        c.protocol = protocol_named(proto);
        if (!c.protocol) return Error{"", "--proto", "unknown protocol '" + proto + "'; expected LL, LL128 or Simple"};
    }
    std::vector<TunerCandidate> all = tuner_candidates(t, kind, world);
    if (std::none_of(all.begin(), all.end(), [&](const TunerCandidate& x) { return c.allows(x); })) {
        std::string avail;
        for (const auto& x : all) avail += (avail.empty() ? "" : ", ") + algorithm_protocol_name(x.algorithm, x.protocol);
        return Error{t.source, algo.empty() ? "--proto" : "--algo",
                     "NCCL has no " + (algo.empty() ? std::string("") : algo + " ") + (proto.empty() ? std::string("") : proto + " ") +
                         "for " + op_name + " on " + std::to_string(world) + " ranks of " + t.name + "; it weighs " + avail};
    }
    return c;
}

}  // namespace zerosim
