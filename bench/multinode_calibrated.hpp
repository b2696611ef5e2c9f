// Issue 31, part 3: the network calibrated on one nccl-tests table of a cluster (zerosim
// calibrate's network fit, validate/network_fit.hpp) predicting that cluster's other tables. The
// clusters with more than one table among the public multi-node runs: the Vultr B200 NDR report
// (all_reduce, all_gather, reduce_scatter, alltoall, alltoall_v2 on the same two nodes) and the
// degraded H100 NDR pair of NCCL issue 319 (default NVLSTree and forced ring). Shared by
// bench/multinode_bench.cpp (--calibrated) and tests/unit/test_network_fit.cpp.
#pragma once

#include <string>
#include <vector>

#include "multinode_tables.hpp"
#include "validate/calibrate.hpp"

namespace zerosim::multinode {

struct Cluster {
    const char* name;
    std::vector<const char*> tables;   // file prefixes (two digits) of cases(), in one cluster
};

inline const std::vector<Cluster>& clusters() {
    static const std::vector<Cluster> all = {
        {"Vultr B200 NDR, 2 nodes", {"23", "24", "25", "26", "27"}},
        {"H100 NDR issue 319 (degraded), 2 nodes", {"33", "34"}},
    };
    return all;
}

inline const TableCase* case_with_prefix(const std::string& prefix) {
    for (const TableCase& c : cases())
        if (std::string(c.file).rfind(prefix, 0) == 0) return &c;
    return nullptr;
}

// The table's rows as calibrate reads them (out-of-place times, the NCCL_ALGO/PROTO it forced).
inline Result<std::vector<Measurement>> case_measurements(const TableCase& c, const Topology& t, const std::string& reference_dir) {
    auto tables = read_nccl_tests(reference_dir + "/" + c.file);
    if (!tables) return tables.error();
    auto kind = collective_named(c.op);
    if (!kind) return Error{c.file, "op", std::string("calibrate does not fit ") + c.op + " tables"};
    TunerChoice only;
    if (*c.algo) only.algorithm = algorithm_named(c.algo);
    if (*c.proto) only.protocol = protocol_named(c.proto);
    std::vector<Measurement> rows;
    for (const auto& r : tables.value().front().rows)
        rows.push_back({*kind, r.bytes, r.time_us, c.nodes * t.gpus_per_node, std::string(c.file), only});
    return rows;
}

// One fit and what it predicts: the terms, and per table of the cluster the result before (the
// shipped topology) and after (the calibrated one).
struct CalibratedPrediction {
    const TableCase* fitted = nullptr;
    std::string error;
    NetworkFit fit;
    struct Target {
        const TableCase* c;
        TableResult before, after;
    };
    std::vector<Target> targets;
};

// Fitted on `fitted` (one table, or several of the cluster at once, as calibrate takes several
// files). `open_rings`: the topologies without a ring channel ceiling, as for a cluster zerosim
// has no figure for (b200-ndr's was fitted on table 24).
inline CalibratedPrediction calibrate_on(const std::vector<const TableCase*>& fitted, const Cluster& cluster,
                                         const std::string& reference_dir, const std::string& topologies_dir, bool open_rings = false) {
    CalibratedPrediction out;
    out.fitted = fitted.front();
    auto topology_of = [&](const TableCase& c) -> Result<Topology> {
        auto t = case_topology(c, topologies_dir);
        if (t && open_rings) t.value().ring_channel_gbs = 0;
        return t;
    };
    auto base = topology_of(*fitted.front());
    if (!base) return out.error = base.error().what(), out;
    std::vector<Measurement> rows;
    for (const TableCase* f : fitted) {
        auto more = case_measurements(*f, base.value(), reference_dir);
        if (!more) return out.error = more.error().what(), out;
        rows.insert(rows.end(), more.value().begin(), more.value().end());
    }
    auto cal = calibrate(base.value(), rows);
    if (!cal) return out.error = cal.error().what(), out;
    if (!cal->network) return out.error = "the rows did not all cross nodes", out;
    out.fit = cal->network_fit;
    for (const char* prefix : cluster.tables) {
        const TableCase* c = case_with_prefix(prefix);
        if (!c) continue;
        auto own = topology_of(*c);
        if (!own) continue;
        CalibratedPrediction::Target target{c, evaluate_on(*c, own.value(), reference_dir),
                                            evaluate_on(*c, with_network_fit(own.value(), out.fit), reference_dir)};
        out.targets.push_back(target);
    }
    return out;
}

inline CalibratedPrediction calibrate_on(const TableCase& fitted, const Cluster& cluster, const std::string& reference_dir,
                                         const std::string& topologies_dir, bool open_rings = false) {
    return calibrate_on(std::vector<const TableCase*>{&fitted}, cluster, reference_dir, topologies_dir, open_rings);
}

}  // namespace zerosim::multinode
