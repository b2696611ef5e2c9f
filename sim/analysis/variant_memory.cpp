// Memory the ZeRO++ and MiCS variants add on top of stage 3's model states (DeepSpeed v0.14.2;
// ../shared/docs/zero-variants.md). MiCS itself needs no item: its partitions are ceil(numel / s),
// which estimate_memory takes from the schedule's shard count.
#include "variant_memory.hpp"
#include "core/sizes.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "formats/comms_log.hpp"
#include "schedule/partition.hpp"

namespace zerosim {

void add_variant_memory(MemoryEstimate& e, const Model& m, const DsConfig& cfg, const Schedule& s) {
    const ZeroVariants& v = s.meta.variants;
    if (cfg.zero.stage != 3 || !v.any()) return;
    const int64_t b = dtype_size(cfg.model_dtype);
    if (v.hpz > 1) {
        // partition_parameters.py _partition_param_sec: a second partition of ceil(m/n)·n/k elements
        // per parameter, kept between releases (dropped only after each step, made again at the next release).
        int64_t sec = 0;
        for (const auto& p : m.params) sec += stage3_partition_numel(p.numel, s.meta.world) * s.meta.world / v.hpz;
        e.items.push_back({"hpZ secondary partitions", "parameters", sec * b,
                           "each parameter also held in " + std::to_string(v.hpz) +
                               " pieces for the hpZ group (zero_hpz_partition_size): ceil(numel / N) x N / k per rank"});
    }
    // The largest quantized exchange alive at once: qwZ's int8 gather (input and the group's output,
    // then its scales), qgZ's per-gradient int4 buffers and scales (input and output of each all_to_all).
    int64_t qwz = 0, qgz = 0;
    std::map<std::tuple<int, int, int>, int64_t> per_gradient;   // (step, micro, parameter): one exchange
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.payload == Payload::QuantizedShards) {
            int64_t n = std::max<int64_t>(s.meta.group_size(op.group), 1);
            int64_t scales = i + 1 < s.ops.size() ? s.ops[i + 1].bytes() : 0;
            qwz = std::max(qwz, (1 + n) * (op.bytes() + scales));
        }
        if (op.kind == OpKind::AllToAll && !op.params.empty()) per_gradient[{op.step, op.micro, op.params[0]}] += 2 * op.bytes();
    }
    for (const auto& [p, bytes] : per_gradient) qgz = std::max(qgz, bytes);
    if (qwz > 0)
        e.items.push_back({"qwZ int8 gather buffers (peak)", "buckets", qwz,
                           "zero_quantized_weights: the int8 partition and scales, and the group's gathered int8 copy, "
                           "before dequantizing"});
    if (qgz > 0)
        e.items.push_back({"qgZ int4 exchange buffers (peak)", "buckets", qgz,
                           "zero_quantized_gradients: input and output of the four all_to_all of the largest gradient"});
}

void move_offloaded_to_host(MemoryEstimate& e, const DsConfig& cfg) {
    const auto& z = cfg.zero;
    if (z.stage == 0 || (!z.offload_optimizer && !(z.offload_param && z.stage == 3))) return;
    int64_t moved = 0;
    for (auto& it : e.items) {
        const bool opt = z.offload_optimizer && (it.name == "fp32 master partition, Adam m and v" ||
                                                 it.name == "fp32 gradient partition for the step");
        const bool par = z.offload_param && z.stage == 3 && it.name == "parameter partitions";
        if (!opt && !par) continue;
        it.name = "host: " + it.name;
        it.category = "host";
        it.why += opt ? " (offload_optimizer: in host memory, updated by the CPU optimizer)"
                      : " (offload_param: in host memory, copied to the device for each gather)";
        moved += it.bytes;
    }
    if (moved > 0)
        e.differences.push_back("offloaded states (" + binary_size_string(moved) +
                                ") are in host memory, left out of the per-rank device total");
}

}  // namespace zerosim
