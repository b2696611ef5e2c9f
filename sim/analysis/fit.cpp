#include "analysis/fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "schedule/pipe_schedule.hpp"

namespace zerosim {

namespace {

std::string gib(int64_t bytes) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
    return b;
}

// The layers as the model's own block stores them (Model::activations: a Hugging Face family's
// gated MLP, grouped-query or latent attention, experts), per token in 16-bit bytes, in place of
// the paper's 34 h; the rest as estimate_activations has it.
ActivationEstimate family_block_activations(const Model& m, ActivationEstimate a, long double sbh, long double scale) {
    const long double sb = static_cast<long double>(a.seq_len) * a.micro_batch;
    a.per_layer_bytes = std::llround(sb * m.activations.largest * scale);
    a.layers_bytes = a.checkpointing ? std::llround(2 * sbh * a.layers * scale) + a.per_layer_bytes
                                     : std::llround(sb * m.activations.total * scale);
    char line[768];
    std::snprintf(line, sizeof line,
                  "%s + 4 s b h (1 + v/h), A = the model's block per token and layer (%s; %lld bytes in all layers, "
                  "at most %lld in one): L=%lld layers, s=%lld, b=%lld, h=%lld, v=%lld, %lld-byte activations, "
                  "FlashAttention (no s x s scores; Korthikanti et al. 2022 sec. 4.1's accounting, 4.3%s)",
                  a.checkpointing ? "(2 s b h L + s b A_largest)" : "s b A summed over the layers",
                  m.activations.formula.c_str(), static_cast<long long>(m.activations.total),
                  static_cast<long long>(m.activations.largest), static_cast<long long>(a.layers),
                  static_cast<long long>(a.seq_len), static_cast<long long>(a.micro_batch), static_cast<long long>(a.hidden),
                  static_cast<long long>(a.vocab), static_cast<long long>(a.element_bytes),
                  a.checkpointing ? ", 5: full activation checkpointing" : "");
    a.formula = line;
    return a;
}

}  // namespace

ActivationEstimate estimate_activations(const Model& m, int64_t seq_len, int64_t micro_batch, DType dtype, bool flag) {
    // The flag (DeepSpeed's activation_checkpointing section, --activation-checkpointing) or the
    // model's own config.json ("gradient_checkpointing": true, as transformers' configs said it).
    const bool checkpointing = flag || m.gradient_checkpointing;
    ActivationEstimate a;
    a.seq_len = seq_len;
    a.micro_batch = micro_batch;
    a.checkpointing = checkpointing;
    a.element_bytes = dtype == DType::FP32 ? 4 : 2;
    std::set<std::string> layers;
    for (const auto& p : m.params) {
        std::string prefix = transformer_block_of(p.name);
        if (!prefix.empty()) layers.insert(prefix);
    }
    a.layers = static_cast<int64_t>(layers.size());
    // The token embedding: the embedding matrix with the most rows (position embeddings have fewer).
    for (const auto& mod : m.modules) {
        if (mod.kind != ModuleKind::Embedding) continue;
        for (int p : mod.params) {
            const auto& sh = m.params[p].shape;
            if (sh.size() == 2 && sh[0] > a.vocab) {
                a.vocab = sh[0];
                a.hidden = sh[1];
            }
        }
    }
    // In units of the paper's bytes (16-bit), then scaled: sbh and sbv stay far below 2^63 for any
    // model kMaxModelElements admits and sequences up to 2^31 (computed in long double to be sure).
    const long double sbh = static_cast<long double>(seq_len) * micro_batch * a.hidden;
    const long double sbv = static_cast<long double>(seq_len) * micro_batch * a.vocab;
    const long double scale = a.element_bytes / 2.0L;
    a.outside_bytes = std::llround(4 * sbh * scale + 4 * sbv);   // the cross entropy's logits are fp32 either way
    if (m.activations.total > 0) return family_block_activations(m, a, sbh, scale);
    a.per_layer_bytes = std::llround(34 * sbh * scale);
    a.layers_bytes = checkpointing ? std::llround((2 * sbh * a.layers + 34 * sbh) * scale) : a.per_layer_bytes * a.layers;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s L=%lld layers, s=%lld, b=%lld, h=%lld, v=%lld, %lld-byte activations, FlashAttention "
                  "(no s x s scores; Korthikanti et al. 2022 sec. 4.1, 4.3%s)",
                  checkpointing ? "(2 s b h L + 34 s b h) + 4 s b h (1 + v/h):" : "34 s b h L + 4 s b h (1 + v/h):",
                  static_cast<long long>(a.layers), static_cast<long long>(seq_len), static_cast<long long>(micro_batch),
                  static_cast<long long>(a.hidden), static_cast<long long>(a.vocab), static_cast<long long>(a.element_bytes),
                  checkpointing ? ", 5: full activation checkpointing" : "");
    a.formula = line;
    return a;
}

int64_t transformer_layers(const Model& m) {
    std::map<std::string, int> linears;
    std::set<std::string> embeddings;
    for (const auto& mod : m.modules) {
        std::set<std::string> blocks;
        for (int p : mod.params) blocks.insert(transformer_block_of(m.params[static_cast<size_t>(p)].name));
        for (const auto& b : blocks) {
            if (b.empty()) continue;
            if (mod.kind == ModuleKind::Embedding) embeddings.insert(b);
            if (mod.kind == ModuleKind::Linear) ++linears[b];
        }
    }
    int64_t n = 0;
    for (const auto& [block, count] : linears) n += count >= 2 && !embeddings.count(block) ? 1 : 0;
    return n;
}

int64_t micro_batches_in_flight(int64_t micro_batches, int64_t stages, int64_t stage, bool pipelined) {
    if (!pipelined || micro_batches < 1) return 1;
    // Forwards run minus backwards run, at its largest over TrainSchedule's steps (schedule.py 197-245).
    int64_t held = 0, peak = 0;
    for (const auto& step : pipe_train_schedule(micro_batches, stages, stage))
        for (const auto& c : step) {
            if (c.instr == PipeInstr::ForwardPass) peak = std::max(peak, ++held);
            if (c.instr == PipeInstr::BackwardPass) --held;
        }
    return std::max<int64_t>(peak, 1);
}

namespace {

// h and v as estimate_activations reads them (the widest token embedding), and whether the head
// (the last matrix with v rows: the output layer, or the tied embedding) is vocabulary parallel.
void stage_vocab(const Model& whole, StageActivations& a) {
    const ActivationEstimate e = estimate_activations(whole, 1, 1, DType::FP16, false);
    a.hidden = e.hidden;
    a.vocab = e.vocab;
    for (const auto& p : whole.params)
        if (p.shape.size() == 2 && p.shape[static_cast<size_t>(p.tp_dim)] == a.vocab && a.vocab > 0)
            a.vocab_parallel = p.tp == TpSplit::Column && a.tensor > 1;
}

// What one layer stores for one micro batch, in 16-bit units per token: the paper's block, or the
// model's own (its largest layer; outside_tp whole, the rest / t).
long double layer_units_per_token(const Model& whole, const StageActivations& a) {
    const long double t = static_cast<long double>(a.tensor);
    if (whole.activations.total > 0) {
        const auto& A = whole.activations;
        return static_cast<long double>(A.largest_outside_tp) + static_cast<long double>(A.largest - A.largest_outside_tp) / t;
    }
    return static_cast<long double>(a.hidden) * (10 + 24 / t);
}

// All layers of the stage, one micro batch, 16-bit units per token (checkpointing aside).
long double stage_layers_units_per_token(const Model& whole, const StageActivations& a, int64_t whole_layers) {
    const long double t = static_cast<long double>(a.tensor);
    if (whole.activations.total > 0 && whole_layers > 0) {
        const auto& A = whole.activations;
        const long double all = static_cast<long double>(A.outside_tp) + static_cast<long double>(A.total - A.outside_tp) / t;
        return all * static_cast<long double>(a.layers) / static_cast<long double>(whole_layers);
    }
    return static_cast<long double>(a.hidden) * (10 + 24 / t) * static_cast<long double>(a.layers);
}

std::string stage_formula(const Model& whole, const StageActivations& a) {
    if (a.hidden == 0)
        return "not counted: the model has no token embedding (Korthikanti et al.'s accounting needs transformer layers "
               "of width h and a vocabulary v): 0 bytes";
    char line[900];
    const std::string block =
        whole.activations.total > 0 ? "A = the model's block per token (" + whole.activations.formula + "), its norms' and projections' inputs whole, the rest / t"
                                    : "A = h (10 + 24/t) per token (Korthikanti et al. 2022 sec. 4.2, no s x s scores: FlashAttention)";
    std::snprintf(line, sizeof line,
                  "%s x %lld micro batch(es) in flight%s%s%s; %s; L=%lld layers, s/sp=%lld, b=%lld, h=%lld, v=%lld, t=%lld, "
                  "%lld-byte activations",
                  a.checkpointing ? "2 s b h L" : "s b A L", static_cast<long long>(a.in_flight),
                  a.checkpointing ? " + s b A once (one layer recomputed)" : "",
                  a.embedding_mask ? " + s b h embedding dropout mask per micro batch in flight" : "",
                  a.last ? (a.vocab_parallel ? " + 4 s b h + 4 s b v / t (final norm, head, fp32 logits)" : " + 4 s b h + 4 s b v (final norm, head, fp32 logits)") : "",
                  block.c_str(), static_cast<long long>(a.layers), static_cast<long long>(a.tokens),
                  static_cast<long long>(a.micro_batch), static_cast<long long>(a.hidden), static_cast<long long>(a.vocab),
                  static_cast<long long>(a.tensor), static_cast<long long>(a.element_bytes));
    return std::string(line) + (a.checkpointing ? " (full activation checkpointing, Table 2)" : "");
}

}  // namespace

StageActivations estimate_stage_activations(const Model& whole, const Model& local, const ParallelLayout& layout,
                                            int64_t stage, int64_t seq_len, int64_t micro_batch, int64_t micro_batches,
                                            DType dtype, bool checkpointing) {
    StageActivations a;
    a.stage = stage;
    a.stages = std::max<int64_t>(layout.pipe, 1);
    a.layers = transformer_layers(local);
    a.micro_batches = micro_batches;
    a.in_flight = micro_batches_in_flight(micro_batches, a.stages, stage, layout.pipelined());
    a.tensor = std::max<int64_t>(layout.tensor, 1);
    a.sequence = std::max<int64_t>(layout.sequence, 1);
    a.tokens = seq_len / a.sequence;   // Ulysses needs sp to divide s (DistributedAttention's all_to_all)
    a.micro_batch = micro_batch;
    a.element_bytes = dtype == DType::FP32 ? 4 : 2;
    a.checkpointing = checkpointing || whole.gradient_checkpointing;
    a.first = stage == 0;
    a.last = stage == a.stages - 1;
    stage_vocab(whole, a);
    const long double sb = static_cast<long double>(a.tokens) * static_cast<long double>(micro_batch);
    const long double scale = a.element_bytes / 2.0L, n = static_cast<long double>(a.in_flight);
    const long double sbh = sb * static_cast<long double>(a.hidden);
    a.per_layer_bytes = std::llround(sb * layer_units_per_token(whole, a) * scale);
    if (a.checkpointing) {
        a.kept_per_layer_bytes = std::llround(2 * sbh * scale);
        a.layers_bytes = a.layers == 0 ? 0 : std::llround(2 * sbh * scale * static_cast<long double>(a.layers) * n) + a.per_layer_bytes;
    } else {
        a.kept_per_layer_bytes = a.per_layer_bytes;
        a.layers_bytes = std::llround(sb * stage_layers_units_per_token(whole, a, transformer_layers(whole)) * scale * n);
    }
    long double outside = 0;
    // The embedding's dropout mask, one byte per element whatever the activations' dtype; the
    // families with their own block (Model::activations) train without dropout.
    a.embedding_mask = a.first && whole.activations.total == 0;
    if (a.embedding_mask) outside += sbh * n;
    if (a.last)
        outside += 4 * sbh * scale + 4 * sb * static_cast<long double>(a.vocab) / (a.vocab_parallel ? static_cast<long double>(a.tensor) : 1.0L);
    a.outside_bytes = std::llround(outside);
    a.formula = stage_formula(whole, a);
    return a;
}

FitEstimate estimate_fit(int64_t model_states, const StageActivations& a, double gpu_memory_gb) {
    FitEstimate f;
    f.model_states = model_states;
    f.activations = a.total();
    f.gpu_bytes = gpu_memory_gb > 0 ? static_cast<int64_t>(std::llround(gpu_memory_gb * 1e9)) : 0;
    return f;
}

FitEstimate estimate_fit(int64_t model_states, const ActivationEstimate& a, double gpu_memory_gb) {
    FitEstimate f;
    f.model_states = model_states;
    f.activations = a.total();
    f.gpu_bytes = gpu_memory_gb > 0 ? static_cast<int64_t>(std::llround(gpu_memory_gb * 1e9)) : 0;
    return f;
}

// The host's share of the fit line, where states are offloaded: the node's RAM against its ranks'.
std::string host_fit_clause(const FitEstimate& f) {
    if (f.host_per_node <= 0) return "";
    std::string s = "; host memory per node " + gib(f.host_per_node) + " GiB (offloaded states)";
    if (f.host_bytes <= 0) return s + ": fit unknown, no host.memory_gb in the topology";
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.0f", static_cast<double>(f.host_bytes) / 1e9);
    return s + " of the node's " + gib(f.host_bytes) + " GiB (" + gb + " GB): " + (f.host_fits() ? "fits" : "does not fit");
}

std::string fit_sentence(const FitEstimate& f) {
    const std::string parts = "(model states " + gib(f.model_states) + " + activations " + gib(f.activations) +
                              " + framework reserve " + gib(f.reserve) + ")";
    if (!f.known())
        return "memory per rank " + gib(f.total()) + " GiB " + parts +
               ": fit unknown, no GPU memory given (a --topology with gpu.memory_gb)" + host_fit_clause(f);
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.0f", static_cast<double>(f.gpu_bytes) / 1e9);
    return "memory per rank " + gib(f.total()) + " GiB " + parts + " of the GPU's " + gib(f.gpu_bytes) + " GiB (" + gb +
           " GB): " + (f.fits() ? "fits" : "does not fit") + host_fit_clause(f);
}

}  // namespace zerosim
