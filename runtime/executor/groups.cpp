// Process groups (issue 17 part 5): the sub-communicators of hpZ and MiCS, created once at start,
// each op's collective run on its group, and MiCS's replication all_reduce of the shard-group
// gradient partitions.
#include <algorithm>
#include <cmath>

#include "backends/dtype.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

// GroupKind::Dp is the world. Every other group kind of meta.groups cuts the world into disjoint sets;
// each rank joins the set holding it, as DeepSpeed v0.14.2 creates one torch process group per
// set (utils/groups.py _create_zero_param_parallel_group for hpZ, runtime/zero/mics_utils.py
// create_mics_comm_groups for MiCS's shard and replication groups).
void Executor::build_groups() {
    GroupView dp;
    dp.index = rank_;
    for (int r = 0; r < world_; ++r) dp.members.push_back(r);
    groups_[zerosim::GroupKind::Dp] = dp;
    for (const auto& g : s_.meta.groups) {
        GroupView v;
        int color = -1;
        for (size_t k = 0; k < g.members.size(); ++k) {
            auto it = std::find(g.members[k].begin(), g.members[k].end(), rank_);
            if (it == g.members[k].end()) continue;
            color = static_cast<int>(k);
            v.members = g.members[k];
            v.index = static_cast<int>(it - g.members[k].begin());
        }
        if (color < 0) throw std::runtime_error(std::string("process group ") + zerosim::group_name(g.kind) + " has no set holding rank " + std::to_string(rank_));
        v.handle = be_.split_group(color);
        if (v.handle < 0)
            throw std::runtime_error("the " + be_.name() + " backend has no sub-communicators for group " + zerosim::group_name(g.kind));
        groups_[g.kind] = v;
    }
    quantized_ = s_.meta.variants.qwz || s_.meta.variants.qgz;
    work_qerr_.assign(s_.params.size(), 0.0);
    auto mics = groups_.find(zerosim::GroupKind::MicsShard);
    shard_group_ = mics == groups_.end() ? &groups_.at(zerosim::GroupKind::Dp) : &mics->second;
}

const GroupView& Executor::group_of(const Op& op) const {
    auto it = groups_.find(op.group);
    if (it == groups_.end()) broken(op, std::string("names group ") + zerosim::group_name(op.group) + ", not in meta.groups");
    return it->second;
}

// MiCS at the accumulation boundary (DeepSpeed v0.14.2 mics.py allreduce_mics_shard_grads): each
// rank's gradient partition of every parameter of the op, which the shard-group reduce-scatter
// left holding its shard group's sum, all-reduced over the replication group ({i, i+s, ...}) so it
// holds the whole world's sum. Checked against that sum, recomputed from the loss.
void Executor::mics_replica_all_reduce(const Op& op, OpRecord& rec) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    int64_t n = 0;
    for (int p : op.params) n += part_[p];
    if (n != op.elements) broken(op, "carries " + std::to_string(op.elements) + " elements, the partitions hold " + std::to_string(n));
    Buffer b = comm_buffer(n, t);
    int64_t pos = 0;
    for (int p : op.params) {
        const Owned& o = owned_[p];
        Unit& u = units_[o.unit];
        if (u.grad_step != op.step) broken(op, "all-reduces the partition of " + s_.params[p].name + " before its reduce-scatter");
        pack_floats(u.grad.as<float>(), static_cast<char*>(b.data()) + pos * es, t, part_[p]);
        pos += part_[p];
    }
    timed_call(rec, [&] { be_.all_reduce(b.data(), b.data(), n, t, op.redop); });
    Check c;
    pos = 0;
    for (int p : op.params) {
        Unit& u = units_[owned_[p].unit];
        const bool have = verify_ && mics_expect_step_[p] == op.step;
        for (int64_t j = 0; j < part_[p]; ++j, ++pos) {
            double v = load_element(b.data(), t, pos);
            u.grad.as<float>()[j] = static_cast<float>(v);
            if (have) c.see(std::fabs(v - mics_expect_[p][j].first) <= mics_expect_[p][j].second);
        }
    }
    finish(rec, c);
}

}  // namespace detail
}  // namespace zerorun
