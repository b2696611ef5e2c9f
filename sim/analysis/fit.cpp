#include "analysis/fit.hpp"

#include <cmath>
#include <cstdio>
#include <set>

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

FitEstimate estimate_fit(int64_t model_states, const ActivationEstimate& a, double gpu_memory_gb) {
    FitEstimate f;
    f.model_states = model_states;
    f.activations = a.total();
    f.gpu_bytes = gpu_memory_gb > 0 ? static_cast<int64_t>(std::llround(gpu_memory_gb * 1e9)) : 0;
    return f;
}

std::string fit_sentence(const FitEstimate& f) {
    const std::string parts = "(model states " + gib(f.model_states) + " + activations " + gib(f.activations) +
                              " + framework reserve " + gib(f.reserve) + ")";
    if (!f.known()) return "memory per rank " + gib(f.total()) + " GiB " + parts + ": fit unknown, no GPU memory given (a --topology with gpu.memory_gb)";
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.0f", static_cast<double>(f.gpu_bytes) / 1e9);
    return "memory per rank " + gib(f.total()) + " GiB " + parts + " of the GPU's " + gib(f.gpu_bytes) + " GiB (" + gb +
           " GB): " + (f.fits() ? "fits" : "does not fit");
}

}  // namespace zerosim
