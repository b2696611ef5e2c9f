// The schedule's size from its inputs, counted the way the generators emit ops (stage012.cpp,
// stage3.cpp): every term below is the most ops one part of a generator can emit, so the sum never
// falls below the real count (tests/unit/test_outputs_bounds.cpp checks it on every config).
#include "schedule/bounds.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "schedule/ir.hpp"
#include "schedule/partition.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? kMax : r;
}
int64_t mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? kMax : r;
}

// The engine's fixed bucket (stage012.cpp kEngineAllreduceBucket, MEMORY_OPT_ALLREDUCE_SIZE).
constexpr int64_t kEngineBucket = 500000000;

// chunk_after_crossing over `count` tensors of `total` elements: every chunk but the last passes
// `limit`, so there are at most total / limit + 1, and never more than the tensors.
int64_t chunks_at_most(int64_t count, int64_t total, int64_t limit) {
    if (count == 0) return 0;
    if (limit <= 0) return count;
    return std::min(count, total / limit + 1);
}

// Bucket flushes of one micro-step as reduce_independent_p_g_buckets_and_remove_grads makes them:
// one per gradient added at most, plus the epilogue's. A flush triggered by a gradient means the
// bucket and that gradient pass the limit together; each gradient counts in two such sums at most,
// so there are fewer than 2 x total / limit of them.
int64_t flushes_at_most(int64_t params, int64_t total, int64_t limit) {
    if (limit <= 0) return params + 1;
    return std::min(params + 1, add(mul(2, total / limit), 2));
}

struct Counts {
    int64_t params = 0, modules_run = 0, module_param_refs = 0, total = 0;
};

// The most ops each part of the schedule can have: the engine start, the once-only checks, one
// micro-step, the optimizer step, and the parameter references of one micro-step.
struct OpBounds {
    int64_t init = 0, once = 0, micro = 0, step = 0, refs_micro = 0;
};

OpBounds stage3_op_bounds(const Model& m, const ZeroConfig& z, int64_t total) {
    const int64_t P = static_cast<int64_t>(m.params.size());
    OpBounds b;
    // engine_start_broadcasts + stage3_engine_start: a broadcast each, another each, three
    // barriers, an all_gather each. The first reset_step checks the trace: three broadcasts.
    b.init = 3 * P + 3;
    b.once = 3;
    // Per micro-step: a forward and a backward per call of a module that owns parameters; at a
    // pre-forward and a pre-backward hook of every call, a fetch and a prefetch all_gather; a
    // reduction per flush (a flush is never empty at stage 3).
    // ZeRO++ / MiCS (stage3_variants.cpp): hpZ splits a gather in two, qwZ doubles each; qgZ
    // sends up to four ops per gradient, MiCS a replication all_reduce after each flush.
    const int64_t split = (z.hpz_partition_size > 1 ? 2 : 1) * (z.quantized_weights ? 2 : 1);
    int64_t calls_with_module = 0;
    for (const auto& c : m.calls)
        if (c.module >= 0) {
            ++calls_with_module;
            b.refs_micro = add(b.refs_micro, mul(1 + 2 * split, static_cast<int64_t>(m.modules[c.module].params.size())));
        }
    const int64_t C = static_cast<int64_t>(m.calls.size());
    b.micro = add(mul(2, calls_with_module), mul(4 * split, C));
    int64_t reducing_micro = std::min(P, flushes_at_most(P, total, z.reduce_bucket_size));
    if (z.quantized_gradients) reducing_micro = mul(4, P);
    if (z.mics_shard_size > 0) reducing_micro = mul(2, reducing_micro);
    // _step: an overflow check, a norm and an update per sub-group (at most one per parameter),
    // and the persistent parameters' regathers (at most one each).
    b.step = 1 + 3 * P;
    b.micro = add(b.micro, reducing_micro);
    return b;
}

// average_tensor: at most one op per (parameter, owning rank) slice. A group's
// partitions are at least kPartitionAlignment elements, so at most
// min(world - 1, (numel - 1) / alignment) partition boundaries cut its parameters.
int64_t average_tensor_ops_at_most(const Model& m, int64_t W) {
    const int64_t P = static_cast<int64_t>(m.params.size());
    const int64_t G = m.num_groups;
    std::vector<int64_t> group_numel(std::max<int64_t>(G, 1), 0);
    for (const auto& p : m.params)
        if (p.group >= 0 && p.group < G) group_numel[p.group] = add(group_numel[p.group], p.numel);
    int64_t reductions = P;
    for (int64_t n : group_numel)
        if (n > 0) reductions = add(reductions, std::min(W - 1, (n - 1) / kPartitionAlignment));
    return reductions;
}

OpBounds stage012_op_bounds(const Model& m, const DsConfig& cfg, int64_t W, int64_t total) {
    const ZeroConfig& z = cfg.zero;
    const int64_t P = static_cast<int64_t>(m.params.size());
    const int64_t G = m.num_groups;
    OpBounds b;
    b.init = P;   // engine_start_broadcasts
    for (int mod : m.forward_order)
        b.refs_micro = add(b.refs_micro, mul(2, static_cast<int64_t>(m.modules[mod].params.size())));
    b.micro = mul(2, static_cast<int64_t>(m.forward_order.size()));   // forward and backward of each
    bool bf16_optimizer = cfg.model_dtype == DType::BF16 &&
                          (z.stage == 0 || (z.stage == 1 && cfg.grad_accum_dtype == DType::FP32));
    int64_t reductions = 0;   // in one micro-step that reduces
    if (bf16_optimizer || z.stage == 0) {
        // engine.buffered_allreduce_fallback on the boundary micro-step only.
        reductions = bf16_optimizer ? chunks_at_most(G, kMax, kEngineBucket) : chunks_at_most(P, total, kEngineBucket);
        b.step = 2 * G + 2;
    } else {
        if (!z.contiguous_gradients || !z.reduce_scatter) {
            reductions = flushes_at_most(P, total, z.reduce_bucket_size);   // one op per flush
        } else {
            reductions = average_tensor_ops_at_most(m, W);
        }
        b.step = 1 + 3 * G;
    }
    // Stage 2 reduces on every micro-step, stage 1 and the engine on the boundary one only.
    bool every_micro = z.stage == 2 && !bf16_optimizer;
    if (every_micro)
        b.micro = add(b.micro, reductions);
    else
        b.step = add(b.step, reductions);
    b.refs_micro = add(b.refs_micro, add(P, reductions));
    return b;
}

}  // namespace

ScheduleSize estimate_schedule_size(const Model& m, const DsConfig& cfg, const ScheduleOptions& opt, int64_t grad_accum) {
    const ZeroConfig& z = cfg.zero;
    const int64_t P = static_cast<int64_t>(m.params.size());
    const int64_t W = std::max<int64_t>(1, opt.world);
    const int64_t A = std::max<int64_t>(1, grad_accum);
    int64_t total = 0;
    for (const auto& p : m.params) total = add(total, std::max<int64_t>(0, p.numel));
    const OpBounds b = z.stage == 3 ? stage3_op_bounds(m, z, total) : stage012_op_bounds(m, cfg, W, total);
    ScheduleSize s;
    s.init_ops = b.init;
    s.per_step_ops = add(mul(A, b.micro), b.step);
    s.ops = add(add(b.init, b.once), mul(std::max(1, opt.steps), s.per_step_ops));
    // An Op record, the heap of its rule and caller names, and 24 bytes per parameter it lists
    // (an int in params, a Segment where stages 0-2 cut buckets).
    int64_t refs = add(mul(mul(std::max(1, opt.steps), A), b.refs_micro), mul(2, P));
    s.bytes = add(mul(s.ops, static_cast<int64_t>(sizeof(Op)) + 64), mul(refs, 24));
    return s;
}

namespace {

// The refusal of a schedule of `ops` ops taking about `bytes`; `exact`: counted (schedule/stream.hpp),
// else the estimate's upper bound.
Status size_refusal(int64_t ops, int64_t bytes, bool exact, size_t params, const ScheduleOptions& opt, int64_t world,
                    int64_t grad_accum) {
    auto shape = [&] {
        std::ostringstream o;
        o << (opt.steps_in_run > 0 ? opt.steps_in_run : opt.steps) << " step(s) x " << grad_accum << " micro-step(s) on " << world << " rank(s), " << params
          << " parameters";
        return o.str();
    };
    auto gib = [](int64_t b) {
        const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        double v = static_cast<double>(b);
        int u = 0;
        while (v >= 1024.0 && u < 6) {
            v /= 1024.0;
            ++u;
        }
        std::ostringstream o;
        o.setf(std::ios::fixed);
        o.precision(u == 0 ? 0 : 1);
        o << v << ' ' << units[u];
        return o.str();
    };
    if (ops > opt.max_ops)
        return Error{"", "--max-ops",
                     std::string("the schedule would have ") + (exact ? "" : "up to ") + std::to_string(ops) + " ops (" +
                         shape() + "), past the limit of " + std::to_string(opt.max_ops) + "; raise --max-ops to build it anyway"};
    if (bytes > opt.max_bytes)
        return Error{"", "--max-memory",
                     "the schedule would take about " + gib(bytes) + " for " + std::to_string(ops) + " ops (" + shape() +
                         "), past the limit of " + gib(opt.max_bytes) + "; raise --max-memory to build it anyway"};
    return std::nullopt;
}

}  // namespace

Status check_schedule_size(const Model& m, const DsConfig& cfg, const ScheduleOptions& opt, int64_t grad_accum) {
    ScheduleSize s = estimate_schedule_size(m, cfg, opt, grad_accum);
    if (!opt.count_while_building) return size_refusal(s.ops, s.bytes, false, m.params.size(), opt, opt.world, grad_accum);
    ScheduleOptions slack = opt;
    slack.max_ops = opt.max_ops > kMax / kEstimateSlack ? kMax : opt.max_ops * kEstimateSlack;
    slack.max_bytes = opt.max_bytes > kMax / kEstimateSlack ? kMax : opt.max_bytes * kEstimateSlack;
    auto refused = size_refusal(s.ops, s.bytes, false, m.params.size(), slack, opt.world, grad_accum);
    if (!refused) return std::nullopt;
    // The message names the caller's limit, not the slack's.
    return size_refusal(s.ops, s.bytes, false, m.params.size(), opt, opt.world, grad_accum);
}

int64_t op_memory_estimate(const Op& op) {
    // As estimate_schedule_size charges an op: its record, its names' heap, 24 bytes per listed item.
    return static_cast<int64_t>(sizeof(Op)) + 64 + 24 * static_cast<int64_t>(op.params.size() + op.segments.size());
}

Status check_counted_size(int64_t ops, int64_t bytes, size_t params, const ScheduleMeta& meta, const ScheduleOptions& opt) {
    return size_refusal(ops, bytes, true, params, opt, meta.world, meta.grad_accum);
}

Status check_building_size(int64_t ops, int64_t bytes, size_t params, int step, int micro, const ScheduleMeta& meta,
                           const ScheduleOptions& opt) {
    if (ops <= opt.max_ops && bytes <= opt.max_bytes) return std::nullopt;
    Error e = *size_refusal(ops, bytes, true, params, opt, meta.world, meta.grad_accum);
    // Counted up to where building stopped: the whole schedule has more still.
    const std::string where = " by step " + std::to_string(step) + (micro >= 0 ? ", micro-step " + std::to_string(micro) : "") +
                              ", counted as built";
    // "would have N ops (" -> "would have more than N ops by step S ... (", and so for the memory.
    const std::pair<std::string, std::string> more[] = {{"the schedule would have ", "the schedule would have more than "},
                                                        {"the schedule would take about ", "the schedule would take more than "}};
    for (const auto& [was, is] : more)
        if (e.message.rfind(was, 0) == 0) e.message = is + e.message.substr(was.size());
    if (size_t paren = e.message.find(" ("); paren != std::string::npos) e.message.insert(paren, where);
    return e;
}

}  // namespace zerosim
