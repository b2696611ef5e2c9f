// The OpenMPI transport model of topologies/localhost.json (sim/timing/mpi_transport.cpp), derived
// by hand from the algorithms' bytes (docs/mpi-collectives.md), 4 ranks.
#include <gtest/gtest.h>

#include "schedule/collective_table.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

CollectivePlan localhost_plan(OpKind k, double buffer_bytes) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return plan_collective(t.value(), k, logged_bytes_of_buffer(k, buffer_bytes, 4), 4);
}

}  // namespace

// reduce_scatter_block on 4 ranks: recursive halving below a 1 MiB block moves (p-1)/p S = 0.75 S;
// linear from a 1 MiB block (a 4 MiB buffer) moves (p-1) S + (p-1)/p S = 3.75 S over all ranks,
// shared by the 4 ranks of one host: 0.9375 S. The root-bound 3.75 S made the 4 MiB call 10x the
// 2 MiB one; measured 1.8-2.0x (docs/mpi-collectives.md).
TEST(MpiTransport, ReduceScatterLinearIsTheTotalSharedByTheRanks) {
    const double mib = 1 << 20;
    CollectivePlan halving = localhost_plan(OpKind::ReduceScatter, 2 * mib);
    CollectivePlan linear = localhost_plan(OpKind::ReduceScatter, 4 * mib);
    EXPECT_DOUBLE_EQ(halving.intra_bytes, 0.75 * 2 * mib);
    EXPECT_DOUBLE_EQ(linear.intra_bytes, 3.75 * 4 * mib / 4);
    EXPECT_NEAR(linear.intra_bytes / halving.intra_bytes, 2.5, 1e-12);
}
