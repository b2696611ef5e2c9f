// Gradient reductions: the local gradients staged into the op's buffer as its payload lays them
// out, the reduced result taken into the partition this rank owns, and every element checked
// against the sum of all ranks' gradients, recomputed here from the loss.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/dtype.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;
using zerosim::Segment;

// The gradient element i of p this rank sends: its local accumulator.
float Executor::my_gradient(int p, int64_t i) const { return acc_[p].empty() ? 0.0f : acc_[p].as<float>()[i]; }

// What every rank's element adds up to, computed here from the loss (each rank's
// contribution is reproducible from the shared working copy and its targets), summed in rank
// order in the op's dtype. Returns {expected, tolerance}.
std::pair<double, double> Executor::expected_sum(const Op& op, int p, int64_t i) const {
    return expected_sum(op, p, i, groups_.at(zerosim::GroupKind::Dp).members);
}

// The same over a set of ranks (a sub-group's reduction: MiCS's shard group).
std::pair<double, double> Executor::expected_sum(const Op& op, int p, int64_t i, const std::vector<int>& ranks) const {
    const DType t = op.dtype;
    const float w = static_cast<float>(load_element(work_[p].data(), mdt(), i));
    double s = 0.0, mag = 0.0;
    bool first = true;
    for (int r : ranks) {
        double c = r == rank_ ? my_gradient(p, i) : local_gradient(spec_, w, r, op.step, pending_[p], p, i);
        c = round_to(t, c);
        s = first ? c : reduce_add(t, s, c);
        first = false;
        mag += std::fabs(c);
    }
    return {s, static_cast<double>(ranks.size()) * ulp(t, mag)};
}

// Takes a reduced gradient element into the owned partition (if this rank owns it).
void Executor::apply_gradient(const Op& op, int p, int64_t i, float v) {
    const Owned& o = owned_[p];
    if (i < o.lo || i >= o.hi) return;
    Unit& u = units_[o.unit];
    if (u.grad_step != op.step) {
        std::fill(u.grad.as<float>(), u.grad.as<float>() + u.size, 0.0f);
        u.grad_step = op.step;
    }
    u.grad.as<float>()[o.base + i] += v;
}

// The local accumulator of p has been sent for these elements; once all of p is, it is freed
// (stage 2/3 hold a gradient only until its bucket is reduced).
void Executor::consume(int p, int64_t n) {
    reduced_[p] += n;
    if (reduced_[p] >= numel(p)) {
        acc_[p].reset();
        pending_[p].clear();
        reduced_[p] = 0;
    }
}

// Gradient slices (stage 0-2 bucket reductions) and gradient buckets (stage 3's all_reduce
// flush): the buffer holds the op's segments, or its whole parameters, in order, then zeros up to
// `elements` (the BF16 optimizer's group padding).
void Executor::gradient_reduction(const Op& op, OpRecord& rec) {
    std::vector<Segment> segs;
    if (op.payload == zerosim::Payload::GradientBucket)
        for (int p : op.params) segs.push_back({p, 0, numel(p)});
    else
        segs = op.segments;
    const DType t = op.dtype;
    Buffer b = comm_buffer(op.elements, t);
    int64_t pos = 0;
    for (const auto& sg : segs) {
        if (acc_[sg.param].empty())
            broken(op, "reduces the gradient of " + s_.params[sg.param].name + " before any backward computed it");
        pack_floats(acc_[sg.param].as<float>() + sg.offset, static_cast<char*>(b.data()) + pos * zerosim::dtype_size(t),
                    t, sg.numel);
        pos += sg.numel;
    }
    const bool is_reduce = op.kind == OpKind::Reduce;
    const bool has_output = !is_reduce || rank_ == op.root;
    // Expected values are computed before the call (the accumulators are consumed after).
    std::vector<std::pair<double, double>> expect;
    if (verify_ && has_output) {
        expect.reserve(static_cast<size_t>(pos));
        for (const auto& sg : segs)
            for (int64_t i = 0; i < sg.numel; ++i) expect.push_back(expected_sum(op, sg.param, sg.offset + i));
    }
    if (is_reduce) timed_call(rec, [&] { be_.reduce(b.data(), b.data(), op.elements, t, op.redop, op.root); });
    else timed_call(rec, [&] { be_.all_reduce(b.data(), b.data(), op.elements, t, op.redop); });
    Check c;
    pos = 0;
    for (const auto& sg : segs) {
        for (int64_t i = 0; i < sg.numel; ++i, ++pos) {
            if (!has_output) {
                const Owned& o = owned_[sg.param];
                if (sg.offset + i >= o.lo && sg.offset + i < o.hi)
                    broken(op, "reduces to rank " + std::to_string(op.root) + " a gradient element rank " +
                                   std::to_string(rank_) + " owns");
                continue;
            }
            double v = load_element(b.data(), t, pos);
            if (!expect.empty()) c.see(std::fabs(v - expect[pos].first) <= expect[pos].second);
            apply_gradient(op, sg.param, sg.offset + i, static_cast<float>(v));
        }
        consume(sg.param, sg.numel);
    }
    for (int64_t i = pos; i < op.elements && has_output && verify_; ++i) c.see(load_element(b.data(), t, i) == 0.0);
    finish(rec, c, has_output);
}

// Stage 3: each gradient padded to cut * shard and interleaved by group rank (DeepSpeed's
// reduce_scatter_coalesced): member r's part holds chunk r of every parameter, in op order. The
// group is the world, or MiCS's shard group, whose result is the shard group's partial sum: the
// world's sum each element must reach after the replication all_reduce is kept for that op.
void Executor::stage3_reduce_scatter(const Op& op, OpRecord& rec) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    const GroupView& g = group_of(op);
    if (g.size() != shard_group_->size()) broken(op, std::string("reduce-scatters on group ") + zerosim::group_name(op.group) + ", not the one parameters are cut among");
    const bool partial = g.size() < world_;
    int64_t per_rank = 0;
    for (int p : op.params) per_rank += part_[p];
    Buffer in = comm_buffer(op.elements, t), out = comm_buffer(per_rank, t);
    char* base = static_cast<char*>(in.data());
    for (int r = 0; r < g.size(); ++r) {
        int64_t pos = r * per_rank;
        for (int p : op.params) {
            if (acc_[p].empty()) broken(op, "reduces the gradient of " + s_.params[p].name + " before any backward");
            int64_t lo = std::min(numel(p), r * part_[p]), hi = std::min(numel(p), (r + 1) * part_[p]);
            pack_floats(acc_[p].as<float>() + lo, base + pos * es, t, hi - lo);   // padding stays zero
            pos += part_[p];
        }
    }
    std::vector<std::pair<double, double>> expect;
    if (verify_)
        for (int p : op.params) {
            if (partial && mics_expect_step_[p] != op.step) {
                mics_expect_[p].assign(static_cast<size_t>(part_[p]), {0.0, 0.0});
                mics_expect_step_[p] = static_cast<int>(op.step);
            }
            for (int64_t j = 0; j < part_[p]; ++j) {
                int64_t i = g.index * part_[p] + j;
                expect.push_back(i < numel(p) ? expected_sum(op, p, i, g.members) : std::make_pair(0.0, 0.0));
                if (partial && i < numel(p)) {
                    auto whole = expected_sum(op, p, i);
                    mics_expect_[p][j].first += whole.first;
                    mics_expect_[p][j].second += whole.second;
                }
            }
        }
    timed_call(rec, [&] { be_.reduce_scatter(in.data(), out.data(), per_rank, t, op.redop); });
    Check c;
    int64_t pos = 0;
    for (int p : op.params) {
        for (int64_t j = 0; j < part_[p]; ++j, ++pos) {
            double v = load_element(out.data(), t, pos);
            if (!expect.empty()) c.see(std::fabs(v - expect[pos].first) <= expect[pos].second);
            int64_t i = g.index * part_[p] + j;
            if (i < numel(p)) apply_gradient(op, p, i, static_cast<float>(v));
        }
        consume(p, numel(p));
    }
    finish(rec, c);
}

}  // namespace detail
}  // namespace zerorun
