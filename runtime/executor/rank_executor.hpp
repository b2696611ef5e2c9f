// The executor's internals, private to runtime/executor: one rank's ZeRO state and the methods
// that drive it, one source file per concern; each op is run by the handler of its payload kind
// (handlers.hpp), which reads and writes this state:
//   state.cpp        the state layout: working copies, shards, owned optimizer partitions
//   scheduling.cpp   the worker threads, their waits and the test hooks (plan_waits.cpp: the waits)
//   handlers.cpp     the handler table (one handler per payload) and the collective protocol
//   compute.cpp      forward/backward segments (real GEMMs, the loss's gradients)
//   optimizer.cpp    Adam over this rank's partition
//   collectives.cpp  what every collective shares: the result check, staging buffers, tolerances;
//                    the barrier and the payloads the runtime does not model
//   gradients.cpp    gradient reductions (buckets, slices, stage-3 shards) and their expectations
//   parameters.cpp   parameter gathers and broadcasts
//   groups.cpp       process groups, MiCS's replication all_reduce
//   quantized.cpp    ZeRO++ qwZ's int8 gathers and qgZ's int4 all_to_all reduction
//   weights.cpp      the weight dump
//   model_data.cpp   3D layouts' messages and model collectives (synthetic where no real model runs)
//   pipeline_mlp.cpp a pipeline stage of the real MLP (mlp.cpp: the model and its reference), and
//                    the hooks every real model's reference answers (gradients, weights, updates)
//   tensor_model.cpp a tensor rank of the real tensor-parallel model (tensor_mlp.cpp)
//   moe_model.cpp    a rank of the real MoE model (moe_mlp.cpp)
//   ulysses_model.cpp a rank of the real Ulysses model (ulysses_mlp.cpp)
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/host_cache.hpp"
#include "executor/executor.hpp"
#include "executor/loss.hpp"
#include "executor/mlp.hpp"
#include "executor/moe_mlp.hpp"
#include "executor/tensor_mlp.hpp"
#include "executor/ulysses_mlp.hpp"
#include "executor/watchdog.hpp"

namespace zerorun {
namespace detail {

using zerosim::Op;
using zerosim::PartitionKind;
using zerosim::Schedule;

double wall_us();
std::string op_label(const Op& op);
// A broken invariant of the schedule or the state: the op and what went wrong.
[[noreturn]] void broken(const Op& op, const std::string& what);

// A contiguous run of fp32 optimizer state this rank owns: one per parameter (Replicated,
// PerParameter) or per parameter group (FlatGroups).
struct Unit {
    int64_t size = 0;
    std::vector<int> params;
    Buffer master, m, v, grad;
    int adam_t = 0;
    int grad_step = -1000;     // the step whose gradients `grad` holds
};

// Where parameter p's owned elements [lo, hi) sit: unit index = base + element.
struct Owned {
    int unit = -1;
    int64_t base = 0, lo = 0, hi = 0;
};

// A collective's result check: elements compared, how many were wrong, the first wrong one.
struct Check {
    int64_t checked = 0, wrong = 0;
    std::string first;   // the first wrong element, for the report
    void see(bool ok) {
        ++checked;
        if (!ok) ++wrong;
    }
    // `what` builds the message only for the first wrong element (no allocation per element).
    template <class F>
    void see(bool ok, F&& what) {
        see(ok);
        if (!ok && first.empty()) first = what();
    }
};

// The kinds of process group the executor treats apart (issue 17: hpZ, qgZ, MiCS); Other: a
// group of meta.groups no rule of the executor singles out.
enum class GroupRole { World, HpzSecondary, QgzIntraNode, QgzInterNode, MicsShard, MicsReplica, Other };
// The role of the group an op or meta.groups entry names. The one place runtime/ reads a group's
// name: when Op::group becomes an enum (issue 27 part 2) this is a lookup of it. Unknown: nullopt.
std::optional<GroupRole> group_role(zerosim::GroupKind group);

// One process group as this rank sees it (issue 17: hpZ, MiCS): the backend's handle (-1: the
// world), this rank's index in its set, and the set's world ranks in ascending order.
struct GroupView {
    GroupRole role = GroupRole::World;
    int handle = -1;
    int index = 0;
    std::vector<int> members;
    int size() const { return static_cast<int>(members.size()); }
};

// The group ZeRO shards over on global rank `grank` (docs/runtime.md "3D layouts"): every rank
// without a 3D layout; in one, the rank's data-parallel group, or sequence x data under Ulysses
// (schedule/mesh.hpp, as DeepSpeed v0.14.2 utils/groups.py _get_sequence_data_parallel_group).
// `color` is the group's index among its kind's groups (the split's color).
struct ZeroGroup {
    std::vector<int> members;   // global ranks, ascending
    int index = 0;              // grank's place in them
    int color = 0;
};
ZeroGroup zero_group(const Schedule& s, int grank, int world);

class HandlerTable;

// One rank's ZeRO state and the methods every payload's handler shares. The state is public:
// the handlers (handlers.hpp) are the code that reads and writes it, op by op.
class Executor {
  public:
    Executor(Backend& be, const Schedule& s, const ExecOptions& o, MemoryTracker& mem);
    ~Executor();
    RankResult run();
    void dump_weights(const std::string& prefix) const;

    Backend& be_;
    const Schedule& s_;
    const ExecOptions& a_;
    MemoryTracker& mem_;
    // ZeRO's rank and world: this rank's place in, and the size of, the group ZeRO shards over
    // (the whole world; in a 3D layout its data-parallel group, sequence x data under Ulysses:
    // zero_group below). Every ZeRO rule of the executor reads these two.
    const int rank_, world_;
    const int grank_;              // the global (MPI world) rank: messages, peers, 3D group members
    const PartitionKind layout_;   // the schedule's partition layout (meta.partition)
    LossSpec spec_;
    AdamParams adam_;
    bool verify_ = true;
    HostCacheEvictor cold_;                // ExecOptions::evict_before_op
    std::unique_ptr<Reference> shadow_;
    int shadow_step_ = -1;

    // Parameters.
    std::vector<Buffer> work_;             // full working copy, model dtype
    std::vector<Buffer> shard_;            // stage 3: this rank's shard, model dtype
    std::vector<int64_t> updates_;         // optimizer updates applied to p (on every rank)
    std::vector<int64_t> work_version_;    // updates reflected in work_[p]
    std::vector<int64_t> part_;            // stage 3 shard size (ceil(numel / shard count))
    // Process groups: the world and every group of meta.groups, by name (groups.cpp).
    GroupView world_group_;
    std::map<zerosim::GroupKind, GroupView> groups_;
    const GroupView* shard_group_ = nullptr;
    // The group each parameter's optimizer state is cut over and its gradient averaged over
    // (meta.partition's `over`): ZeRO's group, or for MoE experts the expert-data group (DeepSpeed
    // v0.14.2 stage_1_and_2.py _configure_moe_settings / real_dp_process_group). A parameter's loss
    // rank is this rank's place in it (its targets), its loss world that group's size.
    std::vector<const GroupView*> over_;
    const GroupView& cut_group(int p) const { return *over_[static_cast<size_t>(p)]; }   // whom a stage-3 parameter is cut among (world or MiCS shard)
    // Whether ZeRO++ qwZ or qgZ is in the schedule: received weights then drift from the
    // unquantized reference as 16-bit ones do (weight_tolerance).
    bool quantized_ = false;
    // Gradients.
    std::vector<Buffer> acc_;              // fp32 local gradient, from backward until reduced
    std::vector<std::vector<int>> pending_;  // micro-steps accumulated in acc_
    std::vector<int64_t> reduced_;         // elements of acc_ already sent
    std::vector<int64_t> computed_at_;     // (step, micro) key of the last gradient computed
    // Optimizer state.
    std::vector<Unit> units_;
    std::vector<Owned> owned_;

    int64_t numel(int p) const { return s_.params[p].numel; }
    DType mdt() const { return s_.meta.model_dtype; }

    // groups.cpp
    const GroupView& group_of(const Op& op) const;
    const GroupView* group_with(GroupRole role) const;   // the first of meta.groups in this role, or null

    // compute.cpp, optimizer.cpp
    void require_current(const Op& op);
    void backward_gradients(const Op& op);
    std::vector<int> units_of_step(const Op& op);
    void optimizer_step(const Op& op);

    // collectives.cpp
    void finish(OpRecord& rec, const Check& c, bool has_output = true);
    Buffer comm_buffer(int64_t elements, DType t);
    double weight_tolerance(DType t, double w, int64_t updates) const;
    void check_weight(Check& c, const Op& op, int p, int64_t i, double got);
    // Times the backend call alone. With --sync-each-op every rank first meets at a fence (not an
    // IR op, not logged), as DeepSpeed's logger synchronises around each op, so one rank's
    // lateness is not counted as the collective's time.
    // Point-to-point ops pass fence = false: a world fence would need every rank, and ranks of
    // different stages hold different numbers of sends and receives; the message itself meets
    // the two ends.
    template <class F>
    void timed_call(OpRecord& rec, F&& call, bool fence = true);

    // gradients.cpp
    float my_gradient(int p, int64_t i) const;
    int loss_rank(int p, int global) const;   // a global rank's place in the group p is cut over
    std::pair<double, double> expected_sum(const Op& op, int p, int64_t i) const;
    std::pair<double, double> expected_sum(const Op& op, int p, int64_t i, const std::vector<int>& ranks) const;
    void apply_gradient(const Op& op, int p, int64_t i, float v);
    void consume(int p, int64_t n);

    // state.cpp
    void take_initial_value(int p);
    void refresh_shard(int p);

    // pipeline_mlp.cpp: a pipeline stage of the real MLP (ExecOptions::pipeline_mlp; null: the
    // model's data is synthetic, model_data.cpp).
    std::shared_ptr<const PipelineMlp> mlp_;
    size_t mlp_stage_ = 0;
    std::vector<int> mlp_layer_of_;        // parameter -> its layer, for a Linear's weight; -1 otherwise
    std::vector<int64_t> mlp_fan_in_;      // parameter -> its layer's input width
    std::unique_ptr<MlpReference> mlp_shadow_;   // the whole model in this process (verify only)
    // One micro batch in flight on this stage: every layer's input and the last output, the
    // received activation and gradient, the gradient flowing back.
    struct MicroBatch {
        std::vector<std::vector<float>> xs;
        std::vector<float> received_activation, received_grad, grad;
        int next_backward = -1;   // the layer whose backward ran last
    };
    std::map<std::pair<int, int>, MicroBatch> micro_;   // (step, micro); compute and comm threads
    std::mutex micro_mu_;
    void set_pipeline_mlp();
    float initial_value(int p, int64_t i) const;
    MlpReference& mlp_reference(int step) const;
    MicroBatch& micro_batch(const Op& op);
    void drop_micro_batch(const Op& op);
    void mlp_forward(const Op& op);
    void mlp_backward(const Op& op);
    const std::vector<float>& mlp_outgoing(const Op& op);
    void mlp_sent(const Op& op);
    void mlp_received(const Op& op, const void* got, Check& c);
    void plan_mlp_waits();

    // tensor_model.cpp: a tensor rank of the real tensor-parallel model (ExecOptions::tensor_mlp).
    std::shared_ptr<const TensorMlp> tp_;
    int tp_rank_ = 0;
    std::vector<int> tp_module_of_;        // parameter -> its module
    std::unique_ptr<TensorMlpReference> tp_shadow_;
    struct TpMicro {
        struct Cache {
            std::vector<float> x, y, xhat, rstd;
        };
        std::vector<Cache> caches;            // per module
        std::vector<float> act, grad, partial;
        int partial_module = -1;
        bool partial_forward = true;
    };
    std::map<std::pair<int, int>, TpMicro> tp_micro_;   // (step, micro); guarded by micro_mu_
    void set_tensor_mlp();
    TensorMlpReference& tp_reference(int step) const;
    TpMicro& tp_micro(const Op& op);
    int tp_module(const Op& op) const;
    void tp_forward(const Op& op);
    void tp_backward(const Op& op);
    const std::vector<float>& tp_outgoing(const Op& op);
    void tp_received(const Op& op, const void* got, Check& c);
    void plan_tp_waits();

    // moe_model.cpp: a rank of the real expert-parallel model (ExecOptions::moe_mlp).
    std::shared_ptr<const MoeMlp> moe_;
    int ep_rank_ = 0;
    std::unique_ptr<MoeMlpReference> moe_shadow_;
    struct MoeState {
        MoeMicro data;
        int exchanges = 0;   // expert-group all_to_alls done in this micro batch
    };
    std::map<std::pair<int, int>, MoeState> moe_micro_;   // (step, micro); guarded by micro_mu_
    void set_moe_mlp();
    MoeMlpReference& moe_reference(int step) const;
    MoeState& moe_micro(const Op& op);
    void moe_compute(const Op& op, bool forward);   // the weights and this micro batch's gradients, then moe_module
    void moe_module(const Op& op, bool forward, const std::vector<float*>& w, const std::vector<float*>& g, MoeMicro& s);
    static std::vector<float>& moe_buffer(MoeMicro& s, int n, bool send);
    const std::vector<float>& moe_outgoing(const Op& op);
    void moe_received(const Op& op, const void* got, Check& c);

    // ulysses_model.cpp: a rank of the real Ulysses model (ExecOptions::ulysses_mlp).
    std::shared_ptr<const UlyssesMlp> uly_;
    std::unique_ptr<UlyssesMlpReference> uly_shadow_;
    struct UlyssesState {
        UlyssesMicro data;
        int exchanges = 0;   // sequence-group all_to_alls done in this micro batch
    };
    std::map<std::pair<int, int>, UlyssesState> uly_micro_;   // (step, micro); guarded by micro_mu_
    void set_ulysses_mlp();
    UlyssesMlpReference& uly_reference(int step) const;
    UlyssesState& uly_micro(const Op& op);
    void uly_compute(const Op& op, bool forward);
    void uly_module(const Op& op, bool forward, const std::vector<float*>& w, const std::vector<float*>& g, UlyssesMicro& s);
    const std::vector<float>& uly_outgoing(const Op& op);
    void uly_received(const Op& op, const void* got, Check& c);
    // The real models' shared hooks (pipeline_mlp.cpp): another data rank's gradient of p, a
    // reference weight, the reference's update; null / unused without a real model.
    // (the micro batches the reduction carries: pending_[p])
    const std::vector<float>* real_gradient(int p, int data_rank, int step, const std::vector<int>& micros) const;
    // Adds a micro batch's gradient of p, computed on its own, to the local accumulator (allocated
    // here): as torch adds a backward's gradient into .grad, and as the references sum them.
    void add_gradient(int p, const std::vector<float>& g, int micro);
    // gradients.cpp: a real model's reduction tolerances (the op's scale).
    void relax_for_real_model(std::vector<std::pair<double, double>>& expect) const;
    const std::vector<float>* real_weights(int p) const;
    bool real_update(int step);

  private:
    // Scheduling.
    std::vector<std::vector<int64_t>> waits_;
    std::unique_ptr<std::atomic<int>[]> done_;
    std::vector<OpRecord> records_;
    std::atomic<int64_t> comm_at_{-1};
    Watchdog* watchdog_ = nullptr;
    std::unique_ptr<HandlerTable> handlers_;   // one handler per payload kind (handlers.cpp)

    void build_groups();
    void build_state();
    void plan_waits();
    void worker(const std::vector<int64_t>& list);
    void maybe_fail_on_purpose(const Op& op);

  public:
    // --test-fail-mode corrupt: this rank is to put one wrong element into op's data.
    bool corrupt_on_purpose(const Op& op) const {
        return a_.test.fail_mode == TestHooks::Mode::Corrupt && a_.test.fail_rank == grank_ && a_.test.fail_op == op.id;
    }
};

template <class F>
void Executor::timed_call(OpRecord& rec, F&& call, bool fence) {
    if (a_.sync_each_op && fence) be_.barrier();
    auto t0 = std::chrono::steady_clock::now();
    call();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    rec.call_us = us;
}

}  // namespace detail
}  // namespace zerorun
