// A model built under deepspeed.zero.Init: what its construction costs on the network, outside
// the steps and outside the comms log (engine.hpp zero_init_construction_seconds).
#include <map>

#include "timing/engine.hpp"

namespace zerosim {

// partition_parameters.py _zero_init_param: as each parameter is constructed, rank 0's values are
// broadcast to every rank (in the model's dtype), then partitioned; one broadcast per parameter,
// one after the other, before deepspeed.initialize.
double zero_init_construction_seconds(const Schedule& s, const Topology& t) {
    if (!s.meta.zero_init || s.meta.world <= 1) return 0.0;
    std::map<int64_t, double> by_bytes;   // many parameters share a shape
    double total = 0;
    for (const auto& p : s.params) {
        const int64_t bytes = p.numel * dtype_size(s.meta.model_dtype);
        auto it = by_bytes.find(bytes);
        if (it == by_bytes.end())
            it = by_bytes.emplace(bytes, simulate_single_collective(t, OpKind::Broadcast, static_cast<double>(bytes), s.meta.world))
                     .first;
        total += it->second;
    }
    return total;
}

}  // namespace zerosim
