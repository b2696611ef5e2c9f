// The collective model against every public multi-node nccl-tests table
// (../shared/reference/nccl-tests-multinode): per table the median time error below and from
// 1 MiB, whether the model was fitted on it, and the algorithm predicted per size range next to
// the one the table names; with --calibrated, the network calibrated on each table of a cluster
// (zerosim calibrate's network fit) predicting that cluster's other tables, before and after.
// Run: build/bench/multinode_bench [--rows] [--calibrated]
#include <cstdio>
#include <cstring>
#include <string>

#include "bench_args.hpp"
#include "multinode_calibrated.hpp"

namespace {

std::string pct(double v) { return std::isnan(v) ? std::string("-") : std::to_string(static_cast<int>(std::lround(100 * v))) + "%"; }

std::string ring_channel_text(double gbs) {
    if (!(gbs > 0)) return "none";
    char b[32];
    std::snprintf(b, sizeof b, "%.2f GB/s", gbs);
    return b;
}

// One fit: the fitted terms, then each table of the cluster before (shipped topology) and after
// (calibrated), median |error| below and from 1 MiB.
void print_fit(const std::vector<const zerosim::multinode::TableCase*>& fitted, const zerosim::multinode::CalibratedPrediction& p,
               bool rows) {
    std::string names;
    for (const auto* f : fitted) names += std::string(names.empty() ? "" : " + ") + f->file + (*f->algo ? " --algo " : "") + f->algo;
    if (!p.error.empty()) {
        std::printf("fitted on %s: cannot fit: %s\n", names.c_str(), p.error.c_str());
        return;
    }
    std::printf("fitted on %s: NIC efficiency %.3f%s, ring channel %s%s, bulk call %.1f us%s, latency x%.3f\n", names.c_str(),
                p.fit.nic_efficiency, p.fit.efficiency_kept_why.empty() ? "" : " (kept)", ring_channel_text(p.fit.ring_channel_gbs).c_str(),
                p.fit.ring_channel_fitted ? "" : " (kept)", p.fit.bulk_call_us, p.fit.bulk_call_kept_why.empty() ? "" : " (kept)",
                p.fit.latency_scale);
    std::printf("    %-64s %9s %9s %9s %9s\n", "table", "<1MiB", "", ">=1MiB", "");
    std::printf("    %-64s %9s %9s %9s %9s\n", "", "before", "after", "before", "after");
    for (const auto& t : p.targets) {
        bool was_fitted = false;
        for (const auto* f : fitted) was_fitted = was_fitted || t.c == f;
        std::printf("    %-64s %9s %9s %9s %9s%s\n", t.c->file, pct(t.before.median_small).c_str(), pct(t.after.median_small).c_str(),
                    pct(t.before.median_large).c_str(), pct(t.after.median_large).c_str(), was_fitted ? "  (fitted)" : "");
        if (rows) print_rows(t.after);
    }
}

// Per cluster: fitted on each of its collective tables alone; the same from topologies without a
// ring channel ceiling (b200-ndr's was fitted on table 24: what a cluster zerosim has no figure for
// gets); and on all of them at once.
int print_calibrated(const std::string& ref, const std::string& topo, bool rows) {
    using namespace zerosim::multinode;
    for (const Cluster& cl : clusters()) {
        std::vector<const TableCase*> all;
        for (const char* prefix : cl.tables) {
            const TableCase* c = case_with_prefix(prefix);
            if (c && std::strcmp(c->op, "alltoall") != 0) all.push_back(c);   // calibrate fits collectives' tables
        }
        for (bool open_rings : {false, true}) {
            std::printf("== %s%s\n", cl.name, open_rings ? ", from topologies without a ring channel ceiling" : "");
            for (const TableCase* c : all) print_fit({c}, calibrate_on(*c, cl, ref, topo, open_rings), rows);
        }
        if (all.size() > 1) {
            std::printf("== %s, all its collective tables at once\n", cl.name);
            print_fit(all, calibrate_on(all, cl, ref, topo, true), rows);
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace zerosim::multinode;
    const zerosim::bench::Args args(argc, argv,
                                    "The collective model against every public multi-node nccl-tests table: per table the median\n"
                                    "time error below and from 1 MiB and the algorithm predicted per size range.",
                                    {{"--rows", nullptr, "also print every row: size, predicted and measured time"},
                                     {"--calibrated", nullptr,
                                      "instead: calibrate the network on each table of a cluster and predict the cluster's other tables"}});
    const bool rows = args.has("--rows");
    const std::string ref = std::string(ZEROSIM_SHARED_DIR) + "/reference/nccl-tests-multinode";
    const std::string topo = std::string(ZEROSIM_SOURCE_DIR) + "/topologies";
    if (args.has("--calibrated")) return print_calibrated(ref, topo, rows);
    std::printf("%-66s %-9s %-13s %5s %8s %8s\n", "table", "role", "topology", "nodes", "<1MiB", ">=1MiB");
    for (const TableCase& c : cases()) {
        TableResult r = evaluate(c, ref, topo);
        if (!r.error.empty()) {
            std::printf("%-66s %-9s cannot compare: %s\n", c.file, role_name(c.role), r.error.c_str());
            continue;
        }
        std::printf("%-66s %-9s %-13s %5lld %8s %8s\n", c.file, role_name(c.role), c.topology, static_cast<long long>(c.nodes),
                    pct(r.median_small).c_str(), pct(r.median_large).c_str());
        std::printf("    predicted: %s\n", algorithm_ranges(r).c_str());
        if (*c.nccl_named) std::printf("    NCCL ran:  %s\n", c.nccl_named);
        if (rows) print_rows(r);
    }
    return 0;
}
