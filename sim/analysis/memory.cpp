#include "analysis/memory.hpp"
#include "variant_memory.hpp"

#include <algorithm>
#include <cmath>

#include "schedule/partition.hpp"

namespace zerosim {

int64_t MemoryEstimate::total() const {
    int64_t t = 0;
    for (const auto& i : items)
        if (i.category != "host") t += i.bytes;   // offloaded states live in host memory
    return t;
}

int64_t MemoryEstimate::category(const std::string& c) const {
    int64_t t = 0;
    for (const auto& i : items)
        if (i.category == c) t += i.bytes;
    return t;
}

int64_t zero_paper_bytes(int stage, double psi, double n) {
    const double K = 12;
    switch (stage) {
        case 0: return static_cast<int64_t>(std::llround((2 + 2 + K) * psi));
        case 1: return static_cast<int64_t>(std::llround(2 * psi + 2 * psi + K * psi / n));
        case 2: return static_cast<int64_t>(std::llround(2 * psi + (2 + K) * psi / n));
        default: return static_cast<int64_t>(std::llround((2 + 2 + K) * psi / n));
    }
}

namespace {

// What a rank's model states are counted from: the model's size, the training dtype's bytes, and
// this rank's share under each partitioning.
struct RankStateSizes {
    int64_t N = 1, b = 0, psi = 0;
    bool mixed = false;
    int64_t part = 0, padded = 0;   // stage-1/2 partitions: the largest rank's share, and the padded total
    int64_t part3 = 0;              // stage-3 shards
    bool bf16_optimizer = false;
    int64_t bucket_bytes = 0;
};

RankStateSizes rank_state_sizes(const Model& m, const DsConfig& cfg, const Schedule& s) {
    const auto& z = cfg.zero;
    RankStateSizes r;
    r.N = s.meta.world;
    r.b = dtype_size(cfg.model_dtype);
    r.psi = m.total_numel();
    r.mixed = cfg.model_dtype != DType::FP32;
    // Stage-1/2 style partitions (largest rank's share, padding included).
    for (int g = 0; g < m.num_groups; ++g) {
        auto L = flat_group_layout(m, g, r.N, z.round_robin_gradients);
        r.part += L.partition_size;
        r.padded += L.padded_numel;
    }
    for (const auto& p : m.params) r.part3 += stage3_partition_numel(p.numel, s.meta.shard_count());  // MiCS: / s
    // Stage 0's optimizer as the schedule chose it (from v0.17.6, #7515, bf16 without ZeRO runs the
    // BF16 optimizer only with grad_accum_dtype fp32; schedule/release_rules.hpp).
    r.bf16_optimizer = cfg.model_dtype == DType::BF16 &&
                       ((z.stage == 0 && s.meta.partition.kind == PartitionKind::FlatGroups) ||
                        (z.stage == 1 && cfg.grad_accum_dtype == DType::FP32));
    r.bucket_bytes = z.reduce_bucket_size * r.b;
    return r;
}

// The model states' items as the stage keeps them (and the optimizer DeepSpeed runs for it).
void add_model_state_items(MemoryEstimate& e, const Model& m, const DsConfig& cfg, const Schedule& s, const RankStateSizes& r) {
    const auto& z = cfg.zero;
    const int64_t b = r.b, psi = r.psi, part = r.part, padded = r.padded, part3 = r.part3, bucket_bytes = r.bucket_bytes;
    const bool mixed = r.mixed, bf16_optimizer = r.bf16_optimizer;
    auto add = [&](std::string name, std::string cat, int64_t bytes, std::string why) {
        e.items.push_back({std::move(name), std::move(cat), bytes, std::move(why)});
    };
    if (z.stage == 0 && !bf16_optimizer) {
        add("parameters", "parameters", psi * b, "every rank holds the whole model in the training dtype");
        add("gradients", "gradients", psi * b, "every rank holds every gradient");
        if (mixed) add("fp32 master weights", "optimizer", psi * 4, "the fp16 optimizer keeps an fp32 copy to update");
        add("Adam moments (m, v)", "optimizer", psi * 8, "two fp32 moments per parameter, unpartitioned");
    } else if (bf16_optimizer) {
        add("parameters", "parameters", psi * b, "bf16 working copy of the whole model");
        add("gradients (bf16)", "gradients", psi * b, "bf16 gradients from backward");
        add("fp32 gradient accumulation buffers", "gradients", padded * 4,
            "the BF16 optimizer accumulates gradients in fp32 flat buffers padded to 2N per group");
        add("fp32 master partition, Adam m and v", "optimizer", part * 12,
            "this rank's partition (padded group / N) of fp32 weights and both moments");
    } else if (z.stage == 1 || z.stage == 2) {
        add("parameters", "parameters", psi * b, "stages 1 and 2 keep the whole model on every rank");
        if (z.stage == 1)
            add("gradients", "gradients", psi * b, "stage 1 keeps full gradients until the boundary reduction");
        else
            add("gradient partition", "gradients", part * b, "stage 2 keeps only this rank's reduced gradients");
        add("fp32 gradient partition for the step", "gradients", part * 4,
            "the owned reduced gradients are copied to fp32 for the optimizer");
        add("fp32 master partition, Adam m and v", "optimizer", part * 12,
            "DeepSpeedZeroOptimizer copies this rank's partition to fp32 (also in fp32 training) and keeps two moments");
        if (z.contiguous_gradients)
            add(z.overlap_comm ? "gradient buckets (2 x reduce_bucket_size)" : "gradient bucket (reduce_bucket_size)", "buckets",
                bucket_bytes * (z.overlap_comm ? 2 : 1),
                "contiguous_gradients copies gradients into an IPG buffer; overlap_comm double-buffers it");
    } else {
        add("parameter partitions", "parameters", part3 * b, "each parameter split into ceil(numel / N) per rank");
        int64_t gathered = s.meta.stage3_peak_gathered_elements;
        add("gathered parameters (peak)", "parameters", gathered * b,
            "whole parameters alive at once: fetched and prefetched modules, kept for reuse, persistent ones");
        add("gradient partitions", "gradients", part3 * b, "reduce-scatter leaves this rank's share of each gradient");
        add("fp32 gradient partition for the step", "gradients", part3 * 4, "copied to fp32 for the optimizer");
        add("fp32 master partition, Adam m and v", "optimizer", part3 * 12, "this rank's shards in fp32 with two moments");
        add("gradient bucket (reduce_bucket_size)", "buckets", bucket_bytes, "the IPG bucket gradients are copied into");
        add_variant_memory(e, m, cfg, s);  // ZeRO++ / MiCS
    }

}

// The ZeRO paper's count of the model states, and DeepSpeed's own estimator where it has one.
void add_reference_estimates(MemoryEstimate& e, const Model& m, int stage, const RankStateSizes& r) {
    const int64_t psi = r.psi, N = r.N;
    e.paper_bytes = zero_paper_bytes(stage, static_cast<double>(psi), static_cast<double>(N));
    static const char* formulas[] = {"(2 + 2 + K) Ψ", "2Ψ + 2Ψ + KΨ/N", "2Ψ + (2 + K)Ψ/N", "(2 + 2 + K)Ψ/N"};
    e.paper_formula = std::string(formulas[std::clamp(stage, 0, 3)]) + ", K = 12";
    int64_t largest = 0;
    for (const auto& mod : m.modules) {
        int64_t n = 0;
        for (int p : mod.params) n += m.params[p].numel;
        largest = std::max(largest, n);
    }
    if (stage == 2 || stage == 1) {
        e.deepspeed_estimator_bytes = 4 * psi + 16 * psi / N;
        e.deepspeed_estimator_formula = "estimate_zero2_model_states_mem_needs: 4Ψ + 16Ψ/N";
    } else if (stage == 3) {
        e.deepspeed_estimator_bytes = 4 * largest + 18 * psi / N;
        e.deepspeed_estimator_formula = "estimate_zero3_model_states_mem_needs: 4 x largest layer + 18Ψ/N";
    }
}

// Where zerosim's count departs from the paper's, and why.
void add_memory_differences(MemoryEstimate& e, const DsConfig& cfg, const Schedule& s, const RankStateSizes& r) {
    const auto& z = cfg.zero;
    const int64_t psi = r.psi, padded = r.padded;
    const bool mixed = r.mixed, bf16_optimizer = r.bf16_optimizer;
    if (bf16_optimizer)
        e.differences.push_back("bf16 without ZeRO runs DeepSpeed's BF16 optimizer: fp32 gradient buffers on every rank, "
                                "but the fp32 weights and moments partitioned as in stage 1");
    if (!mixed) e.differences.push_back("fp32 training: parameters and gradients take 4 bytes, not the paper's 2");
    if (padded != psi && z.stage != 3)
        e.differences.push_back("partitions are padded to a multiple of 2N elements per group (" +
                                std::to_string(padded - psi) + " padding elements)");
    if (e.category("buckets") > 0)
        e.differences.push_back("gradient buckets (reduce_bucket_size = " + std::to_string(z.reduce_bucket_size) +
                                " elements) are not in the paper's model states");
    if (z.stage == 1 || z.stage == 2)
        e.differences.push_back("the fp32 copy of the owned gradient partition for the step (4Ψ/N) is extra");
    if (z.stage == 3)
        e.differences.push_back("stage 3 must gather whole parameters to use them: the peak gathered set (" +
                                std::to_string(s.meta.stage3_peak_gathered_elements) +
                                " elements, persistent ones included) comes on top of the partitions");
}

}  // namespace

MemoryEstimate estimate_memory(const Model& m, const DsConfig& cfg, const Schedule& s) {
    MemoryEstimate e;
    e.stage = cfg.zero.stage;
    e.world = s.meta.world;
    const RankStateSizes sizes = rank_state_sizes(m, cfg, s);
    add_model_state_items(e, m, cfg, s, sizes);
    move_offloaded_to_host(e, cfg);  // offload_optimizer / offload_param
    add_reference_estimates(e, m, cfg.zero.stage, sizes);
    add_memory_differences(e, cfg, s, sizes);
    return e;
}

}  // namespace zerosim
