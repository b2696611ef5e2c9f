// One rank's schedule in a 3D layout (pipeline, tensor, Ulysses sequence and expert parallelism),
// as DeepSpeed v0.14.2 runs it (../shared/docs/zero-in-3d.md; docs/zero-comm.md "ZeRO inside 3D
// parallelism"): ZeRO's rules over the rank's data-parallel group on the parameters the rank holds,
// and the model's parallel layers' collectives at their modules.
#include <algorithm>
#include <regex>

#include "build.hpp"

namespace zerosim::detail {

namespace {

// The pipeline engine under tensor parallelism (engine.py 138-141): gradients partitioned while
// activations are not is a combination the engine mis-sizes (_exec_recv_grads allocates from the
// whole output, _exec_backward_pass rebuilds from grad_layer[0], _exec_send_grads sends two tensors):
// refused by key. (Checkpointing inside the stages is recompute.cpp's.)
Status check_pipe_partitions(const DsConfig& cfg, const ParallelLayout& L) {
    // deepspeed.checkpointing's partitioned activations: each checkpointed input cut over the model-parallel
    // group, gathered again in backward (checkpointing.py gather_partitioned_activations:265, an
    // all_gather_into_tensor of the input's width) -- not in the schedule yet.
    if (cfg.partition_activations && L.tensor > 1)
        return Error{cfg.source, "activation_checkpointing.partition_activations",
                     "true under --tp " + std::to_string(L.tensor) + " is not modelled yet (deepspeed.checkpointing "
                     "all_gathers each checkpointed input over the tensor group in backward); set it false to predict"};
    if (!L.pipelined() || L.tensor == 1) return std::nullopt;
    if (cfg.pipeline.grad_partitioned && !cfg.pipeline.pipe_partitioned)
        return Error{cfg.source, "pipeline.grad_partitioned",
                     "true with pipeline.pipe_partitioned false under --tp " + std::to_string(L.tensor) +
                         ": DeepSpeed's pipeline engine sends a partitioned gradient its previous stage does not expect; "
                         "set both or neither"};
    return std::nullopt;
}

// The layout's refusals, named by the flag that set each axis.
Status check_layout(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt) {
    const ParallelLayout& L = opt.layout;
    if (auto e = check_parallel_layout(L)) {
        static const std::pair<const char*, const char*> flags[] = {
            {"parallel_layout.pipe", "--pp"}, {"parallel_layout.tensor", "--tp"}, {"parallel_layout.sequence", "--sp"},
            {"parallel_layout.expert", "--ep"}, {"parallel_layout.world", "--world"}};
        Error out = *e;
        for (const auto& [field, flag] : flags)
            if (out.field == field) out.field = flag;
        return out;
    }
    if (opt.rank < 0 || opt.rank >= L.world)
        return Error{"", "--rank", "expected a rank from 0 to " + std::to_string(L.world - 1) + ", found " + std::to_string(opt.rank)};
    // runtime/pipe/engine.py PipelineEngine.__init__ (~77): assert self.zero_optimization_stage() < 2.
    if (L.pipelined() && cfg.zero.stage >= 2)
        return Error{cfg.source, "zero_optimization.stage",
                     "DeepSpeed's pipeline engine supports ZeRO stages 0 and 1 only (runtime/pipe/engine.py asserts stage < 2); "
                     "found " + std::to_string(cfg.zero.stage) + " with --pp " + std::to_string(L.pipe)};
    // Ulysses inside the pipeline engine's stages: DeepSpeed v0.14.2's grid (PipeModelDataParallelTopology)
    // has no sequence axis, so the pipeline engine and the sequence x data group ZeRO would use do not
    // meet in one run; refused rather than guessed.
    if (L.pipelined() && L.sequence > 1)
        return Error{"", "--sp", "a pipeline (--pp " + std::to_string(L.pipe) + ") with Ulysses sequence parallelism is not "
                                 "modelled: DeepSpeed v0.14.2's pipeline grid has no sequence axis"};
    if (auto e = check_pipe_partitions(cfg, L)) return e;
    // partition_balanced is DeepSpeed's O(layers^2 x stages) dynamic programme: bounded work.
    const auto layers = static_cast<double>(model.parallel.pipe_layers.size());
    if (L.pipelined() && opt.pp_partition != PipePartition::Uniform && layers * layers * static_cast<double>(L.pipe) > 2e9)
        return Error{model.source, "pipeline.layers",
                     std::to_string(model.parallel.pipe_layers.size()) + " layers over --pp " + std::to_string(L.pipe) +
                         " stages is past what partition_method \"parameters\" (an O(layers^2 x stages) search) can cut "
                         "here; --pp-partition uniform cuts any number"};
    if (L.pipelined() && opt.pp_partition == PipePartition::Type) {
        std::regex re;
        try {
            re = pipe_type_regex(opt.pp_partition_type);
        } catch (const std::regex_error& e) {
            return Error{"", "--pp-partition", "type:" + opt.pp_partition_type + " is not a regular expression (" + e.what() + ")"};
        }
        bool any = false;
        for (const auto& l : model.parallel.pipe_layers) any = any || pipe_layer_matches(l, re);
        // module.py _find_layer_type raises "Partitioning '...' found no valid layers to partition."
        if (!any && !model.parallel.pipe_layers.empty())
            return Error{model.source, "pipeline.layers", "partition_method type:" + opt.pp_partition_type +
                                                              " matches no layer's type (DeepSpeed raises: found no valid layers to partition)"};
    }
    if (L.pipelined() && model.parallel.pipe_layers.empty())
        return Error{model.source, "pipeline", "--pp " + std::to_string(L.pipe) +
                                                   " needs the layers PipelineModule cuts: a parameter list with a \"pipeline\" "
                                                   "section (docs/zero-comm.md)"};
    if (L.expert > 1 && model.parallel.moe.empty())
        return Error{model.source, "moe", "--ep " + std::to_string(L.expert) + " needs MoE layers: a parameter list with a \"moe\" section"};
    for (const auto& l : model.parallel.moe)
        if (l.num_experts % L.expert != 0)   // moe/layer.py MoE.__init__: num_experts % ep_size == 0
            return Error{model.source, "moe." + l.module + ".num_local_experts",
                         std::to_string(l.num_experts) + " experts do not divide over --ep " + std::to_string(L.expert)};
    if (L.sequence > 1 && model.parallel.attention.empty())
        return Error{model.source, "attention",
                     "--sp " + std::to_string(L.sequence) + " needs the attentions Ulysses wraps: an \"attention\" section"};
    for (const auto& a : model.parallel.attention)
        if (a.heads % L.sequence != 0)   // sequence/layer.py _SeqAllToAll scatters heads over the sequence group
            return Error{model.source, "attention." + a.module + ".heads",
                         std::to_string(a.heads) + " heads do not divide over --sp " + std::to_string(L.sequence)};
    // Megatron splits attention heads (and grouped-query attention's key/value heads) over tp.
    if (L.tensor > 1 && model.attention_heads > 0 && (model.attention_heads % L.tensor != 0 || model.kv_heads % L.tensor != 0))
        return Error{model.source, model.attention_heads % L.tensor != 0 ? "num_attention_heads" : "num_key_value_heads",
                     std::to_string(model.attention_heads % L.tensor != 0 ? model.attention_heads : model.kv_heads) +
                         " heads do not divide over --tp " + std::to_string(L.tensor)};
    for (const auto& a : model.parallel.attention)
        if (a.kv_heads > 0 && a.kv_heads % L.sequence != 0)   // each rank takes whole key/value heads
            return Error{model.source, "num_key_value_heads",
                         std::to_string(a.kv_heads) + " key/value heads do not divide over --sp " + std::to_string(L.sequence)};
    bool any_tp = false;
    for (const auto& p : model.params) any_tp = any_tp || p.tp != TpSplit::None;
    if (L.tensor > 1 && !any_tp)
        return Error{model.source, "parameters", "--tp " + std::to_string(L.tensor) +
                                                     " needs tensor-parallel parameters (\"tp\": \"column\" or \"row\")"};
    return std::nullopt;
}

// Whether module `module` is the first of a run of column-parallel modules that read the same
// input (q, k and v; gate and up): Megatron fuses them, so one copy_to_tensor_model_parallel_region
// all_reduces their input's gradient once.
bool first_reader_of_input(const Model& m, int module, int64_t in_features) {
    const auto& order = m.forward_order;
    auto at = std::find(order.begin(), order.end(), module);
    if (at == order.begin() || at == order.end()) return true;
    for (int p : m.modules[static_cast<size_t>(*(at - 1))].params) {
        const auto& par = m.params[static_cast<size_t>(p)];
        if (par.tp == TpSplit::Column && par.shape.size() == 2 && par.shape[static_cast<size_t>(1 - par.tp_dim)] == in_features)
            return false;
    }
    return true;
}

// Megatron's tensor-parallel layers (megatron/core/tensor_parallel/layers.py, mappings.py): a
// row-parallel linear all_reduces its output in forward (reduce_from_tensor_model_parallel_region),
// a column-parallel one its input's gradient in backward (copy_to_tensor_model_parallel_region), a
// vocabulary-parallel embedding its output in forward; each micro_batch x tokens x features in
// the model's dtype. Features are the dimension the split leaves whole.
void tensor_hook(Build& b, HookPoint at, int module, int64_t tokens) {
    if (module < 0 || !b.mesh || b.mesh->layout().tensor == 1) return;
    const auto& mod = b.model.modules[static_cast<size_t>(module)];
    for (int p : mod.params) {
        const auto& par = b.model.params[static_cast<size_t>(p)];
        if (par.shape.size() < 2 || par.tp == TpSplit::None) continue;
        const int64_t features = par.shape[static_cast<size_t>(1 - par.tp_dim)];
        const bool embedding = mod.kind == ModuleKind::Embedding;
        if ((par.tp == TpSplit::Row || embedding) && par.tp_reduces_output && at == HookPoint::AfterForward)
            b.group_op(OpKind::AllReduce, tokens * features, b.cfg.model_dtype, "forward", RuleId::TpForwardAllreduce, GroupKind::Tensor)
                .logged = b.model.tp_collectives_logged;
        if (par.tp == TpSplit::Column && !embedding && at == HookPoint::AfterBackward && first_reader_of_input(b.model, module, features))
            b.group_op(OpKind::AllReduce, tokens * features, b.cfg.model_dtype, "backward", RuleId::TpBackwardAllreduce,
                       GroupKind::Tensor)
                .logged = b.model.tp_collectives_logged;
        break;   // one collective per module (its weight decides)
    }
}

// Ulysses (sequence/layer.py DistributedAttention.forward ~99-106): q, k and v go through
// single_all_to_all before the local attention and its output after it, 4 in forward and their 4
// backwards, each the local micro_batch x (seq / sp) x heads x head_size tensor. Stage 3 fires on the
// attention's own call (after its fetch, which may prefetch); stages 0-2 after its projection's
// forward and before its backward.
void ulysses_hook(Build& b, HookPoint at, int module, int node, int64_t tokens) {
    if (!b.mesh || b.mesh->layout().sequence == 1) return;
    for (const auto& a : b.model.parallel.attention) {
        bool here = false;
        if (b.cfg.zero.stage == 3)
            here = module < 0 && node >= 0 && b.model.calls[static_cast<size_t>(node)].name == a.name &&
                   (at == HookPoint::AfterForward || at == HookPoint::AfterBackward);
        else
            here = module >= 0 && b.model.modules[static_cast<size_t>(module)].name == a.module &&
                   (at == HookPoint::AfterForward || at == HookPoint::BeforeBackward);
        if (!here) continue;
        // q, k, v, then the output in forward; in backward the output's first, then v, k, q (autograd
        // runs the later-created of ready nodes first): sizes q, kv, kv, q either way. Grouped-query
        // attention's k and v are smaller; tensor parallelism leaves each rank heads / tp.
        const int64_t tp = b.mesh ? b.mesh->layout().tensor : 1;
        const int64_t q = tokens * a.heads / tp * a.head_size, kv = tokens * (a.kv_heads > 0 ? a.kv_heads : a.heads) / tp * a.head_size;
        for (int64_t n : {q, kv, kv, q})
            b.group_op(OpKind::AllToAll, n, b.cfg.model_dtype, "single_all_to_all", RuleId::UlyssesAllToAll, GroupKind::Sequence);
    }
}

void add_group(Schedule& s, const Mesh& mesh, MeshGroup kind) {
    if (mesh.size(kind) > 0) s.meta.groups.push_back(mesh_process_group(mesh, kind));
}

}  // namespace

}  // namespace zerosim::detail

namespace zerosim::detail {

// A Hugging Face model under a pipeline: the layer list a PipelineModule would cut (inputs/model.hpp),
// at the sequence length the schedule uses (schedule.cpp start_schedule).
const Model& pipeline_model(const Model& model, const ScheduleOptions& opt, Model& derived) {
    if (!opt.layout.pipelined() || !model.parallel.pipe_layers.empty()) return model;
    derived = model;
    derive_hf_pipeline_layers(derived, opt.seq_len > 0 ? opt.seq_len : model.default_seq_len > 0 ? model.default_seq_len : 1024);
    return derived;
}

}  // namespace zerosim::detail

namespace zerosim {

Result<Model> rank_local_model(const Model& whole, const DsConfig& cfg, const ScheduleOptions& given) {
    Model derived;
    const Model& model = detail::pipeline_model(whole, given, derived);
    ScheduleOptions opt = given;
    opt.layout.world = given.world;
    if (auto e = detail::check_layout(model, cfg, opt)) return *e;
    auto mesh = Mesh::build(opt.layout);
    if (!mesh) return mesh.error();
    auto local = detail::rank_model(model, mesh.value(), opt.rank, opt.pp_partition, opt.pp_partition_type);
    if (!local) return local.error();
    if (!local->model.parallel.moe.empty()) detail::split_moe_param_groups(local->model);
    return std::move(local->model);
}

}  // namespace zerosim

namespace zerosim::detail {

Result<Schedule> build_rank_schedule(const Model& whole, const DsConfig& cfg, const ScheduleOptions& given) {
    Model derived;
    const Model& model = pipeline_model(whole, given, derived);
    ScheduleOptions opt = given;
    opt.layout.world = given.world;
    if (auto e = check_layout(model, cfg, opt)) return *e;
    auto mesh = Mesh::build(opt.layout);
    if (!mesh) return mesh.error();
    auto local = rank_model(model, mesh.value(), opt.rank, opt.pp_partition, opt.pp_partition_type);
    if (!local) return local.error();
    if (!local->model.parallel.moe.empty()) split_moe_param_groups(local->model);   // moe.cpp
    const ParallelLayout& L = opt.layout;
    // The batch is over the data-parallel ranks (engine.py train_batch_size = micro x accumulation x
    // dp_world_size); ZeRO shards over the sequence x data group under Ulysses (engine.py ~1147).
    auto batch = resolve_batch(cfg, L.data());
    if (!batch) return batch.error();
    ScheduleOptions zopt = opt;
    zopt.world = L.sequence > 1 ? L.sequence_data() : L.data();
    if (auto e = check_schedule_size(local->model, cfg, zopt, batch->grad_accum)) return *e;
    Build b{local->model, cfg, zopt, batch.value(), 0, {}, -1, -1, Phase::Init, std::nullopt, nullptr, 0, 0, {}};
    b.mesh = &mesh.value();
    b.rank = opt.rank;
    if (L.sequence > 1) b.param_world = L.data();
    if (L.sequence > 1 && b.seq_len % L.sequence != 0)   // each rank holds an equal slice of every sequence
        return Error{"", "--seq-len", "the sequence length (" + std::to_string(b.seq_len) + ") must divide over --sp " +
                                          std::to_string(L.sequence)};
    if (auto e = start_schedule(b)) return *e;
    auto& meta = b.out.meta;
    meta.layout = L;
    meta.rank = opt.rank;
    meta.pipe_stage = local->stage;
    meta.pipe_partition = opt.pp_partition;
    meta.pipe_partition_type = opt.pp_partition_type;
    b.stage_layers = local->stage_layers;   // the pipeline engine's stage (pipeline.cpp)
    meta.param_shards = b.param_world;
    for (MeshGroup kind : {MeshGroup::Pipe, MeshGroup::Tensor, MeshGroup::ModelParallel, MeshGroup::Sequence, MeshGroup::Expert,
                           MeshGroup::ExpertData})
        add_group(b.out, mesh.value(), kind);
    // Each rank holds seq / sp tokens of every sequence under Ulysses.
    const int64_t tokens = b.batch.micro_batch * (b.seq_len / L.sequence);
    b.layer_hook = [tokens](Build& bb, HookPoint at, int module, int node) {
        tensor_hook(bb, at, module, tokens);
        ulysses_hook(bb, at, module, node, tokens);
    };
    if (L.expert > 1 || !local->model.parallel.moe.empty()) install_moe_hooks(b);
    return finish_schedule(b);
}

}  // namespace zerosim::detail
