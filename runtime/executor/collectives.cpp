// What every checked collective shares: its staging buffers, the record of its check, the
// tolerance of a received weight; and the handler of the payloads the runtime does not model.
// Gradient payloads: gradients.cpp; parameter payloads: parameters.cpp; handlers.hpp the rest.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;

void Executor::finish(OpRecord& rec, const Check& c, bool has_output) {
    rec.checked = c.checked;
    rec.wrong = c.wrong;
    if (!has_output) rec.check = "none";
    else if (c.checked == 0) rec.check = "unchecked";
    else rec.check = c.wrong ? "wrong" : "ok";
    if (c.wrong)
        std::fprintf(stderr, "zerorun: rank %d: check failed: %s: %lld of %lld elements wrong%s%s\n", grank_,
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
    const std::vector<float>* real = real_weights(p);
    double want = real ? (*real)[static_cast<size_t>(i)] : shadow_->working(p, i);
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
void PatternHandler::stage(const Op& op) {
    const DType t = op.dtype;
    in_ = x.comm_buffer(op.elements, t);
    if (op.kind == OpKind::AllReduce) {
        for (int64_t i = 0; i < op.elements; ++i) store_element(in_.data(), t, i, check_pattern_value(t, x.grank_, i));
    } else if (op.kind == OpKind::Broadcast) {
        const bool root = x.group_of(op).index == op.root;
        for (int64_t i = 0; i < op.elements; ++i) store_element(in_.data(), t, i, root ? check_pattern_value(t, op.root, i) : 77.0);
    } else {
        broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " in a " + zerosim::op_record_name(op.kind));
    }
}

void PatternHandler::call(const Op& op) {
    if (op.kind == OpKind::AllReduce) x.be_.all_reduce(in_.data(), in_.data(), op.elements, op.dtype, op.redop);
    else x.be_.broadcast(in_.data(), op.elements, op.dtype, op.root);
}

Check PatternHandler::take(const Op& op) {
    const DType t = op.dtype;
    const bool max = op.redop == zerosim::ReduceOp::Max;
    Check c;
    for (int64_t i = 0; i < op.elements; ++i) {
        double want = 0.0;
        if (op.kind == OpKind::Broadcast) {
            want = check_pattern_value(t, op.root, i);
        } else {
            want = max ? -1e300 : 0.0;
            for (int r : x.group_of(op).members) want = max ? std::max(want, check_pattern_value(t, r, i)) : want + check_pattern_value(t, r, i);
            want = round_to(t, want);
        }
        c.see(load_element(in_.data(), t, i) == want);
    }
    return c;
}

}  // namespace detail
}  // namespace zerorun
