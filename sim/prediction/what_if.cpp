#include "prediction/what_if.hpp"

namespace zerosim {

Result<int> apply_what_if(const std::string& name, Schedule& s) {
    if (name == "fsdp-full-shard" || name == "fsdp-shard-grad-op" || name == "hybrid-shard")
        return Error{"", "--what-if", "'" + name + "' is not modelled yet; reduce-scatter is"};
    if (name != "reduce-scatter") return Error{"", "--what-if", "unknown what-if '" + name + "'; expected reduce-scatter"};
    if (s.meta.stage != 1 && s.meta.stage != 2)
        return Error{"", "--what-if", "reduce-scatter changes stages 1 and 2's bucket all_reduce; this schedule is stage " +
                                          std::to_string(s.meta.stage)};
    const int64_t n = s.meta.world;
    int changed = 0;
    for (auto& op : s.ops) {
        if (op.rule != "stage12.flush.multi_rank_allreduce" || op.kind != OpKind::AllReduce) continue;
        op.kind = OpKind::ReduceScatter;
        op.elements = (op.elements + n - 1) / n * n;   // equal chunks per rank
        op.caller = "reduce_scatter_tensor (what-if #7440)";
        ++changed;
    }
    if (changed == 0)
        return Error{"", "--what-if", "the schedule has no multi-rank bucket all_reduce to replace "
                                      "(use_multi_rank_bucket_allreduce: false sends reduces)"};
    return changed;
}

}  // namespace zerosim
