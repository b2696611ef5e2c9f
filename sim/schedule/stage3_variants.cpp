// ZeRO++ and MiCS as DeepSpeed v0.14.2 sends them; docs/zero-variants.md gives every rule with its
// source line, and ../shared/reference/deepspeed-v0.14.2-cpu-variants has a real run of each.
#include "stage3_variants.hpp"

#include <algorithm>

#include "schedule/mesh.hpp"
#include "schedule/partition.hpp"

namespace zerosim::detail {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The variants' process groups from the mesh (schedule/mesh.hpp, the one place groups are formed),
// in the order meta.groups has always listed them: MiCS's shard and replication groups, hpZ's,
// qgZ's intra- and inter-node groups.
std::optional<Error> add_variant_groups(ScheduleMeta& meta, const ParallelLayout& layout) {
    if (layout.hpz <= 1 && layout.mics_shard == 0 && layout.qgz_ranks_per_node == 0) return std::nullopt;
    auto mesh = Mesh::build(layout);
    if (!mesh.ok()) return mesh.error();
    for (MeshGroup k : {MeshGroup::MicsShard, MeshGroup::MicsReplica, MeshGroup::Hpz, MeshGroup::QgzIntra, MeshGroup::QgzInter})
        if (mesh.value().has(k)) meta.groups.push_back(mesh_process_group(mesh.value(), k));
    return std::nullopt;
}

// qwZ's int8 gather of a fetch or prefetch: the same call, with the QuantizedShards payload of its
// own rule (every rule has one payload).
RuleId quantized_gather(RuleId rule) {
    return rule == RuleId::Stage3Prefetch ? RuleId::QwzPrefetch : RuleId::QwzFetch;
}

}  // namespace

std::optional<int64_t> qwz_group_count(int64_t n) {
    if (n <= 0) return std::nullopt;
    const int64_t target = 8000;  // CUDAQuantizer.target_group_size
    int64_t g = (n + target - 1) / target;
    while (g < n && n % (8 * g) != 0) ++g;
    while (n % (16 * g) == 0 && n / g > target) g *= 2;
    // The three assertions after the search.
    if (n % (8 * g) != 0 || n / g >= 16000 || n <= g) return std::nullopt;
    return g;
}

std::optional<Error> setup_zero_variants(Build& b) {
    const ZeroConfig& z = b.cfg.zero;
    auto& meta = b.out.meta;
    ZeroVariants& v = meta.variants;
    const int64_t W = b.opt.world;
    v.gpus_per_node = b.opt.gpus_per_node;
    meta.offload_optimizer = z.offload_optimizer;
    meta.offload_param = z.offload_param && z.stage == 3;   // offload_param is a stage-3 key
    if (z.stage != 3) return std::nullopt;
    const std::string& file = b.cfg.source;
    ParallelLayout layout;   // the world and the sub-groups these settings turn on
    layout.world = W;
    if (z.mics_shard_size > 0) {
        // mics_utils.py create_mics_comm_groups: the world reshaped into rows of s ranks.
        const int64_t s = z.mics_shard_size;
        if (s > W || W % s != 0)
            return Error{file, "zero_optimization.mics_shard_size",
                         "DeepSpeed needs the world (" + str(W) + ") to be a multiple of mics_shard_size (" + str(s) + ")"};
        // mics.py MiCS_Optimizer asserts its model was converted by MiCS_Init, not zero.Init (accelerate #3442).
        if (b.opt.zero_init)
            return Error{"", "--zero-init", "MiCS needs the model converted by MiCS_Init; DeepSpeed asserts on a model "
                                            "built under deepspeed.zero.Init (mics.py)"};
        // mics.py allreduce_mics_shard_grads: no CPU-offloaded gradients with more than one shard group.
        if (z.offload_optimizer && s < W)
            return Error{file, "zero_optimization.offload_optimizer",
                         "DeepSpeed's MiCS raises \"Local sharding has no support for CPU offloading\" when "
                         "mics_shard_size (" + str(s) + ") is below the world (" + str(W) + ")"};
        v.mics = s;
        layout.mics_shard = s;
    }
    if (z.hpz_partition_size > 1) {
        // groups.py _create_zero_param_parallel_group: min(k, world), which must divide the world.
        const int64_t k = std::min(z.hpz_partition_size, W);
        if (W % k != 0)
            return Error{file, "zero_optimization.zero_hpz_partition_size",
                         "DeepSpeed needs it to divide the world size " + str(W) + " (groups.py asserts it); found " +
                             str(z.hpz_partition_size)};
        v.hpz = k;
        layout.hpz = k;
    }
    v.qwz = z.quantized_weights;
    if (z.quantized_gradients) {
        // stage3.py __init__ asserts reduce_scatter whenever the all-to-all group is set.
        if (!z.reduce_scatter)
            return Error{file, "zero_optimization.reduce_scatter",
                         "DeepSpeed asserts reduce_scatter is true with zero_quantized_gradients (stage3.py)"};
        const int64_t L = b.opt.gpus_per_node;
        if (L <= 0 && W > 1)
            return Error{"", "--gpus-per-node",
                         "zero_quantized_gradients needs the ranks per node DeepSpeed sees (device_count()); give --gpus-per-node"};
        if (L > 0 && W > 1) {
            const int64_t nodes = W / L;
            // groups.py _get_local_all_to_all_group: one node must be exactly the world; more must fill whole nodes.
            if ((nodes == 1 && W != L) || (nodes > 1 && W % L != 0))
                return Error{"", "--gpus-per-node",
                             "DeepSpeed's all-to-all groups need the world (" + str(W) + ") to be a whole number of nodes of " +
                                 str(L) + " ranks"};
            // stage3.py __avg_scatter_grads: the quantized path only with more than one node.
            if (nodes > 1) {
                v.qgz = true;
                layout.qgz_ranks_per_node = L;
            }
        }
    }
    return add_variant_groups(meta, layout);
}

Stage3Variants::Stage3Variants(Build& b)
    : b_(b), v_(b.out.meta.variants), world_(b.parameter_world()), secondary_(b.model.params.size(), v_.hpz > 1) {}

int64_t Stage3Variants::part(int p) const {
    return stage3_partition_numel(b_.model.params[p].numel, v_.mics > 0 ? v_.mics : world_);
}

// partition_parameters.py _partition_param_sec: the n-padded parameter cut into k pieces.
int64_t Stage3Variants::secondary_part(int p) const { return part(p) * world_ / v_.hpz; }

void Stage3Variants::partitioned(int p) {
    if (v_.hpz > 1) secondary_[static_cast<size_t>(p)] = true;
}

void Stage3Variants::invalidate_secondary() {
    // Every parameter is trainable here (the model format has no frozen ones), so all are in fp16_groups.
    std::fill(secondary_.begin(), secondary_.end(), false);
}

// partitioned_param_coordinator.py __all_gather_params_: the params with a secondary tensor first.
void Stage3Variants::fetch(const std::vector<int>& todo, RuleId rule, const std::string& module_name,
                           Stage3Host& host) {
    std::vector<int> with, without;
    for (int p : todo) (secondary_[static_cast<size_t>(p)] ? with : without).push_back(p);
    if (!with.empty()) gather_group(with, true, rule, module_name, host);
    if (!without.empty()) gather_group(without, false, rule, module_name, host);
}

// One all_gather_coalesced call (partition_parameters.py): one all_gather of the concatenated
// partitions (one dtype here); under qwZ the concatenation quantized as one tensor, then its
// scales. MiCS replaces the call by coalesced gathers on the shard group that the logger never sees.
void Stage3Variants::gather_group(const std::vector<int>& ps, bool sec, RuleId rule, const std::string& module_name,
                                  Stage3Host& host) {
    int64_t n = 0;
    for (int p : ps) n += sec ? secondary_part(p) : part(p);
    GroupKind group = sec ? GroupKind::Hpz : shard_group();
    auto finish = [&](Op& op) {
        op.params = ps;
        op.group = group;
        op.module_name = module_name;
        op.logged = v_.mics == 0;
        host.gathered(op);
    };
    if (v_.qwz && v_.mics == 0) {
        auto g = qwz_group_count(n);
        if (!g && !b_.failure)
            b_.failure = Error{b_.cfg.source, "zero_optimization.zero_quantized_weights",
                               "DeepSpeed's quantizer asserts (partition_parameters.py CUDAQuantizer.quantize): a gather of " +
                                   str(n) + " elements (" + module_name + ") is not a multiple of 8, or no group size fits; "
                                   "\"Qantized weight requires the number of weights be a multiple of 8\""};
        Op& data = b_.collective(OpKind::AllGather, n, DType::UINT8, "allgather_fn", quantized_gather(rule), Stream::Fetch);
        finish(data);
        Op& scales = b_.collective(OpKind::AllGather, g.value_or(1), DType::FP32, "allgather_fn", RuleId::QwzFetchScales,
                                   Stream::Fetch);
        finish(scales);
        return;
    }
    finish(b_.collective(OpKind::AllGather, n, b_.cfg.model_dtype, "allgather_fn", rule, Stream::Fetch));
}

// coalesced_collectives.py all_to_all_quant_reduce: each gradient on its own, in ds_id order.
void Stage3Variants::quantized_reduce(const std::vector<int>& bucket, int flush, Stream st) {
    const int64_t L = v_.gpus_per_node;
    for (int p : bucket) {
        const auto& par = b_.model.params[static_cast<size_t>(p)];
        const int64_t m = par.numel;
        auto add = [&](OpKind kind, int64_t elements, DType dt, const char* caller, RuleId rule, GroupKind group) {
            Op& op = b_.collective(kind, elements, dt, caller, rule, st);
            op.params = {p};
            op.bucket = flush;
            op.group = group;
            if (kind == OpKind::AllToAll) op.redop = ReduceOp::None;
        };
        if (par.shape.size() < 2 || m % (2 * world_) != 0) {
            // reduce_scatter_coalesced([grad]) with group None: the whole world, padded to world x ceil(m/world).
            add(OpKind::ReduceScatter, world_ * stage3_partition_numel(m, world_), b_.cfg.comm_dtype(), "reduce_scatter_fn",
                RuleId::QgzFallbackReduceScatter, GroupKind::Dp);
            continue;
        }
        // int4 data is two values a byte (swizzle_quant); scales fp32 {G, 1}, then {G / L, 1} after
        // the intra-node dequantize-reduce-requantize (quantized_reduction keeps 1/L of the values).
        const int64_t G = std::max({par.shape[0], par.shape[1], world_});
        add(OpKind::AllToAll, m / 2, DType::UINT8, "all_to_all_quant_reduce", RuleId::QgzIntraAllToAll, GroupKind::QgzIntra);
        add(OpKind::AllToAll, G, DType::FP32, "all_to_all_quant_reduce", RuleId::QgzIntraScales, GroupKind::QgzIntra);
        add(OpKind::AllToAll, m / (2 * L), DType::UINT8, "all_to_all_quant_reduce", RuleId::QgzInterAllToAll, GroupKind::QgzInter);
        add(OpKind::AllToAll, G / L, DType::FP32, "all_to_all_quant_reduce", RuleId::QgzInterScales, GroupKind::QgzInter);
    }
}

// mics.py MiCS_Optimizer.allreduce_mics_shard_grads, from partition_grads on the boundary micro-step:
// this rank's gradient partitions (accumulation dtype) of the bucket, all_reduced over the
// replication group; nothing when that group is one rank.
void Stage3Variants::after_flush(const std::vector<int>& bucket, int flush, Stream st) {
    if (v_.mics == 0 || v_.mics == world_ || !b_.is_boundary()) return;
    int64_t n = 0;
    for (int p : bucket) n += part(p);
    DType acc = b_.cfg.grad_accum_dtype.value_or(b_.cfg.model_dtype);
    Op& op = b_.collective(OpKind::AllReduce, n, acc, "allreduce_mics_shard_grads", RuleId::MicsAllreduceShardGrads, st);
    op.params = bucket;
    op.bucket = flush;
    op.group = GroupKind::MicsReplica;
}

}  // namespace zerosim::detail
