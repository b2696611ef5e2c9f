// The host caches put in the state a training step leaves them in between two ops: the step's
// compute walks through far more memory than the caches hold, so an op finds the MPI library's
// buffers and everything it did not just write cold. One class for the two places that need it
// (zerorun's timed ops with --evict-before-op, and the fenced bench calls with --bench-evict), so
// that a calibration round and the ops it predicts are measured in the same conditions.
#pragma once

#include <cstdint>
#include <vector>

namespace zerorun {

class HostCacheEvictor {
  public:
    explicit HostCacheEvictor(int64_t bytes = 0);
    // Writes one byte per cache line of its buffer (plain stores: memset may bypass the caches
    // for large sizes). Nothing when built with 0 bytes.
    void evict();
    int64_t bytes() const { return static_cast<int64_t>(scratch_.size()); }

  private:
    std::vector<unsigned char> scratch_;
};

}  // namespace zerorun
