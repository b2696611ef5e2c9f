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
#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::DType;

namespace {
constexpr int kWeightBits = 8;     // qwZ: int8 (partition_parameters.py CUDAQuantizer, num_bits 8)
constexpr int kGradientBits = 4;   // qgZ: int4 (coalesced_collectives.py swizzle_quant(..., 4, ...))

// The op `ahead` places after `op`, which must carry `payload` for the same parameters: DeepSpeed
// issues a quantized exchange's ops back to back, so the IR must have them there.
const Op& exchange_companion(const zerosim::Schedule& s, const Op& op, int64_t ahead, Payload payload) {
    const int64_t at = op.id + ahead;
    if (at >= static_cast<int64_t>(s.ops.size()) || s.ops[at].payload != payload || s.ops[at].params != op.params)
        broken(op, std::string("is not followed, ") + std::to_string(ahead) + " ops on, by its " + zerosim::payload_name(payload) + " op");
    return s.ops[at];
}
}  // namespace


QwzGather::QwzGather(Executor& x) : CollectiveHandler(x), qerr_(x.s_.params.size(), 0.0) {}

// qwZ, the data (partition_parameters.py all_gather_coalesced with quantize=True): this rank's
// shards of the op's parameters (primary, or the hpZ secondary pieces), concatenated, quantized as
// one vector into int8 with as many scale blocks as the next op carries (CUDAQuantizer's group
// count, ceil(N/8000) and up), the int8 bytes all_gathered. The values wait for their scales.
// qwZ, the scales: all_gathered, then every member's int8 data dequantized into the working copy.
void QwzGather::stage(const Op& op) {
    if (op.payload == Payload::QuantizedShards) return stage_data(op);
    if (data_op_ != op.id - 1) broken(op, "sends scales with no int8 gather before it");
    const GroupView& g = x.group_of(op);
    in_ = x.comm_buffer(blocks_, DType::FP32);
    out_ = x.comm_buffer(blocks_ * g.size(), DType::FP32);
    std::memcpy(in_.data(), sent_scales_.data(), sent_scales_.size() * sizeof(float));
}

void QwzGather::stage_data(const Op& op) {
    const Op& sc = exchange_companion(x.s_, op, 1, Payload::QuantScales);
    const GroupView& g = x.group_of(op);
    const bool secondary = g.role == GroupRole::HpzSecondary;
    data_op_ = op.id;
    piece_.clear();
    std::vector<float> v;
    for (int p : op.params) {
        const int64_t piece = secondary ? x.part_[p] * x.world_ / g.size() : x.part_[p];
        piece_.push_back(piece);
        if (secondary && x.work_version_[p] != x.updates_[p])
            broken(op, "gathers the secondary partition of " + x.s_.params[p].name + " after an update dropped it");
        for (int64_t j = 0; j < piece; ++j) {
            const int64_t i = g.index * piece + j;
            double w = secondary ? (i < x.numel(p) ? load_element(x.work_[p].data(), x.mdt(), i) : 0.0)
                                 : load_element(x.shard_[p].data(), x.mdt(), j);
            v.push_back(static_cast<float>(w));
        }
    }
    n_ = static_cast<int64_t>(v.size());
    if (n_ != op.elements) broken(op, "carries " + std::to_string(op.elements) + " int8 values, the shards hold " + std::to_string(n_));
    blocks_ = sc.elements;
    sent_.assign(static_cast<size_t>(n_), 0);
    sent_scales_.assign(static_cast<size_t>(blocks_), 0.0f);
    quantize_blocks(v.data(), n_, blocks_, kWeightBits, sent_.data(), sent_scales_.data());
    in_ = x.comm_buffer(n_, DType::UINT8);
    std::memcpy(in_.data(), sent_.data(), sent_.size());
    out_ = x.comm_buffer(n_ * g.size(), DType::UINT8);
}

void QwzGather::call(const Op& op) {
    if (op.payload == Payload::QuantizedShards) x.be_.all_gather(in_.data(), out_.data(), n_, DType::UINT8);
    else x.be_.all_gather(in_.data(), out_.data(), blocks_, DType::FP32);
}

Check QwzGather::take(const Op& op) {
    if (op.payload != Payload::QuantizedShards) return take_scales(op);
    Check c;
    const uint8_t* mine = out_.as<uint8_t>() + x.group_of(op).index * n_;
    for (int64_t k = 0; k < n_; ++k) c.see(mine[k] == sent_[static_cast<size_t>(k)]);
    received_ = std::move(out_);
    return c;
}

// DeepSpeed dequantizes the whole gathered buffer, this rank's own part too. Each weight is
// checked against the unquantized reference within its block's bound, scale/2, plus the error an
// earlier quantization left in the working copy an hpZ secondary piece was cut from.
Check QwzGather::take_scales(const Op& op) {
    const GroupView& g = x.group_of(op);
    const float* scales = out_.as<float>();
    Check c;
    for (int64_t k = 0; k < blocks_; ++k) c.see(scales[g.index * blocks_ + k] == sent_scales_[static_cast<size_t>(k)]);
    const bool secondary = g.role == GroupRole::HpzSecondary;
    std::vector<double> carried(op.params.size(), 0.0);
    for (size_t k = 0; k < op.params.size(); ++k) carried[k] = secondary ? qerr_[op.params[k]] : 0.0;
    for (int r = 0; r < g.size(); ++r) dequantize_member(op, r, scales + r * blocks_, carried, c);
    for (int p : op.params) x.work_version_[p] = x.updates_[p];
    data_op_ = -1;
    received_.reset();
    return c;
}

// Member r's int8 data, dequantized with its scales `sc` into the working copies, each weight
// checked against the reference.
void QwzGather::dequantize_member(const Op& op, int r, const float* sc, const std::vector<double>& carried, Check& c) {
    const uint8_t* data = received_.as<uint8_t>() + r * n_;
    const int64_t bs = block_size(n_, blocks_);
    const DType mdt = x.mdt();
    int64_t at = 0;
    for (size_t k = 0; k < op.params.size(); ++k) {
        const int p = op.params[k];
        for (int64_t j = 0; j < piece_[k]; ++j) {
            const int64_t i = r * piece_[k] + j;
            if (i >= x.numel(p)) continue;
            store_element(x.work_[p].data(), mdt, i, dequantized(data, sc, n_, blocks_, kWeightBits, at + j));
            const double got = load_element(x.work_[p].data(), mdt, i);
            const double qerr = quant_error_bound(sc[(at + j) / bs], std::fabs(got)) + ulp(mdt, std::fabs(got));
            qerr_[p] = std::max(r == 0 && j == 0 ? 0.0 : qerr_[p], qerr + carried[k]);
            if (!x.verify_) continue;
            const double want = x.shadow_->working(p, i);
            const double tol = x.weight_tolerance(mdt, std::max(std::fabs(got), std::fabs(want)), x.updates_[p]) + qerr + carried[k];
            c.see(std::fabs(got - want) <= tol, [&] {
                char b[200];
                std::snprintf(b, sizeof b, "%s[%lld] = %.9g, reference %.9g, quantization bound %.3g", x.s_.params[p].name.c_str(),
                              static_cast<long long>(i), got, want, tol);
                return std::string(b);
            });
        }
        at += piece_[k];
    }
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
// The payload says data or scales; the op's group says which exchange (inside or across nodes).
QgzReduction::Step QgzReduction::step_of(const Op& op) const {
    const GroupRole role = x.group_of(op).role;
    const bool data = op.payload == Payload::QuantizedGradient;
    if (role == GroupRole::QgzIntraNode) return data ? Step::IntraData : Step::IntraScales;
    if (role == GroupRole::QgzInterNode) return data ? Step::InterData : Step::InterScales;
    broken(op, std::string("runs qgZ's ") + zerosim::payload_name(op.payload) + " on group " + zerosim::group_name(op.group) +
                   ", neither its intra- nor its inter-node group");
}

void QgzReduction::stage(const Op& op) {
    const Step step = step_of(op);
    if (step == Step::IntraData) return start(op);
    const std::string& name = x.s_.params[op.params.at(0)].name;
    if (data_op_ != op.id - 1) broken(op, "has no exchange before it for " + name);
    data_op_ = op.id;
    if (step == Step::InterData) {
        if (op.elements * 2 != n_) broken(op, "carries " + std::to_string(op.elements) + " bytes, the node sum has " + std::to_string(n_) + " int4 values");
        return stage_exchange(op, sent_.data(), op.elements, DType::UINT8);
    }
    if (op.elements != blocks_) broken(op, "carries " + std::to_string(op.elements) + " scales, the data has " + std::to_string(blocks_) + " blocks");
    stage_exchange(op, sent_scales_.data(), blocks_, DType::FP32);
}

// Step 1: the local gradient laid out by destination and quantized; the exchange's other three
// ops must follow it.
void QgzReduction::start(const Op& op) {
    const Op& sc = exchange_companion(x.s_, op, 1, Payload::QuantScales);
    exchange_companion(x.s_, op, 2, Payload::QuantizedGradient);
    exchange_companion(x.s_, op, 3, Payload::QuantScales);
    const int p = op.params.at(0);
    if (x.acc_[p].empty()) broken(op, "reduces the gradient of " + x.s_.params[p].name + " before any backward");
    // This op runs on the intra-node group (step_of): its size is the ranks per node.
    const int64_t m = x.numel(p), L = x.group_of(op).size(), N = x.world_ / L, cw = m / x.world_;
    data_op_ = op.id;
    n_ = m;
    blocks_ = sc.elements;
    std::vector<float> v(static_cast<size_t>(m));
    const float* a = x.acc_[p].as<float>();
    int64_t at = 0;
    for (int64_t j = 0; j < L; ++j)
        for (int64_t n = 0; n < N; ++n, at += cw) std::copy(a + (n * L + j) * cw, a + (n * L + j + 1) * cw, v.begin() + at);
    sent_.assign(static_cast<size_t>(quantized_bytes(m, kGradientBits)), 0);
    sent_scales_.assign(static_cast<size_t>(blocks_), 0.0f);
    quantize_blocks(v.data(), m, blocks_, kGradientBits, sent_.data(), sent_scales_.data());
    if (static_cast<int64_t>(sent_.size()) != op.elements) broken(op, "carries " + std::to_string(op.elements) + " bytes, not m/2");
    stage_exchange(op, sent_.data(), op.elements, DType::UINT8);
}

// One all_to_all of `total` elements in member blocks.
void QgzReduction::stage_exchange(const Op& op, const void* send, int64_t total, DType t) {
    per_ = total / x.group_of(op).size();
    type_ = t;
    in_ = x.comm_buffer(total, t);
    std::memcpy(in_.data(), send, static_cast<size_t>(total) * zerosim::dtype_size(t));
    out_ = x.comm_buffer(total, t);
}

void QgzReduction::call(const Op&) { x.be_.all_to_all(in_.data(), out_.data(), per_, type_); }

Check QgzReduction::take(const Op& op) {
    Check c;
    // This rank's own block must return.
    const int es = zerosim::dtype_size(type_);
    const int64_t me = x.group_of(op).index;
    const char* a = in_.as<char>() + me * per_ * es;
    const char* b = out_.as<char>() + me * per_ * es;
    for (int64_t k = 0; k < per_ * es; ++k) c.see(a[k] == b[k]);
    const Step step = step_of(op);
    if (step == Step::IntraData || step == Step::InterData) {
        received_ = std::move(out_);
        return c;
    }
    std::vector<float> node_scales;   // step 4: every node's scale of each block of this chunk
    std::vector<float> sum = sum_parts(op, node_scales);
    const int64_t part_n = static_cast<int64_t>(sum.size()), part_blocks = blocks_ / x.group_of(op).size();
    if (step == Step::IntraScales) {
        n_ = part_n;
        blocks_ = part_blocks;
        sent_.assign(static_cast<size_t>(quantized_bytes(part_n, kGradientBits)), 0);
        sent_scales_.assign(static_cast<size_t>(part_blocks), 0.0f);
        quantize_blocks(sum.data(), part_n, part_blocks, kGradientBits, sent_.data(), sent_scales_.data());
        return c;
    }
    // Step 4: `sum` is chunk rank_ of the world's sum.
    const int p = op.params.at(0);
    const int64_t cw = x.numel(p) / x.world_;
    if (part_n != cw) broken(op, "ends with " + std::to_string(part_n) + " elements, not m/W = " + std::to_string(cw));
    if (x.verify_) check_world_sum(op, sum, node_scales, c);
    for (int64_t k = 0; k < cw; ++k) x.apply_gradient(op, p, x.rank_ * cw + k, sum[k]);
    x.consume(p, x.numel(p));
    data_op_ = -1;
    received_.reset();
    return c;
}

// After a scales exchange (in out_): every member's part of the data dequantized and summed;
// `node_scales` gets every member's scales, member order.
std::vector<float> QgzReduction::sum_parts(const Op& op, std::vector<float>& node_scales) const {
    const int members = x.group_of(op).size();
    const int64_t part_n = n_ / members, part_blocks = blocks_ / members, part_bytes = quantized_bytes(part_n, kGradientBits);
    std::vector<float> sum(static_cast<size_t>(part_n), 0.0f);
    for (int r = 0; r < members; ++r) {
        const uint8_t* d = received_.as<uint8_t>() + r * part_bytes;
        const float* s = out_.as<float>() + r * part_blocks;
        for (int64_t k = 0; k < part_n; ++k) sum[k] += dequantized(d, s, part_n, part_blocks, kGradientBits, k);
        node_scales.insert(node_scales.end(), s, s + part_blocks);
    }
    return sum;
}

// Every rank's contribution, recomputed from the loss; each rank's int4 block scale (max/7) over
// the blocks of this chunk, as it quantized them in step 1 (blocks lie inside a chunk); then
// each node's requantization (its scale of the block) and float rounding at every sum.
void QgzReduction::check_world_sum(const Op& op, const std::vector<float>& sum, const std::vector<float>& node_scales,
                                   Check& c) const {
    const int p = op.params.at(0);
    const int W = x.world_, me = x.rank_;
    const int64_t cw = x.numel(p) / W, part_blocks = blocks_ / x.group_of(op).size(), bs = block_size(cw, part_blocks);
    const int N = x.group_of(op).size();
    std::vector<std::vector<double>> xr(static_cast<size_t>(W), std::vector<double>(static_cast<size_t>(cw)));
    for (int r = 0; r < W; ++r)
        for (int64_t k = 0; k < cw; ++k) {
            const int64_t i = me * cw + k;
            const float w = static_cast<float>(load_element(x.work_[p].data(), x.mdt(), i));
            xr[r][k] = r == me ? x.my_gradient(p, i) : local_gradient(x.spec_, w, r, op.step, x.pending_[p], p, i);
        }
    for (int64_t k = 0; k < cw; ++k) {
        double want = 0.0, tol = 0.0, mag = 0.0;
        const int64_t b0 = (k / bs) * bs, b1 = std::min(cw, b0 + bs);
        for (int r = 0; r < W; ++r) {
            double mx = 0.0;
            for (int64_t k2 = b0; k2 < b1; ++k2) mx = std::max(mx, std::fabs(xr[r][k2]));
            tol += quant_error_bound(mx / 7.0, mx);
            want += xr[r][k];
            mag += std::fabs(xr[r][k]);
        }
        for (int n = 0; n < N; ++n) tol += quant_error_bound(node_scales[n * part_blocks + k / bs], mag);
        tol += 2.0 * (W + N) * mag * std::numeric_limits<float>::epsilon();
        c.see(std::fabs(sum[k] - want) <= tol, [&] {
            char b[200];
            std::snprintf(b, sizeof b, "%s[%lld] gradient %.9g, exact sum %.9g, quantization bound %.3g", x.s_.params[p].name.c_str(),
                          static_cast<long long>(me * cw + k), sum[k], want, tol);
            return std::string(b);
        });
    }
}

}  // namespace detail

std::optional<std::string> quantized_schedule_problem(const zerosim::Schedule& s) {
    for (size_t k = 0; k + 1 < s.ops.size(); ++k) {
        const auto& op = s.ops[k];
        // The first op of each qgZ exchange: its int4 data, on the intra-node group.
        if (op.payload != zerosim::Payload::QuantizedGradient || detail::group_role(op.group) != detail::GroupRole::QgzIntraNode) continue;
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
