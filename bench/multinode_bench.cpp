// The collective model against every public multi-node nccl-tests table
// (../shared/reference/nccl-tests-multinode): per table the median time error below and from
// 1 MiB, whether the model was fitted on it, and the algorithm predicted per size range next to
// the one the table names. Run: build/bench/multinode_bench [--rows]
#include <cstdio>
#include <cstring>
#include <string>

#include "bench_args.hpp"
#include "multinode_tables.hpp"

int main(int argc, char** argv) {
    using namespace zerosim::multinode;
    const zerosim::bench::Args args(argc, argv,
                                    "The collective model against every public multi-node nccl-tests table: per table the median\n"
                                    "time error below and from 1 MiB and the algorithm predicted per size range.",
                                    {{"--rows", nullptr, "also print every row: size, predicted and measured time"}});
    const bool rows = args.has("--rows");
    const std::string ref = std::string(ZEROSIM_SHARED_DIR) + "/reference/nccl-tests-multinode";
    const std::string topo = std::string(ZEROSIM_SOURCE_DIR) + "/topologies";
    std::printf("%-66s %-9s %-13s %5s %8s %8s\n", "table", "role", "topology", "nodes", "<1MiB", ">=1MiB");
    for (const TableCase& c : cases()) {
        TableResult r = evaluate(c, ref, topo);
        if (!r.error.empty()) {
            std::printf("%-66s %-9s cannot compare: %s\n", c.file, role_name(c.role), r.error.c_str());
            continue;
        }
        auto pct = [](double v) { return std::isnan(v) ? std::string("-") : std::to_string(static_cast<int>(std::lround(100 * v))) + "%"; };
        std::printf("%-66s %-9s %-13s %5lld %8s %8s\n", c.file, role_name(c.role), c.topology, static_cast<long long>(c.nodes),
                    pct(r.median_small).c_str(), pct(r.median_large).c_str());
        std::printf("    predicted: %s\n", algorithm_ranges(r).c_str());
        if (*c.nccl_named) std::printf("    NCCL ran:  %s\n", c.nccl_named);
        if (rows) print_rows(r);
    }
    return 0;
}
