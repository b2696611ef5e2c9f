#include "prediction/gathered_budget.hpp"

#include <algorithm>

#include "analysis/memory.hpp"

namespace zerosim {

int64_t gathered_parameter_budget(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t) {
    if (s.meta.stage != 3 || t.gpu_memory_gb <= 0) return INT64_MAX;
    MemoryEstimate m = estimate_memory(model, cfg, s);
    int64_t rest = 0;
    for (const auto& item : m.items)
        if (item.name != "gathered parameters (peak)") rest += item.bytes;
    return std::max<int64_t>(0, static_cast<int64_t>(t.gpu_memory_gb * 1e9) - rest);
}

}  // namespace zerosim
