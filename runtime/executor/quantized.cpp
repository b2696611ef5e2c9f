// ZeRO++ qwZ and qgZ on real data (issue 17): parameters gathered as int8 with per-block fp32
// scales, gradients reduced by two all_to_alls of int4 values, with the block quantizer of
// executor/quantize.hpp. Sizes, groups and order are the IR's (DeepSpeed v0.14.2's, see
// docs/zero-variants.md sections 2 and 3); the values are checked against the unquantized
// computation within the error the scheme bounds (docs/runtime.md "qwZ and qgZ").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backends/dtype.hpp"
#include "executor/quantize.hpp"
#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

using zerosim::DType;

namespace {
constexpr int kWeightBits = 8;     // qwZ: int8 (partition_parameters.py CUDAQuantizer, num_bits 8)
constexpr int kGradientBits = 4;   // qgZ: int4 (coalesced_collectives.py swizzle_quant(..., 4, ...))
}  // namespace

// The op `ahead` places after `op`: DeepSpeed issues a quantized exchange's ops back to back, so
// the IR must have them there, for the same parameters.
const Op& Executor::companion(const Op& op, int64_t ahead, zerosim::RuleId rule) const {
    const int64_t at = op.id + ahead;
    if (at >= static_cast<int64_t>(s_.ops.size()) || s_.ops[at].rule != rule || s_.ops[at].params != op.params)
        broken(op, std::string("is not followed by its ") + zerosim::rule_name(rule) + " op");
    return s_.ops[at];
}

// qwZ, the data (partition_parameters.py all_gather_coalesced with quantize=True): this rank's
// shards of the op's parameters (primary, or the hpZ secondary pieces), concatenated, quantized as
// one vector into int8 with as many scale blocks as the next op carries (CUDAQuantizer's group
// count, ceil(N/8000) and up), the int8 bytes all_gathered. The values wait for their scales.
void Executor::qwz_gather_data(const Op& op, OpRecord& rec) {
    const Op& sc = companion(op, 1, zerosim::RuleId::QwzFetchScales);
    const GroupView& g = group_of(op);
    const bool secondary = op.group == zerosim::GroupKind::Hpz;
    QuantExchange q;
    q.data_op = op.id;
    std::vector<float> x;
    for (int p : op.params) {
        const int64_t piece = secondary ? part_[p] * world_ / g.size() : part_[p];
        q.piece.push_back(piece);
        if (secondary && work_version_[p] != updates_[p])
            broken(op, "gathers the secondary partition of " + s_.params[p].name + " after an update dropped it");
        for (int64_t j = 0; j < piece; ++j) {
            const int64_t i = g.index * piece + j;
            double v = secondary ? (i < numel(p) ? load_element(work_[p].data(), mdt(), i) : 0.0)
                                 : load_element(shard_[p].data(), mdt(), j);
            x.push_back(static_cast<float>(v));
        }
    }
    q.n = static_cast<int64_t>(x.size());
    if (q.n != op.elements) broken(op, "carries " + std::to_string(op.elements) + " int8 values, the shards hold " + std::to_string(q.n));
    q.blocks = sc.elements;
    q.sent.resize(static_cast<size_t>(q.n));
    q.sent_scales.resize(static_cast<size_t>(q.blocks));
    quantize_blocks(x.data(), q.n, q.blocks, kWeightBits, q.sent.data(), q.sent_scales.data());
    Buffer in = comm_buffer(q.n, DType::UINT8);
    std::memcpy(in.data(), q.sent.data(), q.sent.size());
    q.received = comm_buffer(q.n * g.size(), DType::UINT8);
    timed_call(rec, [&] { be_.all_gather(in.data(), q.received.data(), q.n, DType::UINT8); });
    Check c;
    const uint8_t* mine = q.received.as<uint8_t>() + g.index * q.n;
    for (int64_t k = 0; k < q.n; ++k) c.see(mine[k] == q.sent[static_cast<size_t>(k)]);
    qx_ = std::move(q);
    finish(rec, c);
}

// qwZ, the scales: all_gathered, then every member's int8 data dequantized into the working copy
// (DeepSpeed dequantizes the whole gathered buffer, this rank's own part too). Each weight is
// checked against the unquantized reference within its block's bound, scale/2, plus the error an
// earlier quantization left in the working copy an hpZ secondary piece was cut from.
void Executor::qwz_gather_scales(const Op& op, OpRecord& rec) {
    QuantExchange& q = qx_;
    if (q.data_op != op.id - 1) broken(op, "sends scales with no int8 gather before it");
    const GroupView& g = group_of(op);
    Buffer in = comm_buffer(q.blocks, DType::FP32), out = comm_buffer(q.blocks * g.size(), DType::FP32);
    std::memcpy(in.data(), q.sent_scales.data(), q.sent_scales.size() * sizeof(float));
    timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), q.blocks, DType::FP32); });
    const float* scales = out.as<float>();
    Check c;
    for (int64_t k = 0; k < q.blocks; ++k) c.see(scales[g.index * q.blocks + k] == q.sent_scales[static_cast<size_t>(k)]);
    const int64_t bs = block_size(q.n, q.blocks);
    const bool secondary = op.group == zerosim::GroupKind::Hpz;
    std::vector<double> carried(op.params.size(), 0.0);
    for (size_t k = 0; k < op.params.size(); ++k) carried[k] = secondary ? work_qerr_[op.params[k]] : 0.0;
    for (int r = 0; r < g.size(); ++r) {
        const uint8_t* data = q.received.as<uint8_t>() + r * q.n;
        const float* sc = scales + r * q.blocks;
        int64_t at = 0;
        for (size_t k = 0; k < op.params.size(); ++k) {
            const int p = op.params[k];
            for (int64_t j = 0; j < q.piece[k]; ++j) {
                const int64_t i = r * q.piece[k] + j;
                if (i >= numel(p)) continue;
                store_element(work_[p].data(), mdt(), i, dequantized(data, sc, q.n, q.blocks, kWeightBits, at + j));
                const double got = load_element(work_[p].data(), mdt(), i);
                const double qerr = quant_error_bound(sc[(at + j) / bs], std::fabs(got)) + ulp(mdt(), std::fabs(got));
                work_qerr_[p] = std::max(r == 0 && j == 0 ? 0.0 : work_qerr_[p], qerr + carried[k]);
                if (!verify_) continue;
                const double want = shadow_->working(p, i);
                const double tol = weight_tolerance(mdt(), std::max(std::fabs(got), std::fabs(want)), updates_[p]) + qerr + carried[k];
                c.see(std::fabs(got - want) <= tol, [&] {
                    char b[200];
                    std::snprintf(b, sizeof b, "%s[%lld] = %.9g, reference %.9g, quantization bound %.3g", s_.params[p].name.c_str(),
                                  static_cast<long long>(i), got, want, tol);
                    return std::string(b);
                });
            }
            at += q.piece[k];
        }
    }
    for (int p : op.params) work_version_[p] = updates_[p];
    qx_ = QuantExchange{};
    finish(rec, c);
}

// qgZ (coalesced_collectives.py all_to_all_quant_reduce), one 2-D gradient of m elements, W
// ranks, L per node, N = W/L nodes; rank r = n*L + j ends with chunk r (m/W elements) of the sum:
//  1. its local gradient laid out by destination (part j' = chunks n'*L + j' for every node n'),
//     quantized to int4 in G blocks, all_to_all on the node: part j' to local rank j';
//  2. the scales likewise (G/L per member); the L parts received dequantized and summed: the
//     node's sum of chunks n'*L + j for every node n';
//  3. that node sum requantized (G/L blocks), all_to_all across nodes: chunk n'*L + j to node n';
//  4. its scales likewise (G/W per member); the N pieces dequantized and summed: chunk r of the
//     world's sum (DeepSpeed divides by the node count there; the runtime's reductions are sums,
//     averaged by the optimizer step).
void Executor::qgz_exchange(const Op& op, OpRecord& rec) {
    const int p = op.params.at(0);
    const GroupView& g = group_of(op);
    const int64_t m = numel(p);
    const int L = groups_.at(zerosim::GroupKind::QgzIntra).size(), N = world_ / L;
    const int64_t cw = m / world_;
    QuantExchange& q = qx_;
    Check c;
    // One all_to_all of `bytes_total` bytes in member blocks; this rank's own block must return.
    auto exchange = [&](const void* send, int64_t total, DType t, Buffer& out) {
        const int es = zerosim::dtype_size(t);
        const int64_t per = total / g.size();
        Buffer in = comm_buffer(total, t);
        std::memcpy(in.data(), send, static_cast<size_t>(total) * es);
        out = comm_buffer(total, t);
        timed_call(rec, [&] { be_.all_to_all(in.data(), out.data(), per, t); });
        const char* a = static_cast<const char*>(in.data()) + g.index * per * es;
        const char* b = static_cast<const char*>(out.data()) + g.index * per * es;
        for (int64_t k = 0; k < per * es; ++k) c.see(a[k] == b[k]);
    };
    if (op.rule == zerosim::RuleId::QgzIntraAllToAll) {
        const Op& sc = companion(op, 1, zerosim::RuleId::QgzIntraScales);
        companion(op, 2, zerosim::RuleId::QgzInterAllToAll);
        companion(op, 3, zerosim::RuleId::QgzInterScales);
        if (acc_[p].empty()) broken(op, "reduces the gradient of " + s_.params[p].name + " before any backward");
        QuantExchange fresh;
        fresh.data_op = op.id;
        fresh.n = m;
        fresh.blocks = sc.elements;
        std::vector<float> x(static_cast<size_t>(m));
        const float* a = acc_[p].as<float>();
        int64_t at = 0;
        for (int j = 0; j < L; ++j)
            for (int n = 0; n < N; ++n, at += cw) std::copy(a + (n * L + j) * cw, a + (n * L + j + 1) * cw, x.begin() + at);
        fresh.sent.resize(static_cast<size_t>(quantized_bytes(m, kGradientBits)));
        fresh.sent_scales.resize(static_cast<size_t>(fresh.blocks));
        quantize_blocks(x.data(), m, fresh.blocks, kGradientBits, fresh.sent.data(), fresh.sent_scales.data());
        if (static_cast<int64_t>(fresh.sent.size()) != op.elements) broken(op, "carries " + std::to_string(op.elements) + " bytes, not m/2");
        exchange(fresh.sent.data(), op.elements, DType::UINT8, fresh.received);
        qx_ = std::move(fresh);
        return finish(rec, c);
    }
    if (q.data_op != op.id - 1) broken(op, "has no exchange before it for " + s_.params[p].name);
    q.data_op = op.id;
    if (op.rule == zerosim::RuleId::QgzInterAllToAll) {
        if (op.elements * 2 != q.n) broken(op, "carries " + std::to_string(op.elements) + " bytes, the node sum has " + std::to_string(q.n) + " int4 values");
        exchange(q.sent.data(), op.elements, DType::UINT8, q.received);
        return finish(rec, c);
    }
    if (op.elements != q.blocks) broken(op, "carries " + std::to_string(op.elements) + " scales, the data has " + std::to_string(q.blocks) + " blocks");
    Buffer scales;
    exchange(q.sent_scales.data(), q.blocks, DType::FP32, scales);
    const int64_t part_n = q.n / g.size(), part_blocks = q.blocks / g.size(), part_bytes = quantized_bytes(part_n, kGradientBits);
    std::vector<float> sum(static_cast<size_t>(part_n), 0.0f);
    std::vector<float> node_scales;   // step 4: every node's scale of each block of this chunk
    for (int r = 0; r < g.size(); ++r) {
        const uint8_t* d = q.received.as<uint8_t>() + r * part_bytes;
        const float* s = scales.as<float>() + r * part_blocks;
        for (int64_t k = 0; k < part_n; ++k) sum[k] += dequantized(d, s, part_n, part_blocks, kGradientBits, k);
        node_scales.insert(node_scales.end(), s, s + part_blocks);
    }
    if (op.rule == zerosim::RuleId::QgzIntraScales) {
        q.n = part_n;
        q.blocks = part_blocks;
        q.sent.assign(static_cast<size_t>(quantized_bytes(part_n, kGradientBits)), 0);
        q.sent_scales.assign(static_cast<size_t>(part_blocks), 0.0f);
        quantize_blocks(sum.data(), part_n, part_blocks, kGradientBits, q.sent.data(), q.sent_scales.data());
        return finish(rec, c);
    }
    // qgz.inter_scales: `sum` is chunk rank_ of the world's sum.
    if (part_n != cw) broken(op, "ends with " + std::to_string(part_n) + " elements, not m/W = " + std::to_string(cw));
    const int64_t bs = block_size(part_n, part_blocks);
    if (verify_) {
        // Every rank's contribution, recomputed from the loss; each rank's int4 block scale (max/7)
        // over the blocks of this chunk, as it quantized them in step 1 (blocks lie inside a chunk).
        std::vector<std::vector<double>> xr(static_cast<size_t>(world_), std::vector<double>(static_cast<size_t>(cw)));
        for (int r = 0; r < world_; ++r)
            for (int64_t k = 0; k < cw; ++k) {
                const int64_t i = rank_ * cw + k;
                const float w = static_cast<float>(load_element(work_[p].data(), mdt(), i));
                xr[r][k] = r == rank_ ? my_gradient(p, i) : local_gradient(spec_, w, r, op.step, pending_[p], p, i);
            }
        for (int64_t k = 0; k < cw; ++k) {
            double want = 0.0, tol = 0.0, mag = 0.0;
            const int64_t b0 = (k / bs) * bs, b1 = std::min(cw, b0 + bs);
            for (int r = 0; r < world_; ++r) {
                double mx = 0.0;
                for (int64_t k2 = b0; k2 < b1; ++k2) mx = std::max(mx, std::fabs(xr[r][k2]));
                tol += quant_error_bound(mx / 7.0, mx);
                want += xr[r][k];
                mag += std::fabs(xr[r][k]);
            }
            for (int n = 0; n < N; ++n) tol += quant_error_bound(node_scales[n * part_blocks + k / bs], mag);
            tol += 2.0 * (world_ + N) * mag * std::numeric_limits<float>::epsilon();
            c.see(std::fabs(sum[k] - want) <= tol, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "%s[%lld] gradient %.9g, exact sum %.9g, quantization bound %.3g", s_.params[p].name.c_str(),
                              static_cast<long long>(rank_ * cw + k), sum[k], want, tol);
                return std::string(b);
            });
        }
    }
    for (int64_t k = 0; k < cw; ++k) apply_gradient(op, p, rank_ * cw + k, sum[k]);
    consume(p, m);
    qx_ = QuantExchange{};
    finish(rec, c);
}

}  // namespace detail

std::optional<std::string> quantized_schedule_problem(const zerosim::Schedule& s) {
    for (size_t k = 0; k + 1 < s.ops.size(); ++k) {
        const auto& op = s.ops[k];
        if (op.rule != zerosim::RuleId::QgzIntraAllToAll) continue;
        const auto& par = s.params.at(static_cast<size_t>(op.params.at(0)));
        const int64_t G = s.ops[k + 1].elements, W = s.meta.world;
        if (G % W != 0 || par.numel % G != 0)
            return "qgZ gradient " + par.name + " has G = " + std::to_string(G) + " scale rows, not a multiple of the world (" +
                   std::to_string(W) + ") dividing its size: its scales do not split evenly over the all_to_alls "
                   "(DeepSpeed's behaviour there is unclear, docs/zero-variants.md 3.3); zerorun runs only such shapes";
    }
    return std::nullopt;
}

}  // namespace zerorun
