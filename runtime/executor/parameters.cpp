// Parameter gathers and broadcasts: this rank's part of the weights into the op's buffer, the
// gathered or broadcast weights into the working copy, each checked against the reference.
#include <cstring>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

// Stage 3 gathers: input = this rank's shards of the op's parameters, concatenated in op order;
// output = every group member's input in group order; parameter p is rebuilt from chunk p of each.
// On the world or MiCS's shard group the shards are the primary partition (ceil(m/cut)). On hpZ's
// group they are the secondary partition: the primary padded to the world (ceil(m/n)*n) cut in k
// pieces, member j holding piece j (DeepSpeed v0.14.2 partition_parameters.py _partition_param_sec),
// built from the full parameter when it was last gathered and released, which is the working copy
// here: a stale one (an update since) is a broken schedule, as hpZ drops it after each step.
void ShardGather::stage(const Op& op) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    const GroupView& g = x.group_of(op);
    const bool secondary = g.role == GroupRole::HpzSecondary;
    piece_.clear();
    per_rank_ = 0;
    for (int p : op.params) {
        piece_.push_back(secondary ? x.part_[p] * x.world_ / g.size() : x.part_[p]);
        per_rank_ += piece_.back();
    }
    in_ = x.comm_buffer(per_rank_, t);
    out_ = x.comm_buffer(per_rank_ * g.size(), t);
    int64_t pos = 0;
    for (size_t k = 0; k < op.params.size(); ++k) {
        const int p = op.params[k];
        if (secondary) {
            if (x.work_version_[p] != x.updates_[p])
                broken(op, "gathers the secondary partition of " + x.s_.params[p].name + " after an update dropped it");
            for (int64_t j = 0; j < piece_[k]; ++j) {
                int64_t i = g.index * piece_[k] + j;
                store_element(static_cast<char*>(in_.data()), t, pos + j, i < x.numel(p) ? load_element(x.work_[p].data(), x.mdt(), i) : 0.0);
            }
        } else {
            std::memcpy(static_cast<char*>(in_.data()) + pos * es, x.shard_[p].data(), static_cast<size_t>(x.part_[p]) * es);
        }
        pos += piece_[k];
    }
}

void ShardGather::call(const Op& op) { x.be_.all_gather(in_.data(), out_.data(), per_rank_, op.dtype); }

Check ShardGather::take(const Op& op) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    const GroupView& g = x.group_of(op);
    Check c;
    for (int r = 0; r < g.size(); ++r) {
        int64_t at = r * per_rank_;
        for (size_t k = 0; k < op.params.size(); ++k) {
            const int p = op.params[k];
            for (int64_t j = 0; j < piece_[k]; ++j) {
                int64_t i = r * piece_[k] + j;
                if (i >= x.numel(p)) continue;
                const char* src = static_cast<const char*>(out_.data()) + (at + j) * es;
                std::memcpy(static_cast<char*>(x.work_[p].data()) + i * es, src, es);
                double got = load_element(src, t, 0);
                if (r == g.index) c.see(got == load_element(in_.data(), t, at - r * per_rank_ + j));
                else x.check_weight(c, op, p, i, got);
            }
            at += piece_[k];
        }
    }
    for (int p : op.params) x.work_version_[p] = x.updates_[p];
    return c;
}

// Stages 1/2 and the BF16 optimizer after the step: each rank's updated partition of a group,
// in the model dtype, gathered into the group's padded flat buffer. Unit g is group g's
// partition (build_state).
void PartitionGather::stage(const Op& op) {
    const Unit& u = x.units_[op.param_group];
    in_ = x.comm_buffer(u.size, op.dtype);
    out_ = x.comm_buffer(u.size * x.group_of(op).size(), op.dtype);
    pack_floats(u.master.as<float>(), in_.data(), op.dtype, u.size);
}

void PartitionGather::call(const Op& op) { x.be_.all_gather(in_.data(), out_.data(), x.units_[op.param_group].size, op.dtype); }

Check PartitionGather::take(const Op& op) {
    const zerosim::GroupPartition& G = x.s_.meta.partition.groups[op.param_group];
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    Check c;
    const char* flat = static_cast<const char*>(out_.data());
    for (size_t k = 0; k < G.order.size(); ++k) {
        const int p = G.order[k];
        const int64_t off = G.offsets[k];
        std::memcpy(x.work_[p].data(), flat + off * es, static_cast<size_t>(x.numel(p)) * es);
        for (int64_t i = 0; i < x.numel(p); ++i) {
            double got = load_element(flat, t, off + i);
            const Owned& o = x.owned_[p];
            if (i >= o.lo && i < o.hi) c.see(got == load_element(in_.data(), t, o.base + i));
            else x.check_weight(c, op, p, i, got);
        }
        x.work_version_[p] = x.updates_[p];
    }
    return c;
}

// Engine-start broadcasts of whole parameters (and stage 3's _zero_init_param): the root's
// working copy overwrites everyone's. One whole parameter in its own dtype (DeepSpeed's
// dist.broadcast(p, src)) goes in place on the working copy; otherwise through a staging buffer.
void ParameterBroadcast::stage(const Op& op) {
    const int es = zerosim::dtype_size(op.dtype);
    in_place_ = op.params.size() == 1 && op.dtype == x.mdt() && op.elements == x.numel(op.params[0]);
    if (in_place_) return;
    in_ = x.comm_buffer(op.elements, op.dtype);
    int64_t pos = 0;
    for (int p : op.params) {
        std::memcpy(static_cast<char*>(in_.data()) + pos * es, x.work_[p].data(), static_cast<size_t>(x.numel(p)) * es);
        pos += x.numel(p);
    }
}

void ParameterBroadcast::call(const Op& op) {
    void* b = in_place_ ? x.work_[op.params[0]].data() : in_.data();
    x.be_.broadcast(b, op.elements, op.dtype, op.root);
}

Check ParameterBroadcast::take(const Op& op) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    Check c;
    int64_t pos = 0;
    for (int p : op.params) {
        if (!in_place_)
            std::memcpy(x.work_[p].data(), static_cast<const char*>(in_.data()) + pos * es, static_cast<size_t>(x.numel(p)) * es);
        for (int64_t i = 0; i < x.numel(p); ++i) x.check_weight(c, op, p, i, load_element(x.work_[p].data(), t, i));
        pos += x.numel(p);
        x.work_version_[p] = x.updates_[p];
        if (x.updates_[p] == 0) x.take_initial_value(p);
    }
    return c;
}

}  // namespace detail
}  // namespace zerorun
