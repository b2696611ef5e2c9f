// Offloaded states against a node's RAM (analysis/fit.hpp host_per_node, memory_report.hpp
// fit_with_host): every rank of a node keeps its own offloaded states in the node's memory, so the
// node holds the per-rank host items times its ranks (at most the world). Figures worked by hand.
#include <gtest/gtest.h>

#include "analysis/fit.hpp"
#include "analysis/memory_report.hpp"

namespace zerosim {
namespace {

MemoryEstimate with_host(int64_t gpu_bytes, int64_t host_bytes) {
    MemoryEstimate e;
    e.items.push_back({"parameters", "parameters", gpu_bytes, ""});
    e.items.push_back({"host: optimizer states", "host", host_bytes, ""});
    return e;
}

TEST(HostFit, ANodeHoldsItsRanksOffloadedStates) {
    FitOptions o;
    o.gpu_memory_gb = 80;
    o.host_memory_gb = 2048;
    o.ranks_per_node = 8;
    const int64_t per_rank = int64_t{74} << 30;   // 74 GiB of offloaded states per rank
    const FitEstimate f = fit_with_host(with_host(int64_t{10} << 30, per_rank), ActivationEstimate{}, o, 16);
    EXPECT_EQ(f.host_per_node, 8 * per_rank);      // 592 GiB on each 8-GPU node
    EXPECT_EQ(f.host_bytes, int64_t{2048} * 1'000'000'000);
    EXPECT_TRUE(f.host_fits());                    // 592 GiB = 635.7 GB of 2048 GB
    EXPECT_NE(fit_sentence(f).find("; host memory per node 592.00 GiB (offloaded states) of the node's 1907.35 GiB (2048 GB): fits"),
              std::string::npos)
        << fit_sentence(f);
    o.host_memory_gb = 512;                        // 592 GiB is 635.7 GB: more than 512 GB
    EXPECT_FALSE(fit_with_host(with_host(0, per_rank), ActivationEstimate{}, o, 16).host_fits());
    // A world of 2 on an 8-GPU node: two ranks' states, not eight.
    EXPECT_EQ(fit_with_host(with_host(0, per_rank), ActivationEstimate{}, o, 2).host_per_node, 2 * per_rank);
}

TEST(HostFit, NoOffloadNoHostClauseAndAnUnknownNodeSaysSo) {
    FitOptions o;
    o.gpu_memory_gb = 80;
    o.ranks_per_node = 8;
    const FitEstimate none = fit_with_host(with_host(int64_t{10} << 30, 0), ActivationEstimate{}, o, 8);
    EXPECT_EQ(fit_sentence(none).find("host memory"), std::string::npos) << fit_sentence(none);
    const FitEstimate unknown = fit_with_host(with_host(0, int64_t{1} << 30), ActivationEstimate{}, o, 8);
    EXPECT_NE(fit_sentence(unknown).find("fit unknown, no host.memory_gb in the topology"), std::string::npos)
        << fit_sentence(unknown);
}

}  // namespace
}  // namespace zerosim
