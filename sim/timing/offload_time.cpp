// ZeRO-Offload's PCIe copies and CPU optimizer step (timing/offload_time.hpp).
#include "timing/offload_time.hpp"

namespace zerosim {

double offload_seconds(const Topology& t, const Op& op, const ScheduleMeta& meta, double device_s) {
    const double pcie = t.host_pcie_gbs * 1e9;
    if (meta.offload_optimizer && op.kind == OpKind::Compute && op.compute == ComputeKind::OptimizerStep) {
        const double cpu = t.host_cpu_adam_gbs * 1e9;
        const double e = static_cast<double>(op.elements);
        double s = cpu > 0 ? static_cast<double>(op.mem_bytes) / cpu : 0.0;
        if (pcie > 0) s += e * (4.0 + dtype_size(meta.model_dtype)) / pcie;
        return s;
    }
    if (meta.offload_param && op.kind == OpKind::AllGather && op.caller == "allgather_fn" && pcie > 0 &&
        op.payload != Payload::QuantScales) {
        // qwZ quantizes on the device: the partition crosses PCIe in the model dtype, not as int8.
        const double bytes = op.payload == Payload::QuantizedShards
                                 ? static_cast<double>(op.elements) * dtype_size(meta.model_dtype)
                                 : static_cast<double>(op.bytes());
        return device_s + bytes / pcie;
    }
    return device_s;
}

}  // namespace zerosim
