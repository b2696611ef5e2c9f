// DeepSpeed v0.14.2's pipeline engine (runtime/pipe/engine.py PipelineEngine, schedule.py
// TrainSchedule, p2p.py) on one rank: its stage's parameters under ZeRO stage 0 or 1 over the stage's
// data-parallel group, the engine's start-up collectives, the 1F1B instruction stream with its
// point-to-point sends and receives, and the loss aggregation after each batch. docs/zero-comm.md
// ("The pipeline engine") states the rules; the reference runs are pp2_dp2_z1 and pp4_dp1_z0.
#include "schedule/pipe_schedule.hpp"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "build.hpp"
#include "name_table.hpp"

namespace zerosim {

namespace {

constexpr detail::Named<PipeInstr> kPipeInstrNames[] = {
    {PipeInstr::LoadMicroBatch, "LoadMicroBatch"}, {PipeInstr::ForwardPass, "ForwardPass"},
    {PipeInstr::BackwardPass, "BackwardPass"},     {PipeInstr::SendActivation, "SendActivation"},
    {PipeInstr::RecvActivation, "RecvActivation"}, {PipeInstr::SendGrad, "SendGrad"},
    {PipeInstr::RecvGrad, "RecvGrad"},             {PipeInstr::ReduceTiedGrads, "ReduceTiedGrads"},
    {PipeInstr::ReduceGrads, "ReduceGrads"},       {PipeInstr::OptimizerStep, "OptimizerStep"},
};
static_assert(detail::dense_and_unique(
                  kPipeInstrNames, [](const auto& e) { return e.value; }, [](const auto& e) { return e.name; }) &&
              std::size(kPipeInstrNames) == 1 + static_cast<size_t>(PipeInstr::OptimizerStep));

// schedule.py _step_to_micro_batch (258-278): even stages run forwards on even steps, odd stages on
// odd steps; the other steps are backwards, offset so a micro batch's backward reaches a stage
// after its forward left the last one (280-298). Python's // on these non-negative operands is
// C++'s /. Returns {micro batch (maybe out of range), is forward}.
std::pair<int64_t, bool> step_to_micro_batch(int64_t step, int64_t stages, int64_t stage) {
    const bool even_step = step % 2 == 0, even_stage = stage % 2 == 0;
    if (even_step && even_stage) return {step / 2 - stage / 2, true};
    if (!even_step && !even_stage) return {(step - 1) / 2 - stage / 2, true};
    if (even_step) return {step / 2 - stages + (stage + 1) / 2, false};
    return {(step - 1) / 2 - stages + 1 + stage / 2, false};
}

}  // namespace

const char* pipe_instr_name(PipeInstr i) { return detail::name_in(kPipeInstrNames, i); }

std::vector<std::vector<PipeCommand>> pipe_train_schedule(int64_t micro_batches, int64_t stages, int64_t stage) {
    // schedule.py TrainSchedule.steps (197-245).
    auto valid = [&](int64_t mb) { return mb >= 0 && mb < micro_batches; };
    const bool has_prev = stage > 0, has_next = stage < stages - 1;
    const int64_t total = 2 * (micro_batches + stages - 1);
    std::vector<std::vector<PipeCommand>> steps;
    int64_t prev = -1;
    for (int64_t step = 0; step < total; ++step) {
        const auto [mb, forward] = step_to_micro_batch(step, stages, stage);
        std::vector<PipeCommand> cmds;
        // Exchange activations (211-219): a forward step first returns the previous backward's
        // gradient, a backward step first takes its gradient and passes the previous forward on.
        if (forward) {
            if (valid(prev) && has_prev) cmds.push_back({PipeInstr::SendGrad, prev});
            if (valid(mb) && has_prev) cmds.push_back({PipeInstr::RecvActivation, mb});
        } else {
            if (valid(mb) && has_next) cmds.push_back({PipeInstr::RecvGrad, mb});
            if (valid(prev) && has_next) cmds.push_back({PipeInstr::SendActivation, prev});
        }
        if ((stage == 0 || stage == stages - 1) && forward && valid(mb)) cmds.push_back({PipeInstr::LoadMicroBatch, mb});
        if (valid(mb)) cmds.push_back({forward ? PipeInstr::ForwardPass : PipeInstr::BackwardPass, mb});
        if (step == total - 1)   // the model step at the end of the batch (238-241)
            for (PipeInstr i : {PipeInstr::ReduceTiedGrads, PipeInstr::ReduceGrads, PipeInstr::OptimizerStep})
                cmds.push_back({i, -1});
        prev = mb;
        steps.push_back(std::move(cmds));
    }
    return steps;
}

namespace detail {

namespace {

// This rank's place in the pipeline and what crosses its stage boundaries.
struct PipeStage {
    int64_t stage = 0, stages = 1;
    int64_t prev_rank = -1, next_rank = -1;   // p2p.py stage_to_global: the same data and tensor index one stage over
    int64_t out_elements = 0, in_elements = 0;   // a micro batch's activations sent on / received
    int64_t out_dims = 0, in_dims = 0;            // their ranks (micro batch dimension included)
    std::vector<int64_t> out_mask, in_mask;       // an attention mask sent beside them (PipeLayer::mask)
    bool meta_sent = false, meta_received = false;
    // Under tensor parallelism (engine.py 138-141: is_model_parallel and the config's flags): the
    // first activation crosses as a PartitionedTensor over the tensor ("slice") group, its layout
    // (to_meta) and this rank's part; its gradient too when grad_partitioned.
    int64_t tp = 1, tp_rank = 0;
    bool pipe_partitioned = false, grad_partitioned = false;
    // runtime/utils.py PartitionedTensor: this rank's part of an activation (partition_uniform over the
    // group), and the length of to_meta()'s LongTensor [ndims, *shape, num_parts, rank, *partition].
    int64_t part_of(int64_t elements) const {
        const auto parts = partition_uniform(elements, tp);
        return parts[static_cast<size_t>(tp_rank) + 1] - parts[static_cast<size_t>(tp_rank)];
    }
    int64_t meta_length(int64_t dims) const { return 1 + dims + 2 + tp + 1; }
};

PipeStage pipe_stage(const Build& b) {
    PipeStage st;
    st.stage = b.out.meta.pipe_stage;
    st.stages = b.mesh->layout().pipe;
    const auto& ranks = b.mesh->group_of(MeshGroup::Pipe, b.rank);   // ascending = by stage
    if (st.stage > 0) st.prev_rank = ranks[static_cast<size_t>(st.stage - 1)];
    if (st.stage < st.stages - 1) st.next_rank = ranks[static_cast<size_t>(st.stage + 1)];
    // A micro batch of the layer's per-sample output: the stage's last layer's goes on, the
    // previous stage's last layer's comes in (engine.py _exec_send_activations / _recv_tensor_meta).
    const auto& layers = b.model.parallel.pipe_layers;
    auto activation = [&](int64_t layer, int64_t& elements, int64_t& dims, std::vector<int64_t>& mask) {
        const auto& shape = layers[static_cast<size_t>(layer)].output;
        elements = b.batch.micro_batch;
        for (int64_t d : shape) elements *= d;
        dims = 1 + static_cast<int64_t>(shape.size());
        mask = layers[static_cast<size_t>(layer)].mask;
    };
    if (st.next_rank >= 0) activation(b.stage_layers.back(), st.out_elements, st.out_dims, st.out_mask);
    if (st.prev_rank >= 0) activation(b.stage_layers.front() - 1, st.in_elements, st.in_dims, st.in_mask);
    st.tp = b.mesh->layout().tensor;
    st.tp_rank = b.mesh->coordinate(MeshAxis::Tensor, b.rank);
    st.pipe_partitioned = st.tp > 1 && b.cfg.pipeline.pipe_partitioned;
    st.grad_partitioned = st.tp > 1 && b.cfg.pipeline.grad_partitioned;
    return st;
}

// engine.py _send_tensor_meta / _recv_tensor_meta (917-1033), each field a LongTensor. One tensor:
// its type (0), number of dimensions and shape. A tuple (type 2: partitioned, the layout and the
// part, both flat; then the mask if any): its type and count, then each tensor's dtype, number of
// dimensions and shape.
void pipe_tensor_meta(Build& b, const PipeStage& st, OpKind kind, int64_t dims, const std::vector<int64_t>& mask,
                      int64_t peer) {
    const RuleId rule = kind == OpKind::Send ? RuleId::PipeMetaSend : RuleId::PipeMetaRecv;
    std::vector<int64_t> tensor_dims;
    if (st.pipe_partitioned)
        tensor_dims = {1, 1};
    else
        tensor_dims = {dims};
    if (!mask.empty()) tensor_dims.push_back(static_cast<int64_t>(mask.size()));
    const bool tuple = tensor_dims.size() > 1;
    b.p2p(kind, 1, DType::INT64, rule, peer);            // type
    if (tuple) b.p2p(kind, 1, DType::INT64, rule, peer);  // count
    for (int64_t d : tensor_dims) {
        if (tuple) b.p2p(kind, 1, DType::INT64, rule, peer);  // dtype
        b.p2p(kind, 1, DType::INT64, rule, peer);             // ndims
        b.p2p(kind, d, DType::INT64, rule, peer);             // shape
    }
}

// The attention mask after the activation (engine.py 1042-1047: cast to half for the send; the
// receiver's buffer has the dtype the metadata gave).
void pipe_mask(Build& b, OpKind kind, const std::vector<int64_t>& mask, RuleId rule, int64_t peer) {
    if (mask.empty()) return;
    int64_t n = 1;
    for (int64_t d : mask) n *= d;
    b.p2p(kind, n, DType::FP16, rule, peer);
}

// engine.py __init__: the parameter-count all_reduce (155-156) and the warm-up exchange (224-234),
// even stages sending before they receive, odd stages the other way round; `self.loss`, the 4-byte
// fp32 scalar it sends, is fp32 whatever the model's dtype.
void pipe_engine_start(Build& b, const PipeStage& st) {
    b.group_op(OpKind::AllReduce, 2, DType::INT64, "__init__", RuleId::PipeInitParamCount, GroupKind::ModelParallel);
    auto send = [&] {
        if (st.next_rank >= 0) b.p2p(OpKind::Send, 1, DType::FP32, RuleId::PipeWarmupSend, st.next_rank);
    };
    auto recv = [&] {
        if (st.prev_rank >= 0) b.p2p(OpKind::Recv, 1, DType::FP32, RuleId::PipeWarmupRecv, st.prev_rank);
    };
    if (st.stage % 2 == 0) {
        send();
        recv();
    } else {
        recv();
        send();
    }
}

// A tensor that may cross as a PartitionedTensor: its layout, then this rank's part
// (engine.py 1052-1055 send a tuple's tensors in order; 1108-1111 the partitioned gradient's two);
// whole otherwise.
void pipe_tensor(Build& b, const PipeStage& st, OpKind kind, bool partitioned, int64_t elements, int64_t dims, RuleId rule,
                 int64_t peer) {
    const DType dt = b.cfg.model_dtype;
    if (!partitioned) {
        b.p2p(kind, elements, dt, rule, peer);
        return;
    }
    b.p2p(kind, st.meta_length(dims), DType::INT64,
          kind == OpKind::Send ? RuleId::PipePartitionMetaSend : RuleId::PipePartitionMetaRecv, peer);
    b.p2p(kind, st.part_of(elements), dt, rule, peer);
}

// PartitionedTensor.full (runtime/utils.py 669-686): the tensor group gathers the parts back into
// the whole activation, all_gather_into_tensor of this rank's part (DeepSpeed logs the input).
// generate_pipeline refuses the uneven split, whose broadcasts name group ranks as global ones.
void pipe_gather(Build& b, const PipeStage& st, int64_t elements) {
    b.group_op(OpKind::AllGather, st.part_of(elements), b.cfg.model_dtype, "full", RuleId::PipePartitionAllGather,
               GroupKind::Tensor);
}

// One instruction's point-to-point traffic (engine.py 1035-1227). Activations and their gradients
// travel in the model's dtype (the module is cast; receive buffers come from _allocate_zeros). The
// tensor metadata goes once in the engine's life, before the first activation: first_output_send
// and pipe_recv_buf are never reset by train_batch.
void pipe_exchange(Build& b, PipeStage& st, PipeInstr instr) {
    switch (instr) {
        case PipeInstr::SendActivation:
            if (!std::exchange(st.meta_sent, true)) pipe_tensor_meta(b, st, OpKind::Send, st.out_dims, st.out_mask, st.next_rank);
            pipe_tensor(b, st, OpKind::Send, st.pipe_partitioned, st.out_elements, st.out_dims, RuleId::PipeActivationSend,
                        st.next_rank);
            pipe_mask(b, OpKind::Send, st.out_mask, RuleId::PipeActivationSend, st.next_rank);
            break;
        case PipeInstr::RecvActivation:
            if (!std::exchange(st.meta_received, true)) pipe_tensor_meta(b, st, OpKind::Recv, st.in_dims, st.in_mask, st.prev_rank);
            pipe_tensor(b, st, OpKind::Recv, st.pipe_partitioned, st.in_elements, st.in_dims, RuleId::PipeActivationRecv,
                        st.prev_rank);
            pipe_mask(b, OpKind::Recv, st.in_mask, RuleId::PipeActivationRecv, st.prev_rank);
            break;
        case PipeInstr::SendGrad:   // the received input's gradient, back where it came from
            pipe_tensor(b, st, OpKind::Send, st.grad_partitioned, st.in_elements, st.in_dims, RuleId::PipeGradSend, st.prev_rank);
            break;
        case PipeInstr::RecvGrad:   // the gradient of this stage's output
            // _exec_recv_grads 1177-1186: a partitioned output whose gradient comes whole is gathered first.
            if (st.pipe_partitioned && !st.grad_partitioned) pipe_gather(b, st, st.out_elements);
            pipe_tensor(b, st, OpKind::Recv, st.grad_partitioned, st.out_elements, st.out_dims, RuleId::PipeGradRecv,
                        st.next_rank);
            break;
        default:
            break;
    }
}

// The stage's compute for one micro batch: its modules forward, or backward in autograd's order.
// Nothing is logged here: the last stage's backward goes through DeepSpeedEngine.backward, but the
// engine turned enable_backward_allreduce off (engine.py 78) and ZeRO-1 without overlap_comm
// installs no gradient hooks.
void stage_compute(Build& b, const PipeStage& st, bool forward, const std::vector<std::pair<int, std::vector<int>>>& plan) {
    b.phase = forward ? Phase::Forward : Phase::Backward;
    // _exec_forward_pass 709-721: a partitioned input is gathered before the stage runs.
    // _exec_backward_pass 816-838 (not the last stage, which returns at 803): the output, then its
    // gradient, each gathered when it came partitioned.
    if (forward && st.pipe_partitioned && st.stage > 0) pipe_gather(b, st, st.in_elements);
    if (!forward && st.grad_partitioned && st.stage < st.stages - 1) {
        if (st.pipe_partitioned) pipe_gather(b, st, st.out_elements);
        pipe_gather(b, st, st.out_elements);
    }
    if (forward) {
        for (int m : b.model.forward_order) {
            b.forward(m);
            b.hook(HookPoint::AfterForward, m);
        }
        return;
    }
    for (size_t i = 0; i < plan.size(); ++i) {
        const auto& step = plan[i];
        b.recompute_before(plan.size() - 1 - i);   // the plan is forward_order reversed
        b.hook(HookPoint::BeforeBackward, step.first);
        b.backward(step.first);
        b.hook(HookPoint::AfterBackward, step.first);
    }
}

// _aggregate_total_loss (574-640), after every batch: the last stage averages the loss over its
// data-parallel group (a scalar in the loss's dtype, the model's), then broadcasts [loss, averaged
// loss] as two fp32 over the pipe group; the other stages receive those two numbers.
void pipe_aggregate_loss(Build& b, const PipeStage& st) {
    b.phase = Phase::Step;
    b.micro = -1;
    const bool last = st.stage == st.stages - 1;
    const char* caller = "_aggregate_total_loss";
    if (last && b.opt.world > 1)
        b.group_op(OpKind::AllReduce, 1, b.cfg.model_dtype, caller, RuleId::PipeLossAllreduce, GroupKind::Dp);
    Op& bcast = b.group_op(OpKind::Broadcast, 2, DType::FP32, caller, RuleId::PipeLossBroadcast, GroupKind::Pipe);
    bcast.root = static_cast<int>(st.stages - 1);
}

// _exec_reduce_tied_grads (266-281): each tied module the stage holds all_reduces its weight's
// gradient over the ranks of the stages holding it (module.py _index_tied_modules 447-492; a
// module tied within one stage has a group of one and is still logged). A TiedLayerSpec's
// parameters are named tied_modules.<key>.* (module.py 237), so a layer of that name is tied; its
// tied attribute is the layer's tied_weight (TiedLayerSpec tied_weight_attr, "weight" by default). Keys go in the
// order the stage's layers first use them (DeepSpeed iterates a Python set, module.py 454).
// The group is put on the pipe group (the tie group is a subset of it: exact when every stage ties).
void reduce_tied_grads(Build& b, const ZeroOptimizer& zero) {
    std::vector<std::string> keys, weights;
    for (int64_t l : b.stage_layers) {
        const PipeLayer& layer = b.model.parallel.pipe_layers[static_cast<size_t>(l)];
        if (layer.name.rfind("tied_modules.", 0) == 0 && std::find(keys.begin(), keys.end(), layer.name) == keys.end()) {
            keys.push_back(layer.name);
            weights.push_back(layer.name + "." + layer.tied_weight);
        }
    }
    for (const auto& weight : weights)
        for (size_t p = 0; p < b.model.params.size(); ++p) {
            if (b.model.params[p].name != weight) continue;
            Op& op = b.group_op(OpKind::AllReduce, b.model.params[p].numel, zero.tied_grad_dtype(), "_exec_reduce_tied_grads",
                                RuleId::PipeTiedGradAllreduce, GroupKind::Pipe);
            op.params = {static_cast<int>(p)};
        }
}

// One train_batch: the stage's TrainSchedule, instruction by instruction (_exec_schedule 1420-1433).
void pipe_train_batch(Build& b, PipeStage& st, ZeroOptimizer& zero, const std::vector<std::pair<int, std::vector<int>>>& plan) {
    for (const auto& cmds : pipe_train_schedule(b.batch.grad_accum, st.stages, st.stage)) {
        for (const PipeCommand& c : cmds) {
            if (c.micro >= 0) b.micro = static_cast<int>(c.micro);
            switch (c.instr) {
                case PipeInstr::ForwardPass:
                case PipeInstr::BackwardPass:
                    stage_compute(b, st, c.instr == PipeInstr::ForwardPass, plan);
                    break;
                case PipeInstr::ReduceTiedGrads:
                    b.phase = Phase::Backward;
                    reduce_tied_grads(b, zero);
                    break;
                case PipeInstr::LoadMicroBatch:
                    break;
                case PipeInstr::ReduceGrads:   // _exec_reduce_grads (283-294) at the forced accumulation boundary
                    b.phase = Phase::Backward;
                    b.micro = b.batch.grad_accum - 1;
                    zero.reduce_gradients();
                    break;
                case PipeInstr::OptimizerStep:   // _exec_optimizer_step (1229-1267) -> _take_model_step
                    zero.step(b.step);
                    break;
                default:
                    b.phase = c.instr == PipeInstr::SendActivation || c.instr == PipeInstr::RecvActivation ? Phase::Forward
                                                                                                             : Phase::Backward;
                    pipe_exchange(b, st, c.instr);
            }
        }
    }
    pipe_aggregate_loss(b, st);
}

}  // namespace

void generate_pipeline(Build& b) {
    if (b.stage_layers.empty()) {   // rank_model refuses a stage without parameters first; a stage without layers has none
        b.failure = Error{b.model.source, "pipeline", "stage " + std::to_string(b.out.meta.pipe_stage) + " holds no layer"};
        return;
    }
    // fp16 without ZeRO: FP16_Optimizer / FP16_UnfusedOptimizer check overflow and norms over the grid's
    // model-parallel group (runtime/utils.py CheckOverflow.has_overflow 263, get_weight_norm 538,
    // get_flattened_grad_norm), which one depends on the optimizer class; not modelled, so refused.
    if (b.cfg.model_dtype == DType::FP16 && b.cfg.zero.stage == 0) {
        b.failure = Error{b.cfg.source, "fp16.enabled",
                          "fp16 without ZeRO under the pipeline engine is not modelled (its optimizer's model-parallel "
                          "overflow and norm checks); use ZeRO stage 1, bf16 or fp32"};
        return;
    }
    PipeStage st = pipe_stage(b);
    // PartitionedTensor.full's uneven branch (runtime/utils.py 680-685) broadcasts each part with its
    // index in the group as `src`, a global rank to torch.distributed: only the group of ranks 0 .. tp-1
    // runs it; refused rather than listed.
    for (int64_t n : {st.in_elements, st.out_elements})
        if (st.pipe_partitioned && n % st.tp != 0) {
            b.failure = Error{b.model.source, "pipeline",
                              "an activation of " + std::to_string(n) + " elements per micro batch does not divide over --tp " +
                                  std::to_string(st.tp) + ": DeepSpeed's PartitionedTensor.full broadcasts uneven parts with "
                                  "group ranks as global ranks (set pipeline.pipe_partitioned false)"};
            return;
        }
    // DeepSpeedEngine.__init__ first (_broadcast_model over the stage's data group, logged even for a
    // one-rank group; the optimizer, which logs nothing), then PipelineEngine.__init__'s own.
    engine_start_broadcasts(b);
    auto zero = stage01_optimizer(b);
    pipe_engine_start(b, st);
    const auto plan = b.backward_plan();
    for (int step = 0; step < b.opt.steps; ++step) {
        b.step = step;
        pipe_train_batch(b, st, *zero, plan);
        if (b.past_size_limit()) return;
    }
}

}  // namespace detail

}  // namespace zerosim
