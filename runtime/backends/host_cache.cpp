#include "backends/host_cache.hpp"

#include <algorithm>

namespace zerorun {

HostCacheEvictor::HostCacheEvictor(int64_t bytes) : scratch_(static_cast<size_t>(std::max<int64_t>(0, bytes)), 0) {}

void HostCacheEvictor::evict() {
    // 64 bytes: the cache line of x86-64 and of the Arm server cores (Neoverse).
    for (size_t i = 0; i < scratch_.size(); i += 64) scratch_[i] = static_cast<unsigned char>(scratch_[i] + 1);
}

}  // namespace zerorun
