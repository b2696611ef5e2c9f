// Parameter gathers and broadcasts: this rank's part of the weights into the op's buffer, the
// gathered or broadcast weights into the working copy, each checked against the reference.
#include <cstring>

#include "backends/dtype.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

// Stage 3 gathers: input = this rank's shards of the op's parameters, concatenated in op order;
// output = every group member's input in group order; parameter p is rebuilt from chunk p of each.
// On the world or MiCS's shard group the shards are the primary partition (ceil(m/cut)). On hpZ's
// group they are the secondary partition: the primary padded to the world (ceil(m/n)*n) cut in k
// pieces, member j holding piece j (DeepSpeed v0.14.2 partition_parameters.py _partition_param_sec),
// built from the full parameter when it was last gathered and released, which is the working copy
// here: a stale one (an update since) is a broken schedule, as hpZ drops it after each step.
void Executor::shard_gather(const Op& op, OpRecord& rec) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    const GroupView& g = group_of(op);
    const bool secondary = op.group == zerosim::GroupKind::Hpz;
    std::vector<int64_t> piece;
    int64_t per_rank = 0;
    for (int p : op.params) {
        piece.push_back(secondary ? part_[p] * world_ / g.size() : part_[p]);
        per_rank += piece.back();
    }
    Buffer in = comm_buffer(per_rank, t), out = comm_buffer(per_rank * g.size(), t);
    int64_t pos = 0;
    for (size_t k = 0; k < op.params.size(); ++k) {
        const int p = op.params[k];
        if (secondary) {
            if (work_version_[p] != updates_[p])
                broken(op, "gathers the secondary partition of " + s_.params[p].name + " after an update dropped it");
            for (int64_t j = 0; j < piece[k]; ++j) {
                int64_t i = g.index * piece[k] + j;
                store_element(static_cast<char*>(in.data()), t, pos + j, i < numel(p) ? load_element(work_[p].data(), mdt(), i) : 0.0);
            }
        } else {
            std::memcpy(static_cast<char*>(in.data()) + pos * es, shard_[p].data(), static_cast<size_t>(part_[p]) * es);
        }
        pos += piece[k];
    }
    timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), per_rank, t); });
    Check c;
    for (int r = 0; r < g.size(); ++r) {
        int64_t at = r * per_rank;
        for (size_t k = 0; k < op.params.size(); ++k) {
            const int p = op.params[k];
            for (int64_t j = 0; j < piece[k]; ++j) {
                int64_t i = r * piece[k] + j;
                if (i >= numel(p)) continue;
                const char* src = static_cast<const char*>(out.data()) + (at + j) * es;
                std::memcpy(static_cast<char*>(work_[p].data()) + i * es, src, es);
                double got = load_element(src, t, 0);
                if (r == g.index) c.see(got == load_element(in.data(), t, at - r * per_rank + j));
                else check_weight(c, op, p, i, got);
            }
            at += piece[k];
        }
    }
    for (int p : op.params) work_version_[p] = updates_[p];
    finish(rec, c);
}

// Stages 1/2 and the BF16 optimizer after the step: each rank's updated partition of a group,
// in the model dtype, gathered into the group's padded flat buffer.
void Executor::partition_gather(const Op& op, OpRecord& rec) {
    const zerosim::GroupPartition& G = s_.meta.partition.groups[op.param_group];
    Unit& u = units_[op.param_group];   // unit g is group g's partition (build_state)
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    Buffer in = comm_buffer(u.size, t), out = comm_buffer(u.size * world_, t);
    pack_floats(u.master.as<float>(), in.data(), t, u.size);
    timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), u.size, t); });
    Check c;
    const char* flat = static_cast<const char*>(out.data());
    for (size_t k = 0; k < G.order.size(); ++k) {
        const int p = G.order[k];
        const int64_t off = G.offsets[k];
        std::memcpy(work_[p].data(), flat + off * es, static_cast<size_t>(numel(p)) * es);
        for (int64_t i = 0; i < numel(p); ++i) {
            double got = load_element(flat, t, off + i);
            const Owned& o = owned_[p];
            if (i >= o.lo && i < o.hi) c.see(got == load_element(in.data(), t, o.base + i));
            else check_weight(c, op, p, i, got);
        }
        work_version_[p] = updates_[p];
    }
    finish(rec, c);
}

// Engine-start broadcasts of whole parameters (and stage 3's _zero_init_param): the root's
// working copy overwrites everyone's.
void Executor::parameter_broadcast(const Op& op, OpRecord& rec) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    // One whole parameter in its own dtype (DeepSpeed's dist.broadcast(p, src)): in place on
    // the working copy. Otherwise through a staging buffer.
    const bool in_place = op.params.size() == 1 && t == mdt() && op.elements == numel(op.params[0]);
    Buffer b;
    if (in_place) {
        timed_call(rec, [&] { be_.broadcast(work_[op.params[0]].data(), op.elements, t, op.root); });
    } else {
        b = comm_buffer(op.elements, t);
        int64_t pos = 0;
        for (int p : op.params) {
            std::memcpy(static_cast<char*>(b.data()) + pos * es, work_[p].data(), static_cast<size_t>(numel(p)) * es);
            pos += numel(p);
        }
        timed_call(rec, [&] { be_.broadcast(b.data(), op.elements, t, op.root); });
    }
    Check c;
    int64_t pos = 0;
    for (int p : op.params) {
        if (!in_place)
            std::memcpy(work_[p].data(), static_cast<const char*>(b.data()) + pos * es, static_cast<size_t>(numel(p)) * es);
        for (int64_t i = 0; i < numel(p); ++i) check_weight(c, op, p, i, load_element(work_[p].data(), t, i));
        pos += numel(p);
        work_version_[p] = updates_[p];
        if (updates_[p] == 0) take_initial_value(p);
    }
    finish(rec, c);
}

}  // namespace detail
}  // namespace zerorun
