// One handler per payload kind, private to runtime/executor. The executor looks each op's handler
// up by the op's payload (the IR's word for what the buffer holds) and never by its rule: a
// handler fills the buffer from the rank's state, runs the collective, checks the result against
// an expectation computed independently and takes it into the state. nccl-tests' `struct
// testColl` is the model (src/common.h: per collective initData, runColl, then the check).
// State one handler carries from op to op (qwZ's data before its scales, qgZ's four steps, the
// world sums MiCS's shard reduction leaves for the replication all_reduce) lives in the handler.
#pragma once

#include <map>
#include <vector>

#include "rank_executor.hpp"

namespace zerorun {
namespace detail {

using zerosim::Payload;

class PayloadHandler {
  public:
    explicit PayloadHandler(Executor& x) : x(x) {}
    virtual ~PayloadHandler() = default;
    PayloadHandler(const PayloadHandler&) = delete;
    PayloadHandler& operator=(const PayloadHandler&) = delete;
    // The op's whole life on this rank; its record gets the call time and the check's outcome.
    virtual void run(const Op& op, OpRecord& rec) = 0;

  protected:
    Executor& x;
};

// A collective: on the op's group, after the cache eviction (--evict-before-op), staged, called
// (timed alone), checked and taken. The staging buffers live from stage to take, as one op's own.
class CollectiveHandler : public PayloadHandler {
  public:
    using PayloadHandler::PayloadHandler;
    void run(const Op& op, OpRecord& rec) final;

  protected:
    // Fills the op's buffers from the rank's state, with the expectations the result must meet.
    virtual void stage(const Op& op) = 0;
    // The backend call alone: what --op-time and the comms_logger lines time.
    virtual void call(const Op& op) = 0;
    // Checks the result and takes it into the rank's state.
    virtual Check take(const Op& op) = 0;
    // Whether this rank receives a result (a reduce's non-roots do not).
    virtual bool has_output(const Op&) const { return true; }
    // The payloads of whole parameters' state (gradients, partitions, broadcasts), which run on
    // the group their parameters are cut over (ZeRO's group; MoE experts' expert-data group).
    virtual bool on_params_group() const { return false; }
    Buffer in_, out_;
};

// Barrier: no data, nothing to check.
class BarrierHandler final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op&) override {}
    void call(const Op&) override { x.be_.barrier(); }
    Check take(const Op&) override { return {}; }
    bool has_output(const Op&) const override { return false; }
};

// Payloads the runtime does not model (overflow flags and norms, all_reduced; trace lengths,
// broadcast): the IR's size, dtype, redop and root with the backends' check pattern.
class PatternHandler final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
};

// Gradient slices (stage 0-2 bucket reductions) and buckets (stage 3's all_reduce flush).
class GradientReduction final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    bool has_output(const Op& op) const override;
    bool on_params_group() const override { return true; }
    std::vector<zerosim::Segment> segs_;
    std::vector<std::pair<double, double>> expect_;
};

// MiCS: the world-wide sum each owned gradient element must reach after the replication
// all_reduce, kept from the shard-group reduce-scatter (whose result is a partial sum).
struct MicsWorldSums {
    std::vector<std::vector<std::pair<double, double>>> sum;   // [param][shard element]
    std::vector<int> step;                                     // the step `sum[p]` is for
};

// Stage 3's reduce_scatter of padded, interleaved gradients (on the world or MiCS's shard group).
class GradientShardReduction final : public CollectiveHandler {
  public:
    GradientShardReduction(Executor& x, MicsWorldSums& sums) : CollectiveHandler(x), sums_(sums) {}

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    void expect(const Op& op, const GroupView& g);
    MicsWorldSums& sums_;
    int64_t per_rank_ = 0;
    std::vector<std::pair<double, double>> expect_;
};

// MiCS's replication all_reduce of the shard-group gradient partitions (groups.cpp).
class MicsReplicaReduction final : public CollectiveHandler {
  public:
    MicsReplicaReduction(Executor& x, const MicsWorldSums& sums) : CollectiveHandler(x), sums_(sums) {}

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    const MicsWorldSums& sums_;
};

// Stage 3's parameter gathers: primary shards, or hpZ's secondary pieces.
class ShardGather final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    std::vector<int64_t> piece_;
    int64_t per_rank_ = 0;
};

// Stages 1/2 and the BF16 optimizer: the updated partitions of a parameter group gathered.
class PartitionGather final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    bool on_params_group() const override { return true; }
};

// Engine-start (and zero-init) broadcasts of whole parameters.
class ParameterBroadcast final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    bool on_params_group() const override { return true; }
    bool in_place_ = false;
};

// ZeRO++ qwZ (quantized.cpp): a gather's int8 data (QuantizedShards), then its scales
// (QuantScales on an all_gather), which dequantize what arrived into the working copies.
class QwzGather final : public CollectiveHandler {
  public:
    explicit QwzGather(Executor& x);

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    void stage_data(const Op& op);
    Check take_scales(const Op& op);
    void dequantize_member(const Op& op, int r, const float* scales, const std::vector<double>& carried, Check& c);
    // The gather in flight, from its data op to its scales op.
    int64_t data_op_ = -1;              // the op that sent the data
    int64_t n_ = 0, blocks_ = 0;        // elements and scale blocks of this rank's input
    std::vector<uint8_t> sent_;         // this rank's int8 data
    std::vector<float> sent_scales_;
    Buffer received_;                   // every member's data, member order
    std::vector<int64_t> piece_;        // elements of each param in one member's input
    std::vector<double> qerr_;          // the most a weight of work_[p] is off by quantization
};

// ZeRO++ qgZ (quantized.cpp): one gradient's four all_to_alls, data and scales inside the node,
// then across nodes (QuantizedGradient and QuantScales; the op's group says which exchange).
class QgzReduction final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    enum class Step { IntraData, IntraScales, InterData, InterScales };
    Step step_of(const Op& op) const;
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    void start(const Op& op);
    void stage_exchange(const Op& op, const void* send, int64_t total, DType t);
    std::vector<float> sum_parts(const Op& op, std::vector<float>& node_scales) const;
    void check_world_sum(const Op& op, const std::vector<float>& sum, const std::vector<float>& node_scales, Check& c) const;
    // The gradient in flight: what this rank sends next and what arrived.
    int64_t data_op_ = -1;              // the exchange's last op so far
    int64_t n_ = 0, blocks_ = 0;        // int4 values and scale blocks of this rank's input
    std::vector<uint8_t> sent_;
    std::vector<float> sent_scales_;
    Buffer received_;                   // every member's int4 data, member order
    // The all_to_all being staged: elements per member and their dtype.
    int64_t per_ = 0;
    DType type_ = DType::UINT8;
};

// QuantScales serves two exchanges: qwZ's scales are all_gathered, qgZ's exchanged all_to_all.
class QuantScalesRouter final : public PayloadHandler {
  public:
    QuantScalesRouter(Executor& x, PayloadHandler& qwz, PayloadHandler& qgz) : PayloadHandler(x), qwz_(qwz), qgz_(qgz) {}
    void run(const Op& op, OpRecord& rec) override;

  private:
    PayloadHandler& qwz_;
    PayloadHandler& qgz_;
};

// The model's own data in a 3D layout (issue 29; model_data.cpp): pipeline sends and receives,
// tensor-parallel all_reduces, Ulysses' and MoE's all_to_alls, the loss and count scalars. The
// contents are synthetic: element i of what global rank `from` sends in its n-th message on a
// channel is model_value(from, to, channel, n, step, micro, i), a small integer, so every receiver
// recomputes every member's contribution and checks sums, gathers and exchanges exactly.
double model_value(DType t, int from, int to, int64_t channel, int64_t n, int step, int micro, int64_t i);

// Collectives with payload `activations` or `scalars`, on the op's group (any kind). The n-th
// collective of a group is the n-th on every member (MPI's and NCCL's rule), so n names it on all.
class ModelCollective final : public CollectiveHandler {
  public:
    using CollectiveHandler::CollectiveHandler;

  private:
    void stage(const Op& op) override;
    void call(const Op& op) override;
    Check take(const Op& op) override;
    bool has_output(const Op& op) const override;
    std::map<zerosim::GroupKind, int64_t> seq_;   // collectives so far per group kind
    int64_t n_ = 0;                                // this op's number on its group
    int64_t count_ = 0;                            // elements per member block (gather, scatter, all_to_all)
    bool real_ = false;                            // the real tensor-parallel model's partial sums
    bool real_moe_ = false;                        // the real MoE model's tokens
    bool real_uly_ = false;                        // the real Ulysses model's q, k, v, output
};

// Send and Recv (payload `activations` or `scalars`): one MPI (or NCCL) point-to-point message to
// or from the op's peer (a global rank). The n-th send from a to b meets b's n-th receive from a.
class PointToPoint final : public PayloadHandler {
  public:
    using PayloadHandler::PayloadHandler;
    void run(const Op& op, OpRecord& rec) override;

  private:
    std::map<std::pair<int64_t, bool>, int64_t> seq_;   // (peer, is send) -> messages so far
};

// The payloads of the model's own data: point-to-point ops to PointToPoint, collectives to
// ModelCollective.
class ModelDataRouter final : public PayloadHandler {
  public:
    ModelDataRouter(Executor& x, PayloadHandler& p2p, PayloadHandler& coll) : PayloadHandler(x), p2p_(p2p), coll_(coll) {}
    void run(const Op& op, OpRecord& rec) override;

  private:
    PayloadHandler& p2p_;
    PayloadHandler& coll_;
};

// Multiplies square matrices for a compute segment's FLOPs (compute.cpp).
class GemmWorkspace {
  public:
    GemmWorkspace(MemoryTracker& mem, double compute_scale) : mem_(mem), compute_scale_(compute_scale) {}
    double run(double flops);   // returns the FLOPs run

  private:
    MemoryTracker& mem_;
    const double compute_scale_;   // --compute-scale
    Buffer a_, b_, c_;
    int64_t n_ = 0;
};

// Compute segments: forward, backward (the loss's gradients), the optimizer step.
class ComputeHandler final : public PayloadHandler {
  public:
    explicit ComputeHandler(Executor& x) : PayloadHandler(x), gemm_(x.mem_, x.a_.compute_scale) {}
    void run(const Op& op, OpRecord& rec) override;

  private:
    GemmWorkspace gemm_;
};

// Every handler of one rank, and the table from payload to handler (handlers.cpp registers them).
class HandlerTable {
  public:
    explicit HandlerTable(Executor& x);
    PayloadHandler& at(const Op& op) const;
    // The payloads the registration table serves (for the test that it covers the rule table).
    static bool serves(Payload p);

  private:
    MicsWorldSums mics_sums_;
    BarrierHandler barrier_;
    PatternHandler pattern_;
    GradientReduction reduction_;
    GradientShardReduction shard_reduction_;
    MicsReplicaReduction replica_reduction_;
    ShardGather shard_gather_;
    PartitionGather partition_gather_;
    ParameterBroadcast broadcast_;
    QwzGather qwz_;
    QgzReduction qgz_;
    QuantScalesRouter scales_;
    PointToPoint p2p_;
    ModelCollective model_coll_;
    ModelDataRouter model_data_;
    ComputeHandler compute_;
    std::map<Payload, PayloadHandler*> by_payload_;

    struct Registration;
    static const std::vector<Registration>& registrations();
};

}  // namespace detail
}  // namespace zerorun
