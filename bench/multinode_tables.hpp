// The public multi-node nccl-tests tables (../shared/reference/nccl-tests-multinode) set against
// the collective model: which topology, node count, NCCL release and NCCL_ALGO/PROTO each table
// ran with, whether the model was fitted on it, and the comparison itself (pure cost-model
// evaluations: the tuner's plan, timed alone, as nccl-tests times one call). Shared by
// bench/multinode_bench.cpp (prints every table) and tests/unit/test_nccl_multinode.cpp (one test
// per table).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "formats/nccl_tests.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim::multinode {

enum class Role { Fit, HeldOut, Degraded };
inline const char* role_name(Role r) { return r == Role::Fit ? "fit" : r == Role::HeldOut ? "held-out" : "degraded"; }

struct TableCase {
    const char* file;        // under nccl-tests-multinode/
    const char* topology;    // under topologies/, without .json
    int64_t nodes;
    const char* op;          // all_reduce, all_gather, reduce_scatter, alltoall
    const char* algo;        // NCCL_ALGO the run forced ("" = the tuner's choice)
    const char* proto;       // NCCL_PROTO the run forced
    const char* nccl;        // NCCL release the table ran ("" = the topology's)
    Role role;
    const char* nccl_named;  // what the table (or its thread) says NCCL ran, "" if nothing
    // Changes to the shipped topology that this cluster's header states (NIC count, SHARP, the
    // AWS plugin's version), applied before the comparison.
    std::function<void(Topology&)> adjust = nullptr;
};

inline const std::vector<TableCase>& cases() {
    static const std::vector<TableCase> all = {
        {"01_coreweave_a100-80g_16n_allreduce_2022.txt", "dgx-a100", 16, "all_reduce", "", "", "2.12", Role::HeldOut, ""},
        // CoreWeave LAS1 SHARP nodes: 4 x HDR 200 Gb/s ("800G IB", ib-network-0..3), SHARP on.
        {"02_coreweave_a100-80g_4n_sharp-collnet_allreduce_2022.txt", "dgx-a100", 4, "all_reduce", "", "", "2.12",
         Role::HeldOut, "CollNet (NCCL_COLLNET_ENABLE=1)", [](Topology& t) { t.nics_per_node = 4; t.sharp = true; }},
        {"03_coreweave_a100-80g_4n_sharp-collnet_allreduce_2023.txt", "dgx-a100", 4, "all_reduce", "", "", "2.14", Role::Fit,
         "CollNet (NCCL_COLLNET_ENABLE=1)", [](Topology& t) { t.nics_per_node = 4; t.sharp = true; }},
        {"04_coreweave_h100_12n_sharp-collnetchain_allreduce.txt", "dgx-h100", 12, "all_reduce", "collnetchain", "", "2.18",
         Role::HeldOut, "CollNetChain (forced)", [](Topology& t) { t.sharp = true; }},
        {"08_aws_p4d_a100-40g_2n_efa_allreduce.txt", "aws-p4d", 2, "all_reduce", "", "", "2.23", Role::HeldOut, ""},
        {"09_crusoe_h100_ndr_2n_nvlstree_allreduce.txt", "dgx-h100", 2, "all_reduce", "nvlstree", "", "2.18", Role::Fit,
         "NVLSTree (forced)"},
        // aws-ofi-nccl v1.7.3: before the plugin had a tuner; the container forces Simple.
        {"10_aws_p5_h100_2n_efa_eks_proto-simple_allreduce.txt", "aws-p5", 2, "all_reduce", "", "Simple", "2.18", Role::Fit,
         "Simple (forced)", [](Topology& t) { t.aws_tuner = false; }},
        {"12_gcp_a3ultra_h200_2n_roce_allgather_skypilot.txt", "gcp-a3-ultra", 2, "all_gather", "", "", "2.26", Role::HeldOut, ""},
        {"13_gcp_a3ultra_h200_2n_roce_allgather_gcpdoc-pods.txt", "gcp-a3-ultra", 2, "all_gather", "", "", "2.26", Role::Fit, ""},
        {"14_gcp_a4_b200_2n_roce_allgather_dranet.txt", "gcp-a4", 2, "all_gather", "", "", "2.26", Role::HeldOut, ""},
        {"20_h100_128n-1024gpu_ring-ll128_allreduce_issue322.txt", "dgx-h100", 128, "all_reduce", "ring", "LL128", "2.26",
         Role::HeldOut, "Ring/LL128 (forced)"},
        {"23_vultr_b200_ndr_2n_allreduce.txt", "b200-ndr", 2, "all_reduce", "", "", "", Role::HeldOut, ""},
        {"24_vultr_b200_ndr_2n_allgather.txt", "b200-ndr", 2, "all_gather", "", "", "", Role::Fit, ""},
        {"25_vultr_b200_ndr_2n_reducescatter.txt", "b200-ndr", 2, "reduce_scatter", "", "", "", Role::HeldOut, ""},
        {"26_vultr_b200_ndr_2n_alltoall.txt", "b200-ndr", 2, "alltoall", "", "", "", Role::Fit, ""},
        {"27_vultr_b200_ndr_2n_alltoall-v2.txt", "b200-ndr", 2, "alltoall", "", "", "", Role::HeldOut, ""},
        {"28_oci_a100-40g_bmgpu4.8_2n_roce_allreduce.txt", "oci-a100-roce", 2, "all_reduce", "", "", "2.19", Role::HeldOut, ""},
        {"33_h100_ndr_2n_default-nvlstree_allreduce_DEGRADED_issue319.txt", "dgx-h100", 2, "all_reduce", "", "", "2.26",
         Role::Degraded, "NVLSTree (maintainer)"},
        {"34_h100_ndr_2n_ring_allreduce_DEGRADED_issue319.txt", "dgx-h100", 2, "all_reduce", "ring", "", "2.26", Role::Degraded,
         "Ring (forced)"},
    };
    return all;
}

struct RowResult {
    int64_t bytes;
    double measured_us, predicted_us;
    std::string algorithm;   // the plan's algorithm/protocol
    double latency_us = 0;   // the plan's latency part of predicted_us
};

struct TableResult {
    const TableCase* c = nullptr;
    std::string error;       // why the table could not be compared ("" if it was)
    std::vector<RowResult> rows;
    double median_small = NAN, median_large = NAN;   // |error| below / from 1 MiB
};

inline double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The topology a case runs on: the shipped file, scaled, with the table's NCCL release and what
// its header states about the cluster.
inline Result<Topology> case_topology(const TableCase& c, const std::string& topologies_dir) {
    auto t = load_topology(topologies_dir + "/" + c.topology + ".json", c.nodes);
    if (!t) return t.error();
    Topology topo = t.value();
    if (*c.nccl) topo.nccl_version = *NcclVersion::parse(c.nccl);
    if (c.adjust) c.adjust(topo);
    return topo;
}

// The case's table compared with the model on topology `t` (the case's own, or one calibrated on
// another table of the cluster).
inline TableResult evaluate_on(const TableCase& c, const Topology& t, const std::string& reference_dir) {
    TableResult out;
    out.c = &c;
    auto tables = read_nccl_tests(reference_dir + "/" + c.file);
    if (!tables) {
        out.error = tables.error().what();
        return out;
    }
    const int64_t world = c.nodes * t.gpus_per_node;
    const std::string op = c.op;
    TunerChoice only;
    if (*c.algo) only.algorithm = algorithm_named(c.algo);
    if (*c.proto) only.protocol = protocol_named(c.proto);
    std::vector<double> small, large;
    int64_t last = -1;
    for (const auto& r : tables.value().front().rows) {
        if (r.bytes <= 0 || r.time_us <= 0 || r.bytes == last) continue;   // 0-byte rows, repeats
        last = r.bytes;
        RowResult row{r.bytes, r.time_us, 0, ""};
        CollectivePlan plan;
        if (op == "alltoall") {
            plan = plan_all_to_all(t, static_cast<double>(r.bytes), world);
            row.algorithm = "p2p/Simple";
        } else {
            OpKind kind = *collective_named(op);
            plan = plan_collective(t, kind, logged_bytes_of_buffer(kind, static_cast<double>(r.bytes), world), world, only);
            row.algorithm = algorithm_protocol_name(plan);
        }
        row.predicted_us = plan.time_alone_s() * 1e6;
        row.latency_us = plan.latency_s * 1e6;
        double err = std::fabs(row.predicted_us - row.measured_us) / row.measured_us;
        (r.bytes >= (1 << 20) ? large : small).push_back(err);
        out.rows.push_back(row);
    }
    out.median_small = median(small);
    out.median_large = median(large);
    return out;
}

inline TableResult evaluate(const TableCase& c, const std::string& reference_dir, const std::string& topologies_dir) {
    auto topo = case_topology(c, topologies_dir);
    if (!topo) {
        TableResult out;
        out.c = &c;
        out.error = topo.error().what();
        return out;
    }
    return evaluate_on(c, topo.value(), reference_dir);
}

// "8 B-64 KiB tree/LL, 128 KiB-2 GiB ring/LL128": the plan's algorithm by size range.
inline std::string size_text(int64_t b) {
    const char* u[] = {"B", "KiB", "MiB", "GiB"};
    int i = 0;
    while (i < 3 && b >= 1024 && b % 1024 == 0) b /= 1024, ++i;
    return std::to_string(b) + " " + u[i];
}
inline std::string algorithm_ranges(const TableResult& r) {
    std::string out;
    for (size_t i = 0; i < r.rows.size();) {
        size_t j = i;
        while (j + 1 < r.rows.size() && r.rows[j + 1].algorithm == r.rows[i].algorithm) ++j;
        out += (out.empty() ? "" : ", ") + size_text(r.rows[i].bytes) + (j > i ? "-" + size_text(r.rows[j].bytes) : "") + " " +
               r.rows[i].algorithm;
        i = j + 1;
    }
    return out;
}

inline void print_rows(const TableResult& r) {
    std::printf("%14s %12s %12s %8s %10s  %s\n", "bytes", "measured us", "predicted us", "error", "latency us", "predicted algorithm");
    for (const auto& row : r.rows)
        std::printf("%14lld %12.2f %12.2f %7.1f%% %10.2f  %s\n", static_cast<long long>(row.bytes), row.measured_us, row.predicted_us,
                    100 * (row.predicted_us - row.measured_us) / row.measured_us, row.latency_us, row.algorithm.c_str());
}

}  // namespace zerosim::multinode
