// The handler table: which handler runs each payload kind, and the protocol every collective
// handler follows (handlers.hpp).
#include "handlers.hpp"

#include <algorithm>

namespace zerorun {
namespace detail {

using zerosim::OpKind;

// One row per payload the executor serves. A payload the IR gains without a row here is refused
// at the op (HandlerTable::at) and fails the coverage test (tests/runtime/test_payload_handlers.cpp).
struct HandlerTable::Registration {
    Payload payload;
    PayloadHandler& (*handler)(HandlerTable& t);
};

const std::vector<HandlerTable::Registration>& HandlerTable::registrations() {
    using T = HandlerTable;
    static const std::vector<Registration> rows = {
        {Payload::Compute, [](T& t) -> PayloadHandler& { return t.compute_; }},
        {Payload::Barrier, [](T& t) -> PayloadHandler& { return t.barrier_; }},
        {Payload::GradientBucket, [](T& t) -> PayloadHandler& { return t.reduction_; }},
        {Payload::GradientSlices, [](T& t) -> PayloadHandler& { return t.reduction_; }},
        {Payload::GradientShards, [](T& t) -> PayloadHandler& { return t.shard_reduction_; }},
        {Payload::GradientPartitions, [](T& t) -> PayloadHandler& { return t.replica_reduction_; }},
        {Payload::ParameterShards, [](T& t) -> PayloadHandler& { return t.shard_gather_; }},
        {Payload::ParameterPartitions, [](T& t) -> PayloadHandler& { return t.partition_gather_; }},
        {Payload::ParameterBroadcast, [](T& t) -> PayloadHandler& { return t.broadcast_; }},
        {Payload::OverflowFlag, [](T& t) -> PayloadHandler& { return t.pattern_; }},
        {Payload::GradientNorm, [](T& t) -> PayloadHandler& { return t.pattern_; }},
        {Payload::TraceCheck, [](T& t) -> PayloadHandler& { return t.pattern_; }},
        {Payload::QuantizedShards, [](T& t) -> PayloadHandler& { return t.qwz_; }},
        {Payload::QuantScales, [](T& t) -> PayloadHandler& { return t.scales_; }},
        {Payload::QuantizedGradient, [](T& t) -> PayloadHandler& { return t.qgz_; }},
        {Payload::Activations, [](T& t) -> PayloadHandler& { return t.model_data_; }},
        {Payload::Scalars, [](T& t) -> PayloadHandler& { return t.model_data_; }},
    };
    return rows;
}

HandlerTable::HandlerTable(Executor& x)
    : barrier_(x), pattern_(x), reduction_(x), shard_reduction_(x, mics_sums_), replica_reduction_(x, mics_sums_),
      shard_gather_(x), partition_gather_(x), broadcast_(x), qwz_(x), qgz_(x), scales_(x, qwz_, qgz_), p2p_(x),
      model_coll_(x), model_data_(x, p2p_, model_coll_), compute_(x) {
    mics_sums_.sum.resize(x.s_.params.size());
    mics_sums_.step.assign(x.s_.params.size(), -1000);
    for (const auto& r : registrations()) by_payload_[r.payload] = &r.handler(*this);
}

PayloadHandler& HandlerTable::at(const Op& op) const {
    auto it = by_payload_.find(op.payload);
    if (it == by_payload_.end()) broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " has no handler in zerorun");
    return *it->second;
}

bool HandlerTable::serves(Payload p) {
    const auto& rows = registrations();
    return std::any_of(rows.begin(), rows.end(), [p](const Registration& r) { return r.payload == p; });
}

void CollectiveHandler::run(const Op& op, OpRecord& rec) {
    // The op's process group for the backend call, the world again after (even on a throw).
    struct OnGroup {
        Backend& be;
        OnGroup(Backend& b, int handle) : be(b) { be.use_group(handle); }
        ~OnGroup() { be.use_group(-1); }
    } on_group(x.be_, x.group_of(op).handle);
    // Where a step's compute would have run (--evict-before-op): before the op's buffers are
    // staged, so it finds them just written and everything else cold, as in training.
    x.cold_.evict();
    if (on_params_group()) {
        std::vector<int> ps = op.params;
        for (const auto& sg : op.segments) ps.push_back(sg.param);
        for (int p : ps)
            if (&x.cut_group(p) != &x.group_of(op))
                broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " of " + x.s_.params[p].name + " on group " +
                               zerosim::group_name(op.group) + ", not the group its state is cut over");
    }
    stage(op);
    x.timed_call(rec, [&] { call(op); });
    Check c = take(op);
    x.finish(rec, c, has_output(op));
    in_.reset();
    out_.reset();
}

void QuantScalesRouter::run(const Op& op, OpRecord& rec) {
    if (op.kind == OpKind::AllGather) return qwz_.run(op, rec);
    if (op.kind == OpKind::AllToAll) return qgz_.run(op, rec);
    broken(op, std::string("payload quant_scales in a ") + zerosim::op_record_name(op.kind));
}

}  // namespace detail

bool executor_serves(zerosim::Payload p) { return detail::HandlerTable::serves(p); }

}  // namespace zerorun
