// Activation checkpointing in the schedule: which module calls are checkpointed, and the forward
// that backward runs again for each (docs/zero-comm.md §10a).
//
// torch.utils.checkpoint.checkpoint (reentrant, torch's default before 2.4) and DeepSpeed's
// deepspeed.checkpointing.checkpoint (runtime/activation_checkpointing/checkpointing.py
// CheckpointFunction) both run the wrapped call's forward under no_grad, keep its inputs, and in
// backward (CheckpointFunction.backward:603, `with torch.enable_grad(): outputs =
// ctx.run_function(*detached_inputs)` at ~684) run that forward again before its backward. Every
// module hook fires again with it: ZeRO-3's pre-forward fetch and post-forward release (stage3.cpp),
// and the model's own layers' collectives (a tensor-parallel layer's forward all_reduce).
#include <algorithm>
#include <set>

#include "build.hpp"

namespace zerosim::detail {

namespace {

bool within(const std::string& name, const std::string& call) {
    return name == call || (name.size() > call.size() && name.compare(0, call.size(), call) == 0 && name[call.size()] == '.');
}

}  // namespace

}  // namespace zerosim::detail

namespace zerosim {

std::vector<std::string> checkpointed_calls(const Model& m, const DsConfig& cfg, const ScheduleOptions& opt) {
    // A parameter list's own "checkpointed" list is how its forward is written: it holds whatever the flags say.
    if (!m.checkpointed.empty()) return m.checkpointed;
    // The pipeline engine's PipelineModule checkpoints its layers in activation_checkpoint_interval
    // groups (pipe/module.py forward: exec_range_func through checkpoint, for layers _is_checkpointable
    // finds parameters in). Each layer is a call here: a group of several recomputes the same
    // forward, its layers' recompute each before its own backward rather than all before the first.
    if (opt.layout.pipelined() && cfg.pipeline.activation_checkpoint_interval > 0) {
        std::vector<std::string> layers;
        for (size_t i = 0; i < m.parallel.pipe_layers.size(); ++i)
            if (!detail::pipe_layer_params(m, i).empty()) layers.push_back(m.parallel.pipe_layers[i].name);
        return layers;
    }
    // Otherwise every transformer block, as Hugging Face's gradient_checkpointing (and the Trainer's
    // --gradient_checkpointing) wraps each decoder layer, and as Megatron-DeepSpeed / GPT-NeoX's
    // checkpoint-activations wrap each transformer layer through deepspeed.checkpointing.
    if (!opt.activation_checkpointing && !cfg.activation_checkpointing && !m.gradient_checkpointing) return {};
    std::vector<std::string> blocks;
    std::set<std::string> seen;
    for (const auto& p : m.params) {
        std::string block = transformer_block_of(p.name);
        if (!block.empty() && seen.insert(block).second) blocks.push_back(block);
    }
    return blocks;
}

}  // namespace zerosim

namespace zerosim::detail {

void set_checkpoint_regions(Build& b) {
    b.checkpointed = checkpointed_calls(b.model, b.cfg, b.opt);
    b.checkpoint_of_position.assign(b.model.forward_order.size(), -1);
    for (size_t pos = 0; pos < b.model.forward_order.size(); ++pos) {
        const std::string& name = b.model.modules[b.model.forward_order[pos]].name;
        size_t best = std::string::npos;
        for (size_t c = 0; c < b.checkpointed.size(); ++c)   // the outermost checkpointed call holding it
            if (within(name, b.checkpointed[c]) && (best == std::string::npos || b.checkpointed[c].size() < b.checkpointed[best].size()))
                best = c;
        if (best != std::string::npos) b.checkpoint_of_position[pos] = static_cast<int>(best);
    }
}

bool Build::checkpointed_call(int node) const {
    const std::string& name = model.calls[static_cast<size_t>(node)].name;
    return node > 0 && std::find(checkpointed.begin(), checkpointed.end(), name) != checkpointed.end();
}

Op& Build::recompute(int module) {
    Op& op = forward(module);
    op.phase = Phase::Backward;
    op.rule = RuleId::ComputeRecompute;
    op.payload = rule_info(op.rule).payload;
    return op;
}

void Build::recompute_before(size_t pos) {
    if (pos >= checkpoint_of_position.size() || checkpoint_of_position[pos] < 0) return;
    const int region = checkpoint_of_position[pos];
    // Backward reaches a checkpointed call at its last module: the whole call runs forward again first.
    if (pos + 1 < checkpoint_of_position.size() && checkpoint_of_position[pos + 1] == region) return;
    size_t first = pos;
    while (first > 0 && checkpoint_of_position[first - 1] == region) --first;
    for (size_t k = first; k <= pos; ++k) {
        const int module = model.forward_order[k];
        recompute(module);
        hook(HookPoint::AfterForward, module);
    }
}

}  // namespace zerosim::detail
