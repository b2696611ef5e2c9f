// How one collective becomes network activity (shared docs/collectives.md): the collective model
// the topology names (timing/collective_model.hpp: NCCL's, or OpenMPI 4.1 coll/tuned's) gives it a
// latency and the bytes each rank moves over its intra-node link and its share of the NICs. NCCL's
// model weighs, for each algorithm (ring, tree, NVLS...) and protocol (LL, LL128, Simple), its own
// estimate and its tuner picks the fastest.
//
// The collective table (schedule/collective_table.hpp) describes each collective (its buffer size,
// bus factor and ring rounds, as nccl-tests and NCCL define them); plan_collective() is the one
// harness that turns a table entry and a topology into a plan, through the topology's model. Ranks
// are symmetric, so a plan describes every rank's traffic at once. NCCL's constants, each
// algorithm and the channel trimming are private files beside collectives.cpp (nccl_model.hpp
// lists them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "schedule/collective_table.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// As NCCL_ALGO names them. NVLSTree: NVLS inside each node, a tree across; CollNet: the network
// switches reduce (SHARP), Direct (every GPU to the network) or Chain (a chain through the node);
// PAT: all_gather / reduce_scatter with one GPU per node.
enum class Algorithm { Ring, Tree, NVLS, NVLSTree, CollNetDirect, CollNetChain, PAT };
enum class Protocol { LL, LL128, Simple };
const char* algorithm_name(Algorithm a);
const char* protocol_name(Protocol p);
// "ring/LL128": a pair as NCCL_DEBUG_SUBSYS=TUNING and bench's tables name it.
std::string algorithm_protocol_name(Algorithm a, Protocol p);
struct CollectivePlan;
// A plan's pair as bench's tables name it (CollectivePlan::reported_pair).
std::string algorithm_protocol_name(const CollectivePlan& plan);

// NCCL's choice: the algorithm/protocol pair its tuner picked (or NCCL_ALGO / NCCL_PROTO forced).
struct NcclChoice {
    Algorithm algorithm = Algorithm::Ring;
    Protocol protocol = Protocol::Simple;
};
// OpenMPI coll/tuned's choice (timing/mpi_transport.hpp): the algorithm its fixed rules picked, and
// the terms calibrate fits apart. rendezvous_s: the part of latency_s that steps too large for an
// eager fragment pay. With a cache size: the critical path's bytes within and beyond the cache
// (the plan's intra_bytes is their sum, the latter weighted by bandwidth / memory scale); 0 and 0
// without the cache term.
struct OpenMpiTunedChoice {
    std::string algorithm;   // coll/tuned's name: "ring", "recursive_doubling", "bruck", ...
    double rendezvous_s = 0;
    double in_cache_bytes = 0, beyond_cache_bytes = 0;
};

// What one collective puts on the links, whichever model planned it: the model's own choice, and the
// latency, bytes and rates the engine runs.
struct CollectivePlan {
    std::variant<NcclChoice, OpenMpiTunedChoice> choice;
    double latency_s = 0;       // start-up and per-step latencies
    double intra_bytes = 0;     // bytes each rank sends over its intra-node link
    double inter_bytes = 0;     // bytes each rank sends through its share of the NICs
    double intra_rate = 0;      // B/s this algorithm/protocol reaches on the intra link alone
    double inter_rate = 0;      // B/s on the NIC share alone
    double buffer_bytes = 0;    // nccl-tests' size S
    double bus_factor = 1;

    // The model's choice, or null when another model planned it.
    const NcclChoice* nccl() const { return std::get_if<NcclChoice>(&choice); }
    const OpenMpiTunedChoice* openmpi() const { return std::get_if<OpenMpiTunedChoice>(&choice); }
    // The pair the algorithm/protocol columns of predicted logs, traces and bench tables print:
    // NCCL's choice; for another model's plan ring/Simple, what those NCCL-named columns have said
    // for OpenMPI's shared-memory path since it was added (the outputs stay byte for byte).
    NcclChoice reported_pair() const {
        const NcclChoice* c = nccl();
        return c ? *c : NcclChoice{};
    }
    // Time alone on an idle platform: latency plus the slower of the two transfers.
    double time_alone_s() const;
};

// OpenMPI's terms of a plan, zero for another model's (what calibrate fits apart).
inline OpenMpiTunedChoice openmpi_terms(const CollectivePlan& plan) {
    const OpenMpiTunedChoice* c = plan.openmpi();
    return c ? *c : OpenMpiTunedChoice{};
}

// The link capacities the engine gives SimGrid (B/s): what NCCL can push through one rank's
// intra-node link, its share of the NICs, and its share of the fabric above the leaf switches.
struct LinkCapacities {
    double intra = 0;
    double nic = 0;
    double fabric = 0;
};
// What the engine gives SimGrid (the largest calibrated bandwidth scale, so no collective is
// capped below its own).
LinkCapacities link_capacities(const Topology& t, int64_t world);

// One algorithm/protocol pair NCCL's tuner weighs.
struct TunerCandidate {
    Algorithm algorithm;
    Protocol protocol;
};
// What NCCL_ALGO / NCCL_PROTO leave the tuner: unset = any.
struct TunerChoice {
    std::optional<Algorithm> algorithm;
    std::optional<Protocol> protocol;
    bool allows(const TunerCandidate& c) const {
        return (!algorithm || *algorithm == c.algorithm) && (!protocol || *protocol == c.protocol);
    }
};
// Names as NCCL_ALGO / NCCL_PROTO spell them, any case: ring, tree, nvls, nvlstree, collnetdirect,
// collnetchain, pat; LL, LL128, Simple.
std::optional<Algorithm> algorithm_named(const std::string& name);
std::optional<Protocol> protocol_named(const std::string& name);

// The pairs NCCL's tuner weighs for this collective on this platform and world size (the
// topology's model's; none where the model has no NCCL choice).
std::vector<TunerCandidate> tuner_candidates(const Topology& t, OpKind kind, int64_t world);

// The topology's collective model's plan; NCCL's picks algorithm and protocol as its tuner does
// (lowest estimated time) for `logged_bytes`
// (DeepSpeed's convention: the shard for all_gather) on `world` ranks placed node by node, among
// the pairs `only` allows (check it leaves one with tuner_candidates).
CollectivePlan plan_collective(const Topology& t, OpKind kind, double logged_bytes, int64_t world,
                               const TunerChoice& only = {});

// nccl-tests -g G: one host thread issues every call on G GPUs, G kernel launches one after the
// other, and the timed calls run back to back; once those launches take longer than the
// collective itself, the host sets the pace. One process per GPU (G = 1, as DeepSpeed runs) never
// is: a call's single launch is already inside its latency.
double back_to_back_call_us(const Topology& t, double collective_us, int gpus_per_thread);
// Same, forcing an algorithm/protocol (for tests and explain). Both return the rates NCCL runs at,
// on the channels it keeps for this size; the tuner's choice uses its full-channel estimate.
CollectivePlan plan_collective_with(const Topology& t, OpKind kind, double logged_bytes, int64_t world, Algorithm a,
                                    Protocol p);

// nccl-tests alltoall_perf (ZeRO++ qgZ's all_to_all_single): every rank sends S/n to every other
// rank through NCCL's point-to-point channels; S is the per-rank buffer (nccl-tests' size).
CollectivePlan plan_all_to_all(const Topology& t, double buffer_bytes, int64_t world);

// --algo / --proto as NCCL_ALGO / NCCL_PROTO (names as algorithm_named and protocol_named read
// them; "" leaves the choice to the tuner), checked against the pairs the tuner weighs for `op_name`
// (the collective as the user wrote it) on `world` ranks of `t`.
Result<TunerChoice> tuner_choice_named(const std::string& algo, const std::string& proto, const Topology& t, OpKind kind,
                                       const std::string& op_name, int64_t world);

}  // namespace zerosim
