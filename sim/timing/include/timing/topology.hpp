// A topology file as the timing model reads it: the machine (timing/hardware.hpp) and, apart from
// it, the parameters of the collective models that may run on it (NCCL's keys, OpenMPI's tuned
// collectives' keys), the name of the model that does (timing/collective_model.hpp) and the
// calibrated scales. Read from the JSON files in topologies/ (documented in topologies/README.md);
// every figure there names its source.
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "timing/hardware.hpp"
#include "timing/nccl_version.hpp"

namespace zerosim {

// NCCL's parameters (the "nccl" object and intra_node's nccl_* keys): how its channels see the
// intra-node link, NVLS's efficiency, the release whose tuner is predicted (--nccl overrides) and
// whether AWS's tuner plugin (aws-ofi-nccl >= 1.9) replaces NCCL's choice across nodes.
struct NcclParams {
    int intra_channels = 1;             // NCCL rings (channels) over the intra link, e.g. one per NVLink
    double channel_bandwidth_gbs = 0;   // NCCL's per-channel bandwidth for this link type
    double nvls_efficiency = 0.85;
    NcclVersion nccl_version;
    bool aws_tuner = false;
};

// OpenMPI 4.1 coll/tuned over shared memory (intra_node "collectives": "openmpi-4.1-tuned";
// timing/mpi_transport.hpp): the shared-memory BTL's eager limit (OpenMPI 4.1 vader:
// btl_vader_eager_limit, 4096 by default, `ompi_info --param btl vader --level 9`) and the latency a
// step pays when its message does not fit an eager fragment (the rendezvous and single-copy
// handshake); 0 = none. The cache one rank's buffers fit in (a core's L2; 0 = not modelled): a call
// whose buffers outgrow it moves the share beyond at the memory's pace, fitted by calibrate as
// memory_scale.
struct OpenMpiTunedParams {
    double intra_eager_limit_bytes = 0;
    double intra_rendezvous_latency_us = 0;
    double intra_cache_bytes = 0;
};

// Calibration terms (fitted by `zerosim calibrate`; 1.0 = the hardware figures as they are):
// global ones, and per collective (nccl-tests name) where the measurements told them apart. The
// rendezvous and memory scales are OpenMPI's terms (0: tied to the latency and bandwidth scales).
struct CalibratedScales {
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
};

// The name of NCCL's model and of OpenMPI 4.1 coll/tuned's in the registry and in the file.
inline constexpr const char* kNcclModelName = "nccl";
inline constexpr const char* kOpenMpiTunedModelName = "openmpi-4.1-tuned";

// The machine, each model's parameters and the calibration, in separate parts; a model reads the
// Hardware and its own part. The parts are bases so that a field keeps its name (t.intra_channels,
// t.intra_eager_limit_bytes) for every caller.
struct Topology : Hardware, NcclParams, OpenMpiTunedParams, CalibratedScales {
    // Who runs the collectives, by registered name (intra_node "collectives"): "nccl" (its tuner
    // picks ring/tree/NVLS...) or "openmpi-4.1-tuned" (with kind shared_memory).
    std::string collective_model = kNcclModelName;
    // Overrides of NCCL's latency table, for fabrics NCCL does not describe (MPI over shared
    // memory on localhost), read by both models: per-step and base latency in µs; 0 = NCCL's
    // figure for the link.
    double intra_step_latency_us = 0;
    double base_latency_us = 0;
    // The file's "sources": what each figure rests on ("assumption: ...", a datasheet, a fit), by the
    // figure's key or its section's (prediction/assumed.hpp names the assumed ones).
    std::map<std::string, std::string> sources;

    const Hardware& hardware() const { return *this; }
    const NcclParams& nccl() const { return *this; }
    const OpenMpiTunedParams& openmpi() const { return *this; }
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
