#include "prediction/gathered_budget.hpp"

#include <algorithm>

#include "analysis/memory.hpp"
#include "analysis/memory_report.hpp"

namespace zerosim {

int64_t gathered_parameter_budget(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t) {
    if (s.meta.stage != 3 || t.gpu_memory_gb <= 0) return INT64_MAX;
    // The fit line's memory (schedule_fit: model states on the device, activations, the framework's
    // reserve) without the gathered parameters it counts at their peak: what the GPU holds beside them.
    const MemoryEstimate states = estimate_memory(model, cfg, s);
    const FitEstimate fit = schedule_fit(model, cfg, s, FitOptions{false, 0, t.gpu_memory_gb, t.name, 0, 0}, states);
    int64_t gathered = 0;
    for (const auto& item : states.items)
        if (item.name == "gathered parameters (peak)") gathered += item.bytes;
    return std::max<int64_t>(0, fit.gpu_bytes - (fit.total() - gathered));
}

}  // namespace zerosim
