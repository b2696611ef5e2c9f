// The state layout: who holds which working copies, shards and fp32 optimizer partitions, as the
// schedule's partition layout (meta.partition, written by schedule/partition.hpp's rules) says.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "backends/dtype.hpp"
#include "handlers.hpp"
#include "schedule/partition.hpp"

namespace zerorun {
namespace detail {

double wall_us() {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::string op_label(const Op& op) {
    std::string s = "op " + std::to_string(op.id) + " " +
                    (op.kind == zerosim::OpKind::Compute ? std::string(zerosim::compute_kind_name(op.compute))
                                                         : std::string(zerosim::op_record_name(op.kind)));
    if (!op.caller.empty()) s += " [" + op.caller + "]";
    s += ", step " + std::to_string(op.step);
    return s;
}

void broken(const Op& op, const std::string& what) { throw std::runtime_error("schedule " + op_label(op) + ": " + what); }

Executor::Executor(Backend& be, const Schedule& s, const ExecOptions& a, MemoryTracker& mem)
    : be_(be), s_(s), a_(a), mem_(mem), rank_(zero_group(s, be.rank(), be.world()).index),
      world_(static_cast<int>(zero_group(s, be.rank(), be.world()).members.size())), grank_(be.rank()),
      layout_(s.meta.partition.kind),
      cold_(a.evict_before_op) {   // check_exec_options: only with sync_each_op
    spec_.seed = a.seed;
    spec_.world = world_;
    spec_.grad_accum = s.meta.grad_accum;
    spec_.model_dtype = s.meta.model_dtype;
    spec_.comm_dtype = s.meta.comm_dtype;
    spec_.lr = a.lr;
    adam_.lr = a.lr;
    verify_ = a.verify;
    build_groups();
    set_pipeline_mlp();
    set_tensor_mlp();
    set_moe_mlp();
    set_ulysses_mlp();
    if (verify_) {
        shadow_ = std::make_unique<Reference>(s.params, spec_);
        for (size_t p = 0; p < s.params.size(); ++p) shadow_->set_world(static_cast<int>(p), over_[p]->size());
    }
    build_state();
    plan_waits();
    records_.resize(s.ops.size());
    handlers_ = std::make_unique<HandlerTable>(*this);
}

Executor::~Executor() = default;

// How the fp32 master weights, Adam moments and reduced gradients are cut:
//  Replicated: every rank holds everything (stage 0 without the BF16 optimizer);
//  FlatGroups: each parameter group flattened and cut into `world` equal partitions (stages 1/2
//        and the BF16 optimizer), one unit per group holding this rank's partition;
//  PerParameter: each parameter cut on its own into ceil(numel/world) shards (stage 3); with
//        MiCS into ceil(numel/s) shards over the rank's shard group, every replica holding the
//        same shard and taking the same optimizer step on it (DeepSpeed v0.14.2 mics.py
//        MiCS_Init partitions over the shard group).
void Executor::build_state() {
    const size_t P = s_.params.size();
    work_.resize(P);
    updates_.assign(P, 0);
    work_version_.assign(P, 0);
    acc_.resize(P);
    pending_.resize(P);
    reduced_.assign(P, 0);
    computed_at_.assign(P, -1);
    owned_.resize(P);
    part_.assign(P, 0);
    const int es = zerosim::dtype_size(mdt());
    // A parameter no engine-start op broadcasts was built under deepspeed.zero.Init (--zero-init),
    // whose construction broadcast it from rank 0 before anything is logged
    // (partition_parameters.py _zero_init_param): every rank starts with the real model.
    std::vector<bool> broadcast_at_start(P, false);
    for (const auto& op : s_.ops)
        if (op.step < 0 && op.payload == zerosim::Payload::ParameterBroadcast)
            for (int q : op.params) broadcast_at_start[static_cast<size_t>(q)] = true;
    for (size_t p = 0; p < P; ++p) {
        work_[p] = Buffer(mem_, MemCat::Parameters, static_cast<size_t>(numel(p)) * es);
        // Only rank 0 starts with the real model; the engine-start broadcast must bring it to
        // the others, or every later check fails.
        for (int64_t i = 0; i < numel(p); ++i)
            store_element(work_[p].data(), mdt(), i,
                          cut_group(static_cast<int>(p)).index == 0 || !broadcast_at_start[p] ? initial_value(static_cast<int>(p), i)
                                     : garbage_weight(rank_, static_cast<int>(p), i));
    }
    auto new_unit = [&](int64_t size) {
        Unit u;
        u.size = size;
        size_t b = static_cast<size_t>(size) * 4;
        u.master = Buffer(mem_, MemCat::OptimizerStates, b);
        u.m = Buffer(mem_, MemCat::OptimizerStates, b);
        u.v = Buffer(mem_, MemCat::OptimizerStates, b);
        u.grad = Buffer(mem_, MemCat::Gradients, b);
        units_.push_back(std::move(u));
        return static_cast<int>(units_.size() - 1);
    };
    if (layout_ == PartitionKind::Replicated) {
        for (size_t p = 0; p < P; ++p) {
            int u = new_unit(numel(p));
            units_[u].params = {static_cast<int>(p)};
            owned_[p] = {u, 0, 0, numel(p)};
        }
    } else if (layout_ == PartitionKind::FlatGroups) {
        // Unit g is group g's partition (partition_gather and the optimizer rely on it).
        for (const auto& G : s_.meta.partition.groups) {
            int u = new_unit(G.partition_size);
            units_[u].params = G.order;
            for (size_t k = 0; k < G.order.size(); ++k) {
                const int p = G.order[k];
                int64_t base = G.offsets[k] - static_cast<int64_t>(cut_group(p).index) * G.partition_size;
                int64_t lo = std::clamp<int64_t>(-base, 0, numel(p));
                int64_t hi = std::clamp<int64_t>(G.partition_size - base, lo, numel(p));
                owned_[p] = {u, base, lo, hi};
            }
        }
    } else {
        shard_.resize(P);
        const int64_t cut = shard_group_->size(), me = shard_group_->index;
        for (size_t p = 0; p < P; ++p) {
            part_[p] = zerosim::stage3_partition_numel(numel(p), cut);
            shard_[p] = Buffer(mem_, MemCat::Parameters, static_cast<size_t>(part_[p]) * es);
            int u = new_unit(part_[p]);
            units_[u].params = {static_cast<int>(p)};
            int64_t lo = std::min(numel(p), me * part_[p]);
            int64_t hi = std::min(numel(p), (me + 1) * part_[p]);
            owned_[p] = {u, -me * part_[p], lo, hi};
        }
    }
    for (size_t p = 0; p < P; ++p) take_initial_value(static_cast<int>(p));
}

// The working copy of p now holds the initial model: the fp32 master (and stage 3's shard)
// start from it, as DeepSpeed's optimizer builds its fp32 partitions from the broadcast model.
void Executor::take_initial_value(int p) {
    const Owned& o = owned_[p];
    float* master = units_[o.unit].master.as<float>();
    for (int64_t i = o.lo; i < o.hi; ++i) master[o.base + i] = static_cast<float>(load_element(work_[p].data(), mdt(), i));
    if (layout_ == PartitionKind::PerParameter) refresh_shard(p);
}

void Executor::refresh_shard(int p) {
    const Owned& o = owned_[p];
    const float* master = units_[o.unit].master.as<float>();
    for (int64_t j = 0; j < part_[p]; ++j) {
        int64_t i = shard_group_->index * part_[p] + j;
        store_element(shard_[p].data(), mdt(), j, i < numel(p) ? master[o.base + i] : 0.0);
    }
}

}  // namespace detail
}  // namespace zerorun
