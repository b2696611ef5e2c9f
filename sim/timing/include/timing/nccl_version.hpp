// Which NCCL release's tuner is predicted (--nccl, or the topology's "nccl": {"version": ...}):
// the algorithms that release has and the latency constants its tuner uses. Each gate names the
// release whose src/graph/tuning.cc (or src/include/devcomm.h) first has it.
#pragma once

#include <optional>
#include <string>

namespace zerosim {

struct NcclVersion {
    int major = 2, minor = 28;
    // "2.28", "2.18.5", "2.26.2+cuda12.8": major.minor, anything after ignored.
    static std::optional<NcclVersion> parse(const std::string& text);
    std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
    bool at_least(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }

    // CollNet Chain: NCCL_ALGO_COLLNET_CHAIN first in v2.14.3 (v2.13.4 has CollNet Direct only).
    bool has_collnet_chain() const { return at_least(2, 14); }
    // NVLS (single-node in-switch reduction): v2.17; NVLSTree (NVLS inside, tree across): v2.18.1.
    bool has_nvls() const { return at_least(2, 17); }
    bool has_nvls_tree() const { return at_least(2, 18); }
    // PAT (all_gather / reduce_scatter with one GPU per node): v2.23.4 (ncclPatEnable).
    bool has_pat() const { return at_least(2, 23); }
};

// The releases --nccl accepts by name, for its error message.
const char* known_nccl_versions();

}  // namespace zerosim
