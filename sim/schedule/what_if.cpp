#include "schedule/what_if.hpp"

#include "schedule/what_if_fsdp.hpp"

namespace zerosim {

Result<int> apply_what_if(const std::string& name, Schedule& s) {
    if (auto fsdp = fsdp_strategy(name)) return apply_fsdp_what_if(*fsdp, s);
    if (name != "reduce-scatter") return Error{"", "--what-if", "unknown what-if '" + name + "'; expected " + kWhatIfNames};
    if (s.meta.stage != 1 && s.meta.stage != 2)
        return Error{"", "--what-if", "reduce-scatter changes stages 1 and 2's bucket all_reduce; this schedule is stage " +
                                          std::to_string(s.meta.stage)};
    const int64_t n = s.meta.world;
    int changed = 0;
    for (auto& op : s.ops) {
        if (op.rule != RuleId::Stage12FlushMultiRankAllreduce || op.kind != OpKind::AllReduce) continue;
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

namespace zerosim {

bool what_if_applies(const std::string& name, int stage) {
    return fsdp_strategy(name) ? stage == 3 : stage == 1 || stage == 2;
}

std::string what_if_note(const std::string& name, const Schedule& s, int changed) {
    const std::string head = "--what-if " + name + ": NOT DeepSpeed " + s.meta.release.number() + "'s schedule: ";
    if (name == "reduce-scatter")
        return head + std::to_string(changed) + " bucket all_reduce(s) sent as reduce_scatter_tensor, as DeepSpeed #6463/#7440 "
                      "propose (schedule/what_if.hpp)";
    return head + "PyTorch FSDP's " + (name == "fsdp-full-shard" ? "FULL_SHARD" : name == "fsdp-shard-grad-op" ? "SHARD_GRAD_OP" : "HYBRID_SHARD") +
           " on stage 3's compute, " + std::to_string(changed) + " units (one per transformer block and the root; "
           "docs/what-if.md)";
}

}  // namespace zerosim
