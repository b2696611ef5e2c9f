// The model's own data in a 3D layout (issue 29): pipeline point-to-point messages and the
// collectives of tensor, sequence, expert and pipeline groups (payloads `activations` and
// `scalars`). What DeepSpeed v0.14.2 sends there (../shared/docs/zero-in-3d.md): activations and
// their gradients between stages (runtime/pipe/engine.py _exec_send_activations,
// _exec_recv_activations, _exec_send_grads, _exec_recv_grads through p2p.py send/recv), the partial
// sums a row-parallel layer all_reduces, Ulysses' q/k/v/output all_to_alls (sequence/layer.py
// single_all_to_all), MoE's dispatch and combine (moe/sharded_moe.py _AllToAll), and scalars (the
// loss, parameter counts, norms). The runtime carries the IR's sizes and dtypes with synthetic
// contents: model_value, a function of who sends to whom, on which channel, the message's number
// there, the step and micro-step, so the receiver checks every element exactly.
#include <cmath>
#include <cstdio>

#include "backends/dtype.hpp"
#include "executor/loss.hpp"
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;

namespace {

// A value nobody sends: what a receive buffer holds until the data arrives.
constexpr double kUnsent = 99.0;

}  // namespace

// Integers 0..8: exact in every dtype, and so is a sum over up to 28 members (bf16's 8 bits).
double model_value(DType t, int from, int to, int64_t channel, int64_t n, int step, int micro, int64_t i) {
    uint64_t h = splitmix64(static_cast<uint64_t>(from) * 0x10001ull + static_cast<uint64_t>(to + 1));
    h = splitmix64(h ^ (static_cast<uint64_t>(channel) << 32) ^ static_cast<uint64_t>(n));
    h = splitmix64(h ^ (static_cast<uint64_t>(step + 2) << 40) ^ (static_cast<uint64_t>(micro + 2) << 20) ^ static_cast<uint64_t>(i));
    return round_to(t, static_cast<double>(h % 9));
}

void ModelDataRouter::run(const Op& op, OpRecord& rec) {
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return p2p_.run(op, rec);
    if (op.kind == OpKind::Compute || op.kind == OpKind::Barrier)
        broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " in a " + zerosim::op_record_name(op.kind));
    coll_.run(op, rec);
}

// One message: the sender fills it, the receiver starts from kUnsent and checks every element.
void PointToPoint::run(const Op& op, OpRecord& rec) {
    const bool send = op.kind == OpKind::Send;
    if (op.peer < 0 || op.peer >= x.be_.world() || op.peer == x.grank_)
        broken(op, "peer " + std::to_string(op.peer) + " is not another rank of the world (" + std::to_string(x.be_.world()) + ")");
    const int peer = static_cast<int>(op.peer);
    const int64_t n = seq_[{op.peer, send}]++;
    const int from = send ? x.grank_ : peer, to = send ? peer : x.grank_;
    const DType t = op.dtype;
    x.cold_.evict();
    Buffer buf = x.comm_buffer(op.elements, t);
    // A pipeline stage of the real MLP sends its real activations and activation gradients
    // (pipeline_mlp.cpp); the other messages (warm-up, tensor metadata) keep synthetic contents.
    const bool real = x.mlp_ && op.payload == zerosim::Payload::Activations;
    if (real && send) pack_floats(x.mlp_outgoing(op).data(), buf.data(), t, op.elements);
    for (int64_t i = 0; i < op.elements && !real; ++i)
        store_element(buf.data(), t, i, send ? model_value(t, from, to, -1, n, op.step, op.micro, i) : kUnsent);
    if (send && op.elements > 0 && x.corrupt_on_purpose(op)) store_element(buf.data(), t, 0, 42.0);
    x.timed_call(rec, [&] {
        if (send) x.be_.send(buf.data(), op.elements, t, peer);
        else x.be_.recv(buf.data(), op.elements, t, peer);
    }, false);
    Check c;
    if (real) {
        if (send) x.mlp_sent(op);
        else x.mlp_received(op, x.be_.host_view(buf.data()), c);
    } else if (!send && x.verify_)
        for (int64_t i = 0; i < op.elements; ++i) {
            const double want = model_value(t, from, to, -1, n, op.step, op.micro, i);
            const double got = load_element(x.be_.host_view(buf.data()), t, i);
            c.see(got == want, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "message %lld from rank %d, element %lld = %g, expected %g", static_cast<long long>(n),
                              from, static_cast<long long>(i), got, want);
                return std::string(b);
            });
        }
    x.finish(rec, c, !send);
}

bool ModelCollective::has_output(const Op& op) const { return op.kind != OpKind::Reduce || x.group_of(op).index == op.root; }

void ModelCollective::stage(const Op& op) {
    const GroupView& g = x.group_of(op);
    n_ = seq_[op.group]++;
    const DType t = op.dtype;
    const int W = g.size(), me = g.index;
    const int64_t channel = static_cast<int64_t>(op.group);
    auto val = [&](int member, int to, int64_t i) {
        return model_value(t, g.members[member], to < 0 ? -1 : g.members[to], channel, n_, op.step, op.micro, i);
    };
    // A tensor rank of the real tensor-parallel model sums its real partial sums (tensor_model.cpp).
    real_ = x.tp_ && op.group == zerosim::GroupKind::Tensor && op.payload == zerosim::Payload::Activations && op.kind == OpKind::AllReduce;
    // A rank of the real MoE model exchanges its real tokens and their gradients (moe_model.cpp).
    real_moe_ = x.moe_ && op.group == zerosim::GroupKind::Expert && op.payload == zerosim::Payload::Activations && op.kind == OpKind::AllToAll;
    // A rank of the real Ulysses model exchanges its real q, k, v and output (ulysses_model.cpp).
    real_uly_ = x.uly_ && op.group == zerosim::GroupKind::Sequence && op.payload == zerosim::Payload::Activations && op.kind == OpKind::AllToAll;
    switch (op.kind) {
        case OpKind::AllReduce:
        case OpKind::Reduce:
            count_ = op.elements;
            in_ = x.comm_buffer(count_, t);
            out_ = x.comm_buffer(count_, t);
            if (real_) pack_floats(x.tp_outgoing(op).data(), in_.data(), t, count_);
            for (int64_t i = 0; i < count_ && !real_; ++i) store_element(in_.data(), t, i, val(me, -1, i));
            break;
        case OpKind::Broadcast:
            count_ = op.elements;
            in_ = x.comm_buffer(count_, t);
            for (int64_t i = 0; i < count_; ++i) store_element(in_.data(), t, i, me == op.root ? val(me, -1, i) : kUnsent);
            break;
        case OpKind::AllGather:
            count_ = op.elements;   // one member's input
            in_ = x.comm_buffer(count_, t);
            out_ = x.comm_buffer(count_ * W, t);
            for (int64_t i = 0; i < count_; ++i) store_element(in_.data(), t, i, val(me, -1, i));
            break;
        case OpKind::ReduceScatter:
        case OpKind::AllToAll:
            if (op.elements % W) broken(op, std::to_string(op.elements) + " elements do not split over " + std::to_string(W) + " members");
            count_ = op.elements / W;   // the whole input, one block per member
            in_ = x.comm_buffer(op.elements, t);
            out_ = x.comm_buffer(op.kind == OpKind::AllToAll ? op.elements : count_, t);
            if (real_moe_) pack_floats(x.moe_outgoing(op).data(), in_.data(), t, op.elements);
            if (real_uly_) pack_floats(x.uly_outgoing(op).data(), in_.data(), t, op.elements);
            for (int j = 0; j < W && !real_moe_ && !real_uly_; ++j)
                for (int64_t i = 0; i < count_; ++i) store_element(in_.data(), t, j * count_ + i, val(me, j, i));
            break;
        default: broken(op, std::string("payload ") + zerosim::payload_name(op.payload) + " in a " + zerosim::op_record_name(op.kind));
    }
    if (op.elements > 0 && x.corrupt_on_purpose(op)) store_element(in_.data(), t, 0, 42.0);
}

void ModelCollective::call(const Op& op) {
    Backend& be = x.be_;
    const DType t = op.dtype;
    const zerosim::ReduceOp r = op.redop == zerosim::ReduceOp::None ? zerosim::ReduceOp::Sum : op.redop;
    switch (op.kind) {
        case OpKind::AllReduce: be.all_reduce(in_.data(), out_.data(), count_, t, r); break;
        case OpKind::Reduce: be.reduce(in_.data(), out_.data(), count_, t, r, op.root); break;
        case OpKind::Broadcast: be.broadcast(in_.data(), count_, t, op.root); break;
        case OpKind::AllGather: be.all_gather(in_.data(), out_.data(), count_, t); break;
        case OpKind::ReduceScatter: be.reduce_scatter(in_.data(), out_.data(), count_, t, r); break;
        case OpKind::AllToAll: be.all_to_all(in_.data(), out_.data(), count_, t); break;
        default: break;
    }
}

// Every element against the members' contributions recomputed here: a sum or max over members
// (all_reduce, reduce, reduce_scatter: this member's block), the root's (broadcast), member j's
// at block j (all_gather, all_to_all: what j sent to this member).
Check ModelCollective::take(const Op& op) {
    Check c;
    if (real_ || real_moe_ || real_uly_) {
        if (real_) x.tp_received(op, x.be_.host_view(out_.data()), c);
        else if (real_moe_) x.moe_received(op, x.be_.host_view(out_.data()), c);
        else x.uly_received(op, x.be_.host_view(out_.data()), c);
        return c;
    }
    if (!x.verify_ || !has_output(op)) return c;
    const GroupView& g = x.group_of(op);
    const DType t = op.dtype;
    const int W = g.size(), me = g.index;
    const int64_t channel = static_cast<int64_t>(op.group);
    const bool max = op.redop == zerosim::ReduceOp::Max;
    auto val = [&](int member, int to, int64_t i) {
        return model_value(t, g.members[member], to < 0 ? -1 : g.members[to], channel, n_, op.step, op.micro, i);
    };
    auto reduced = [&](int to, int64_t i) {
        double acc = 0.0;
        for (int j = 0; j < W; ++j) acc = j == 0 ? val(j, to, i) : max ? std::max(acc, val(j, to, i)) : acc + val(j, to, i);
        return round_to(t, acc);
    };
    const bool blocks = op.kind == OpKind::AllGather || op.kind == OpKind::AllToAll;
    const int64_t total = blocks ? count_ * W : count_;
    const void* got_buf = x.be_.host_view(op.kind == OpKind::Broadcast ? in_.data() : out_.data());
    for (int64_t k = 0; k < total; ++k) {
        const int j = static_cast<int>(k / count_);
        const int64_t i = k % count_;
        double want = 0.0;
        switch (op.kind) {
            case OpKind::Broadcast: want = val(op.root, -1, i); break;
            case OpKind::AllGather: want = val(j, -1, i); break;
            case OpKind::AllToAll: want = val(j, me, i); break;
            case OpKind::ReduceScatter: want = reduced(me, i); break;
            default: want = reduced(-1, i); break;
        }
        const double got = load_element(got_buf, t, k);
        c.see(got == want, [&] {
            char b[160];
            std::snprintf(b, sizeof b, "element %lld = %g, expected %g", static_cast<long long>(k), got, want);
            return std::string(b);
        });
    }
    return c;
}

}  // namespace detail
}  // namespace zerorun
