#include "prediction/bench_table.hpp"

#include <cstdint>

#include "timing/engine.hpp"

namespace zerosim {

std::vector<BenchRow> predict_bench_rows(const Topology& t, OpKind kind, int64_t world, int64_t min_bytes, int64_t max_bytes,
                                         int64_t factor, int gpus_per_thread, const TunerChoice& only,
                                         const EngineAdjust* adjust) {
    std::vector<BenchRow> rows;
    const CollectiveInfo& info = collective_info(kind);
    for (int64_t size = min_bytes; size <= max_bytes; size *= factor) {
        double logged = logged_bytes_of_buffer(kind, static_cast<double>(size), world);
        BenchRow r;
        r.bytes = size;
        r.count = size / 4;
        CollectivePlan plan;
        r.time_us = back_to_back_call_us(t, simulate_single_collective(t, kind, logged, world, &plan, only, adjust) * 1e6, gpus_per_thread);
        r.algorithm = algorithm_protocol_name(plan);
        r.algbw_gbs = r.time_us > 0 ? static_cast<double>(size) / (r.time_us * 1e3) : 0.0;
        r.busbw_gbs = r.algbw_gbs * info.bus_factor(world);
        rows.push_back(r);
        if (size > INT64_MAX / factor) break;
    }
    return rows;
}

}  // namespace zerosim
