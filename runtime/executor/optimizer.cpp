// The optimizer step: Adam over the fp32 state this rank owns, as the schedule's partition layout
// cuts it, then the working copies that need no gather brought up to date.
#include <algorithm>

#include "backends/dtype.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

// The units an optimizer-step op updates (check_schedule has matched its size to the layout):
// every unit (Replicated), its group's partition (FlatGroups), or the shards of the stage-3
// sub-group its `params` list (PerParameter).
std::vector<int> Executor::units_of_step(const Op& op) {
    std::vector<int> us;
    int64_t total = 0;
    if (layout_ == PartitionKind::Replicated) {
        for (size_t u = 0; u < units_.size(); ++u) us.push_back(static_cast<int>(u));
    } else if (layout_ == PartitionKind::FlatGroups) {
        us.push_back(op.param_group);
    } else {
        for (int p : op.params) us.push_back(owned_[p].unit);
    }
    for (int u : us) total += units_[u].size;
    if (total != op.elements)
        broken(op, "covers " + std::to_string(op.elements) + " elements; this rank's state for it has " +
                       std::to_string(total));
    return us;
}

void Executor::optimizer_step(const Op& op) {
    std::vector<int> us = units_of_step(op);
    if (verify_ && shadow_step_ != op.step) {
        if (!real_update(op.step)) shadow_->step(op.step);   // a real model's reference (pipeline_mlp.cpp), or the loss's
        shadow_step_ = op.step;
    }
    for (int ui : us) {
        Unit& u = units_[ui];
        // Averaged over the group the unit is cut over (ZeRO's; MoE experts' expert-data group).
        const int cut = cut_group(u.params.at(0)).size();
        const float scale = 1.0f / static_cast<float>(cut * s_.meta.grad_accum);
        float* g = u.grad.as<float>();
        if (u.grad_step != op.step) std::fill(g, g + u.size, 0.0f);  // no gradient arrived
        for (int64_t i = 0; i < u.size; ++i) g[i] *= scale;
        adam_update(u.master.as<float>(), u.m.as<float>(), u.v.as<float>(), g, u.size, ++u.adam_t, adam_);
        std::fill(g, g + u.size, 0.0f);
        u.grad_step = -1000;
        for (int p : u.params) {
            ++updates_[p];
            if (layout_ == PartitionKind::PerParameter) refresh_shard(p);
            // Nothing gathers what every rank holds already: the working copy is updated here.
            if (layout_ == PartitionKind::Replicated || cut == 1) {
                const Owned& o = owned_[p];
                pack_floats(u.master.as<float>() + o.base + o.lo, static_cast<char*>(work_[p].data()), mdt(),
                            o.hi - o.lo);
                work_version_[p] = updates_[p];
            }
        }
    }
}

}  // namespace detail
}  // namespace zerorun
