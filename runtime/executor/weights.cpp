// The weight dump: each rank's fp32 master elements, for tests that compare stages with each
// other and with the single-process reference (--dump-weights).
#include <fstream>
#include <limits>
#include <stdexcept>

#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

void Executor::dump_weights(const std::string& prefix) const {
    // Stage 0 holds everything everywhere: rank 0 speaks for all.
    if (layout_ == PartitionKind::Replicated && rank_ != 0) return;
    std::ofstream f(dump_path(prefix, grank_), std::ios::binary);
    for (size_t p = 0; p < s_.params.size(); ++p) {
        const Owned& o = owned_[p];
        if (o.hi <= o.lo) continue;
        int32_t pi = static_cast<int32_t>(p);
        int64_t off = o.lo, n = o.hi - o.lo;
        f.write(reinterpret_cast<const char*>(&pi), 4);
        f.write(reinterpret_cast<const char*>(&off), 8);
        f.write(reinterpret_cast<const char*>(&n), 8);
        f.write(reinterpret_cast<const char*>(units_[o.unit].master.as<float>() + o.base + o.lo), n * 4);
    }
    if (!f) throw std::runtime_error("cannot write " + dump_path(prefix, grank_));
}

}  // namespace detail

std::string dump_path(const std::string& prefix, int rank) { return prefix + ".rank" + std::to_string(rank) + ".bin"; }

zerosim::Result<std::vector<std::vector<float>>> read_weight_dumps(const std::string& prefix, int world,
                                                                   const std::vector<zerosim::ScheduleParam>& params) {
    std::vector<std::vector<float>> w;
    for (const auto& p : params) w.emplace_back(static_cast<size_t>(p.numel), std::numeric_limits<float>::quiet_NaN());
    for (int r = 0; r < world; ++r) {
        std::ifstream f(dump_path(prefix, r), std::ios::binary);
        if (!f) continue;   // stage 0: only rank 0 writes
        for (;;) {
            int32_t p;
            int64_t off, n;
            if (!f.read(reinterpret_cast<char*>(&p), 4)) break;
            f.read(reinterpret_cast<char*>(&off), 8);
            f.read(reinterpret_cast<char*>(&n), 8);
            if (!f || p < 0 || p >= static_cast<int32_t>(params.size()) || off < 0 || n < 0 || off + n > params[p].numel)
                return zerosim::Error{dump_path(prefix, r), "", "corrupt weight dump"};
            f.read(reinterpret_cast<char*>(w[p].data() + off), n * 4);
        }
    }
    return w;
}

}  // namespace zerorun
