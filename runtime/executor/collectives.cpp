// Checked collectives: each op's handler chosen by its payload kind, its staging buffers, and the
// check of every result against what it must be. Gradient payloads: gradients.cpp; parameter
// payloads: parameters.cpp; the payloads the runtime does not model: here.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;
using zerosim::Payload;

// Ops whose payload the runtime does not model (norms, overflow flags, trace lists) carry the
// backends' check pattern (check_pattern_value), exact under any reduction order.
void Executor::run_collective(const Op& op, OpRecord& rec) {
    // The op's process group for the backend call, the world again after (even on a throw).
    struct OnGroup {
        Backend& be;
        OnGroup(Backend& b, int handle) : be(b) { be.use_group(handle); }
        ~OnGroup() { be.use_group(-1); }
    } on_group(be_, group_of(op).handle);
    // Where a step's compute would have run (--evict-before-op): before the op's buffers are
    // staged, so it finds them just written and everything else cold, as in training.
    cold_.evict();
    if (op.group != zerosim::GroupKind::Dp && (op.payload == Payload::GradientBucket || op.payload == Payload::GradientSlices ||
                             op.payload == Payload::ParameterPartitions || op.payload == Payload::ParameterBroadcast))
        broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " on group " + zerosim::group_name(op.group) +
                       " (the runtime runs it on the world only)");
    switch (op.payload) {
        case Payload::Barrier:
            timed_call(rec, [&] { be_.barrier(); });
            rec.check = "none";
            return;
        case Payload::GradientBucket:
        case Payload::GradientSlices:
            return gradient_reduction(op, rec);
        case Payload::GradientShards:
            return stage3_reduce_scatter(op, rec);
        case Payload::ParameterShards:
            return shard_gather(op, rec);
        case Payload::ParameterPartitions:
            return partition_gather(op, rec);
        case Payload::ParameterBroadcast:
            return parameter_broadcast(op, rec);
        case Payload::OverflowFlag:
        case Payload::GradientNorm:
        case Payload::TraceCheck:
            return pattern_op(op, rec);
        case Payload::Compute:
            broken(op, "a compute payload on a collective");
        case Payload::GradientPartitions:
            return mics_replica_all_reduce(op, rec);
        case Payload::QuantizedShards:
            return qwz_gather_data(op, rec);
        case Payload::QuantScales:
            return op.kind == OpKind::AllGather ? qwz_gather_scales(op, rec) : qgz_exchange(op, rec);
        case Payload::QuantizedGradient:
            return qgz_exchange(op, rec);
    }
}

void Executor::finish(OpRecord& rec, const Check& c, bool has_output) {
    rec.checked = c.checked;
    rec.wrong = c.wrong;
    if (!has_output) rec.check = "none";
    else if (c.checked == 0) rec.check = "unchecked";
    else rec.check = c.wrong ? "wrong" : "ok";
    if (c.wrong)
        std::fprintf(stderr, "zerorun: rank %d: check failed: %s: %lld of %lld elements wrong%s%s\n", rank_,
                     op_label(s_.ops[&rec - records_.data()]).c_str(), static_cast<long long>(c.wrong),
                     static_cast<long long>(c.checked), c.first.empty() ? "" : "; first: ", c.first.c_str());
}

Buffer Executor::comm_buffer(int64_t elements, DType t) {
    return Buffer(mem_, MemCat::Buckets, static_cast<size_t>(elements) * zerosim::dtype_size(t));
}

// Tolerance for a gathered or broadcast weight against the shadow reference: its rounding in
// the op's dtype, plus the drift a different reduction order leaves after this many updates.
// fp32 sums differ in the last bits only. 16-bit gradients are rounded at other points by
// some stages (per micro-step) than by the reference; where an element's true gradient is
// below that rounding its sign can flip, and Adam then moves it by up to 2*lr per update.
// Misplaced or stale data is off by the weights' own scale (~0.5), far beyond either.
// qwZ/qgZ runs drift as 16-bit ones do: their gradients differ from the reference's by the
// quantization error, which can flip a small gradient's sign too.
double Executor::weight_tolerance(DType t, double w, int64_t updates) const {
    double drift = static_cast<double>(a_.lr) * static_cast<double>(updates) * (t == DType::FP32 && !quantized_ ? 1e-3 : 2.05);
    return 2.0 * ulp(t, w) + drift;
}

// Checks a received weight against the shadow reference (exact for this rank's own part).
void Executor::check_weight(Check& c, const Op& op, int p, int64_t i, double got) {
    if (!verify_) return;
    double want = shadow_->working(p, i);
    double tol = weight_tolerance(op.dtype, std::max(std::fabs(got), std::fabs(want)), updates_[p]);
    c.see(std::fabs(got - want) <= tol, [&] {
        char b[200];
        std::snprintf(b, sizeof b, "%s[%lld] = %.9g, reference %.9g, tolerance %.3g", s_.params[p].name.c_str(),
                      static_cast<long long>(i), got, want, tol);
        return std::string(b);
    });
}

// Payloads the runtime does not model (norms and overflow flags, all_reduced; trace lengths,
// broadcast): the IR's size, dtype, redop and root with a known pattern, checked exactly.
void Executor::pattern_op(const Op& op, OpRecord& rec) {
    const DType t = op.dtype;
    const int64_t n = op.elements;
    Check c;
    Buffer b = comm_buffer(n, t);
    if (op.kind == OpKind::AllReduce) {
        for (int64_t i = 0; i < n; ++i) store_element(b.data(), t, i, check_pattern_value(t, rank_, i));
        timed_call(rec, [&] { be_.all_reduce(b.data(), b.data(), n, t, op.redop); });
        for (int64_t i = 0; i < n; ++i) {
            double want = op.redop == zerosim::ReduceOp::Max ? -1e300 : 0.0;
            for (int r : group_of(op).members)
                want = op.redop == zerosim::ReduceOp::Max ? std::max(want, check_pattern_value(t, r, i))
                                                          : want + check_pattern_value(t, r, i);
            c.see(load_element(b.data(), t, i) == round_to(t, want));
        }
    } else if (op.kind == OpKind::Broadcast) {
        for (int64_t i = 0; i < n; ++i) store_element(b.data(), t, i, group_of(op).index == op.root ? check_pattern_value(t, op.root, i) : 77.0);
        timed_call(rec, [&] { be_.broadcast(b.data(), n, t, op.root); });
        for (int64_t i = 0; i < n; ++i) c.see(load_element(b.data(), t, i) == check_pattern_value(t, op.root, i));
    } else {
        broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " in a " + zerosim::op_record_name(op.kind));
    }
    finish(rec, c);
}

}  // namespace detail
}  // namespace zerorun
