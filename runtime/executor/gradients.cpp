// Gradient reductions: the local gradients staged into the op's buffer as its payload lays them
// out, the reduced result taken into the partition this rank owns, and every element checked
// against the sum of all ranks' gradients, recomputed here from the loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "backends/dtype.hpp"
#include "handlers.hpp"

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
    return expected_sum(op, p, i, cut_group(p).members);
}

// The same over a set of global ranks (a sub-group's reduction: MiCS's shard group); each rank's
// loss is its place in the group p is cut over (ZeRO's, the world without a 3D layout).
std::pair<double, double> Executor::expected_sum(const Op& op, int p, int64_t i, const std::vector<int>& ranks) const {
    const DType t = op.dtype;
    const float w = static_cast<float>(load_element(work_[p].data(), mdt(), i));
    double s = 0.0, mag = 0.0;
    bool first = true;
    for (int g : ranks) {
        const int r = loss_rank(p, g);
        // Another rank's contribution: from the synthetic loss, or the real MLP's whole model run here.
        const std::vector<float>* real = r == cut_group(p).index ? nullptr : real_gradient(p, r, op.step, pending_[p]);
        double c = r == cut_group(p).index ? my_gradient(p, i)
                   : real                  ? (*real)[static_cast<size_t>(i)]
                                           : local_gradient(spec_, w, r, op.step, pending_[p], p, i);
        c = round_to(t, c);
        s = first ? c : reduce_add(t, s, c);
        first = false;
        mag += std::fabs(c);
    }
    return {s, static_cast<double>(ranks.size()) * ulp(t, mag)};
}

int Executor::loss_rank(int p, int global) const {
    const auto& m = cut_group(p).members;
    auto it = std::find(m.begin(), m.end(), global);
    if (it == m.end()) throw std::runtime_error("rank " + std::to_string(global) + " is not in the group " + s_.params[p].name + " is cut over");
    return static_cast<int>(it - m.begin());
}

// A real model's other ranks' gradients come from its reference, whose weights may differ from the
// run's in their last bits: once MPI has summed more than two ranks in another order than the
// reference's rank order (the MoE model's dense parameters over 4 ranks), or the optimizer has added
// micro batches' reduced sums where the reference adds each rank's micro batches first (stages 2 and
// 3 with gradient accumulation); and a gradient summed over many tokens can cancel to far below its
// terms. So each element is checked within 1e-5 of the op's largest expected magnitude, as the
// messages are, where that is looser than world x ulp.
void Executor::relax_for_real_model(std::vector<std::pair<double, double>>& expect) const {
    if (!(mlp_shadow_ || tp_shadow_ || moe_shadow_ || uly_shadow_)) return;
    double scale = 0.0;
    for (const auto& e : expect) scale = std::max(scale, std::fabs(e.first));
    for (auto& e : expect) e.second = std::max(e.second, 1e-5 * scale);
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
void GradientReduction::stage(const Op& op) {
    segs_.clear();
    expect_.clear();
    if (op.payload == Payload::GradientBucket)
        for (int p : op.params) segs_.push_back({p, 0, x.numel(p)});
    else
        segs_ = op.segments;
    const DType t = op.dtype;
    in_ = x.comm_buffer(op.elements, t);
    int64_t pos = 0;
    for (const auto& sg : segs_) {
        if (x.acc_[sg.param].empty())
            broken(op, "reduces the gradient of " + x.s_.params[sg.param].name + " before any backward computed it");
        pack_floats(x.acc_[sg.param].as<float>() + sg.offset, static_cast<char*>(in_.data()) + pos * zerosim::dtype_size(t),
                    t, sg.numel);
        pos += sg.numel;
    }
    // Expected values are computed before the call (the accumulators are consumed after).
    if (x.verify_ && has_output(op)) {
        expect_.reserve(static_cast<size_t>(pos));
        for (const auto& sg : segs_)
            for (int64_t i = 0; i < sg.numel; ++i) expect_.push_back(x.expected_sum(op, sg.param, sg.offset + i));
        x.relax_for_real_model(expect_);
    }
}

bool GradientReduction::has_output(const Op& op) const { return op.kind != OpKind::Reduce || x.group_of(op).index == op.root; }

void GradientReduction::call(const Op& op) {
    if (op.kind == OpKind::Reduce) x.be_.reduce(in_.data(), in_.data(), op.elements, op.dtype, op.redop, op.root);
    else x.be_.all_reduce(in_.data(), in_.data(), op.elements, op.dtype, op.redop);
}

Check GradientReduction::take(const Op& op) {
    const DType t = op.dtype;
    const bool output = has_output(op);
    Check c;
    int64_t pos = 0;
    for (const auto& sg : segs_) {
        for (int64_t i = 0; i < sg.numel; ++i, ++pos) {
            if (!output) {
                const Owned& o = x.owned_[sg.param];
                if (sg.offset + i >= o.lo && sg.offset + i < o.hi)
                    broken(op, "reduces to rank " + std::to_string(op.root) + " a gradient element rank " +
                                   std::to_string(x.rank_) + " owns");
                continue;
            }
            double v = load_element(in_.data(), t, pos);
            if (!expect_.empty())
                c.see(std::fabs(v - expect_[pos].first) <= expect_[pos].second, [&] {
                    char b[220];
                    std::snprintf(b, sizeof b, "%s[%lld] = %.9g, expected %.9g, tolerance %.3g", x.s_.params[sg.param].name.c_str(),
                                  static_cast<long long>(sg.offset + i), v, expect_[pos].first, expect_[pos].second);
                    return std::string(b);
                });
            x.apply_gradient(op, sg.param, sg.offset + i, static_cast<float>(v));
        }
        x.consume(sg.param, sg.numel);
    }
    for (int64_t i = pos; i < op.elements && output && x.verify_; ++i) c.see(load_element(in_.data(), t, i) == 0.0);
    return c;
}

// Stage 3: each gradient padded to cut * shard and interleaved by group rank (DeepSpeed's
// reduce_scatter_coalesced): member r's part holds chunk r of every parameter, in op order. The
// group is the world, or MiCS's shard group, whose result is the shard group's partial sum: the
// world's sum each element must reach after the replication all_reduce is kept for that op.
void GradientShardReduction::stage(const Op& op) {
    const DType t = op.dtype;
    const int es = zerosim::dtype_size(t);
    const GroupView& g = x.group_of(op);
    if (g.size() != x.shard_group_->size()) broken(op, std::string("reduce-scatters on group ") + zerosim::group_name(op.group) + ", not the one parameters are cut among");
    per_rank_ = 0;
    for (int p : op.params) per_rank_ += x.part_[p];
    in_ = x.comm_buffer(op.elements, t);
    out_ = x.comm_buffer(per_rank_, t);
    char* base = static_cast<char*>(in_.data());
    for (int r = 0; r < g.size(); ++r) {
        int64_t pos = r * per_rank_;
        for (int p : op.params) {
            if (x.acc_[p].empty()) broken(op, "reduces the gradient of " + x.s_.params[p].name + " before any backward");
            int64_t lo = std::min(x.numel(p), r * x.part_[p]), hi = std::min(x.numel(p), (r + 1) * x.part_[p]);
            pack_floats(x.acc_[p].as<float>() + lo, base + pos * es, t, hi - lo);   // padding stays zero
            pos += x.part_[p];
        }
    }
    expect(op, g);
}

// This rank's expected shard of the group's sum; on MiCS's shard group (a partial sum) also the
// world's sum, which the replication all_reduce must reach.
void GradientShardReduction::expect(const Op& op, const GroupView& g) {
    expect_.clear();
    if (!x.verify_) return;
    const bool partial = g.size() < x.world_;
    for (int p : op.params) {
        if (partial && sums_.step[p] != op.step) {
            sums_.sum[p].assign(static_cast<size_t>(x.part_[p]), {0.0, 0.0});
            sums_.step[p] = static_cast<int>(op.step);
        }
        for (int64_t j = 0; j < x.part_[p]; ++j) {
            int64_t i = g.index * x.part_[p] + j;
            expect_.push_back(i < x.numel(p) ? x.expected_sum(op, p, i, g.members) : std::make_pair(0.0, 0.0));
            if (partial && i < x.numel(p)) {
                auto whole = x.expected_sum(op, p, i);
                sums_.sum[p][j].first += whole.first;
                sums_.sum[p][j].second += whole.second;
            }
        }
    }
    x.relax_for_real_model(expect_);
}

void GradientShardReduction::call(const Op& op) { x.be_.reduce_scatter(in_.data(), out_.data(), per_rank_, op.dtype, op.redop); }

Check GradientShardReduction::take(const Op& op) {
    const GroupView& g = x.group_of(op);
    Check c;
    int64_t pos = 0;
    for (int p : op.params) {
        for (int64_t j = 0; j < x.part_[p]; ++j, ++pos) {
            double v = load_element(out_.data(), op.dtype, pos);
            if (!expect_.empty()) c.see(std::fabs(v - expect_[pos].first) <= expect_[pos].second);
            int64_t i = g.index * x.part_[p] + j;
            if (i < x.numel(p)) x.apply_gradient(op, p, i, static_cast<float>(v));
        }
        x.consume(p, x.numel(p));
    }
    return c;
}

}  // namespace detail
}  // namespace zerorun
