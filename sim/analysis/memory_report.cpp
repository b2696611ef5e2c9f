#include "analysis/memory_report.hpp"

#include "core/sizes.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "formats/comms_log.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

std::vector<MemoryComparison> compare_memory(const MemoryEstimate& e, const MeasuredMemory& measured) {
    static const std::pair<const char*, const char*> categories[] = {
        {"parameters", "parameters"}, {"gradients", "gradients"}, {"optimizer", "optimizer_states"}, {"buckets", "buckets"}};
    std::vector<MemoryComparison> out;
    for (const auto& [ours, theirs] : categories) {
        auto it = measured.peak.find(theirs);
        out.push_back({ours, e.category(ours), it == measured.peak.end() ? -1 : it->second});
    }
    return out;
}

FitEstimate fit_with_host(const MemoryEstimate& states, const ActivationEstimate& a, const FitOptions& fit, int64_t world) {
    FitEstimate f = estimate_fit(states.total(), a, fit.gpu_memory_gb);
    if (fit.ranks_per_node > 0) f.host_per_node = states.category("host") * std::min(fit.ranks_per_node, world);
    f.host_bytes = static_cast<int64_t>(fit.host_memory_gb * 1e9);
    return f;
}

FitEstimate schedule_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const FitOptions& fit, const MemoryEstimate& states) {
    const auto& meta = s.meta;
    // A saved schedule built with --activation-checkpointing says so itself (its backward holds the recompute).
    const auto act = estimate_activations(model, meta.seq_len, meta.micro_batch, cfg.model_dtype,
                                          fit.activation_checkpointing || cfg.activation_checkpointing || meta.activation_checkpointing);
    return fit_with_host(states, act, fit, meta.world);
}

FitEstimate schedule_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const FitOptions& fit) {
    return schedule_fit(model, cfg, s, fit, estimate_memory(model, cfg, s));
}

Result<MemoryReport> memory_report(const Model& model, const DsConfig& cfg, int64_t world, const std::vector<int>& stages,
                                   const std::optional<MeasuredMemory>& measured, const std::string& measured_path,
                                   const FitOptions& fit, int64_t gpus_per_node) {
    if (measured && measured->world != world)
        return Error{measured_path, "world", "the measured run had " + std::to_string(measured->world) +
                                                 " ranks, --world says " + std::to_string(world)};
    MemoryReport r{model.name, model.total_numel(), world, cfg.model_dtype, {}, measured ? measured_path : "", fit};
    for (int st : stages) {
        DsConfig c = cfg.with_stage(st);
        ScheduleOptions o;
        o.world = world;
        o.steps = 2;  // stage 3's steady state (prefetch, reuse) starts at the second step
        o.gpus_per_node = gpus_per_node;
        o.seq_len = fit.seq_len;
        auto s = build_schedule(model, c, o);
        if (!s) return s.error();
        StageMemory row{st, estimate_memory(model, c, s.value()), {}, {}, {}};
        row.activations = estimate_activations(model, s->meta.seq_len, s->meta.micro_batch, c.model_dtype,
                                               fit.activation_checkpointing || c.activation_checkpointing);
        row.fit = fit_with_host(row.estimate, row.activations, fit, world);
        if (measured && measured->stage == st) row.measured = compare_memory(row.estimate, *measured);
        r.stages.push_back(std::move(row));
    }
    return r;
}

void write_memory_text(std::ostream& out, const MemoryReport& r) {
    out << "Model states per rank: " << r.model_name << ", " << r.parameters << " parameters, " << r.world << " ranks, "
        << dtype_name(r.dtype) << " (the rank holding the most; KiB/MiB/GiB: 1024-based)\n";
    for (const auto& row : r.stages) {
        const MemoryEstimate& e = row.estimate;
        out << "\nstage " << row.stage << ": " << binary_size_string(e.total()) << " per rank\n";
        char line[256];
        for (const auto& it : e.items) {
            std::snprintf(line, sizeof line, "  %-48s %11s  %s\n", it.name.c_str(), binary_size_string(it.bytes).c_str(), it.why.c_str());
            out << line;
        }
        out << "  ZeRO paper " << e.paper_formula << ": " << binary_size_string(e.paper_bytes) << "\n";
        if (e.deepspeed_estimator_bytes >= 0)
            out << "  DeepSpeed's " << e.deepspeed_estimator_formula << ": " << binary_size_string(e.deepspeed_estimator_bytes) << "\n";
        for (const auto& d : e.differences) out << "  differs: " << d << "\n";
        out << "  activations per rank (one micro batch): " << binary_size_string(row.activations.total()) << " = "
            << row.activations.formula << "\n";
        out << "  " << fit_sentence(row.fit) << (r.fit.gpu.empty() ? "" : " (" + r.fit.gpu + ")") << "\n";
        if (row.measured.empty()) continue;
        out << "  measured by zerorun (" << r.measured_path << ", peak bytes, largest rank):\n";
        for (const auto& c : row.measured) {
            std::snprintf(line, sizeof line, "    %-12s predicted %12lld  measured %12lld  %s\n", c.category.c_str(),
                          static_cast<long long>(c.predicted), static_cast<long long>(c.measured),
                          c.measured < 0 ? "(not reported)" : c.predicted == c.measured ? "(equal)" : "");
            out << line;
        }
    }
}

void write_memory_json(std::ostream& out, const MemoryReport& r) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& row : r.stages) {
        const MemoryEstimate& e = row.estimate;
        nlohmann::ordered_json o;
        o["stage"] = row.stage;
        nlohmann::ordered_json items = nlohmann::ordered_json::array();
        for (const auto& it : e.items)
            items.push_back({{"name", it.name}, {"category", it.category}, {"bytes", it.bytes}, {"why", it.why}});
        if (!row.measured.empty()) {
            nlohmann::ordered_json m;
            for (const auto& c : row.measured) m[c.category] = {{"predicted", c.predicted}, {"measured", c.measured}};
            o["measured"] = m;
        }
        o["items"] = items;
        o["total_bytes"] = e.total();
        o["paper_bytes"] = e.paper_bytes;
        o["paper_formula"] = e.paper_formula;
        o["deepspeed_estimator_bytes"] = e.deepspeed_estimator_bytes;
        o["differences"] = e.differences;
        o["activation_bytes"] = row.activations.total();
        o["activation_formula"] = row.activations.formula;
        o["activation_checkpointing"] = row.activations.checkpointing;
        o["framework_reserve_bytes"] = row.fit.reserve;
        o["total_with_activations_bytes"] = row.fit.total();
        if (row.fit.known()) o["gpu_memory_bytes"] = row.fit.gpu_bytes;
        o["fits"] = row.fit.verdict();
        j.push_back(o);
    }
    out << j.dump(1) << '\n';
}

}  // namespace zerosim

namespace zerosim {

Result<std::vector<StageFit>> layout_fit(const Model& whole, const DsConfig& cfg, const Schedule& s, const FitOptions& fit) {
    const ParallelLayout& L = s.meta.layout;
    std::vector<StageFit> out;
    for (int64_t stage = 0; stage < std::max<int64_t>(L.pipe, 1); ++stage) {
        const ScheduleOptions o = options_for_stage(s.meta, stage);
        auto local = rank_local_model(whole, cfg, o);
        if (!local) return local.error();
        auto sched = stage == s.meta.pipe_stage ? Result<Schedule>(s) : build_schedule(whole, cfg, o);
        if (!sched) return sched.error();
        StageFit r;
        r.stage = stage;
        r.rank = o.rank;
        r.params = local->total_numel();
        // estimate_memory reads ZeRO's world from the schedule (the data-parallel group) and the
        // parameters from the model the rank holds.
        r.states = estimate_memory(local.value(), cfg, sched.value());
        r.activations = estimate_stage_activations(whole, local.value(), L, stage, s.meta.seq_len, s.meta.micro_batch,
                                                   s.meta.grad_accum, cfg.model_dtype,
                                                   fit.activation_checkpointing || cfg.activation_checkpointing);
        r.fit = estimate_fit(r.states.total(), r.activations, fit.gpu_memory_gb);
        out.push_back(std::move(r));
    }
    return out;
}

int64_t stage_holding_most(const std::vector<StageFit>& stages) {
    int64_t best = -1;
    for (size_t i = 0; i < stages.size(); ++i)
        if (best < 0 || stages[i].fit.total() > stages[static_cast<size_t>(best)].fit.total()) best = static_cast<int64_t>(i);
    return best;
}

std::string stage_fit_sentence(const StageFit& s) {
    return "stage " + std::to_string(s.stage) + " (rank " + std::to_string(s.rank) + "): " + fit_sentence(s.fit);
}

namespace {

// The activations table, each stage's formula and the fit line per stage.
void write_layout_activations_text(std::ostream& out, const std::vector<StageFit>& stages, const ScheduleMeta& meta,
                                   const FitOptions& fit) {
    out << "# Activations per rank at each stage's peak: " << meta.grad_accum << " micro batch(es) of " << meta.micro_batch
        << " x " << meta.seq_len << " tokens per step"
        << (meta.layout.pipelined() ? "; under 1F1B stage k of p holds min(p - k, m) of them" : ", one at a time")
        << (meta.layout.sequence > 1 ? "; Ulysses: s / sp tokens per rank" : "") << "\n";
    char line[400];
    std::snprintf(line, sizeof line, "%-6s %-6s %7s %10s %12s %12s %12s %12s %12s  %s\n", "stage", "rank", "layers", "in flight",
                  "kept/layer", "layers", "outside", "activations", "total", "fits");
    out << line;
    for (const auto& r : stages) {
        const StageActivations& a = r.activations;
        std::snprintf(line, sizeof line, "%-6lld %-6lld %7lld %10lld %12s %12s %12s %12s %12s  %s\n", static_cast<long long>(r.stage),
                      static_cast<long long>(r.rank), static_cast<long long>(a.layers), static_cast<long long>(a.in_flight),
                      binary_size_string(a.kept_per_layer_bytes).c_str(), binary_size_string(a.layers_bytes).c_str(),
                      binary_size_string(a.outside_bytes).c_str(), binary_size_string(a.total()).c_str(),
                      binary_size_string(r.fit.total()).c_str(), r.fit.verdict().c_str());
        out << line;
    }
    for (const auto& r : stages) out << "  stage " << r.stage << ": " << r.activations.formula << "\n";
    for (const auto& r : stages) out << stage_fit_sentence(r) << (fit.gpu.empty() ? "" : " (" + fit.gpu + ")") << "\n";
    const int64_t most = stage_holding_most(stages);
    if (most < 0) return;
    const StageFit& m = stages[static_cast<size_t>(most)];
    char most_gib[32];
    std::snprintf(most_gib, sizeof most_gib, "%.2f", static_cast<double>(m.fit.total()) / static_cast<double>(int64_t{1} << 30));
    out << "Stage " << m.stage << " holds the most (" << most_gib << " GiB per rank). Not counted: "
        << (meta.layout.pipelined() ? "the pipeline's send and receive buffers, " : "")
        << "the s x s attention scores (FlashAttention assumed).\n";
}

}  // namespace

Status write_layout_memory_text(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& s, const FitOptions& fit) {
    auto stages = layout_fit(whole, cfg, s, fit);
    if (!stages) return stages.error();
    const ParallelLayout& L = s.meta.layout;
    out << "# Model states per rank: pipe " << L.pipe << " x data " << L.data() << " x sequence " << L.sequence << " x tensor "
        << L.tensor << ", ZeRO stage " << cfg.zero.stage << " over each rank's " << s.meta.world
        << " data-parallel ranks (KiB/MiB/GiB: 1024-based)\n";
    char line[400];
    std::snprintf(line, sizeof line, "%-6s %-6s %16s %12s %12s %12s %12s %12s\n", "stage", "rank", "parameters held", "parameters",
                  "gradients", "optimizer", "buckets", "total");
    out << line;
    for (const auto& r : stages.value()) {
        const MemoryEstimate& e = r.states;
        std::snprintf(line, sizeof line, "%-6lld %-6lld %16lld %12s %12s %12s %12s %12s\n", static_cast<long long>(r.stage),
                      static_cast<long long>(r.rank), static_cast<long long>(r.params),
                      binary_size_string(e.category("parameters")).c_str(), binary_size_string(e.category("gradients")).c_str(),
                      binary_size_string(e.category("optimizer")).c_str(), binary_size_string(e.category("buckets")).c_str(),
                      binary_size_string(e.total()).c_str());
        out << line;
    }
    out << "Each stage holds its own layers, split over its " << L.tensor
        << " tensor rank(s) (norms and row-parallel biases whole), and ZeRO partitions what it holds over its data-parallel "
           "group.\n";
    write_layout_activations_text(out, stages.value(), s.meta, fit);
    return std::nullopt;
}

Status write_layout_memory_json(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& s, const FitOptions& fit) {
    auto stages = layout_fit(whole, cfg, s, fit);
    if (!stages) return stages.error();
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    const int64_t most = stage_holding_most(stages.value());
    for (size_t i = 0; i < stages->size(); ++i) {
        const StageFit& r = stages.value()[i];
        const StageActivations& a = r.activations;
        nlohmann::ordered_json o;
        o["stage"] = r.stage;
        o["rank"] = r.rank;
        o["params"] = r.params;
        o["model_state_bytes"] = {{"parameters", r.states.category("parameters")}, {"gradients", r.states.category("gradients")},
                                  {"optimizer", r.states.category("optimizer")}, {"buckets", r.states.category("buckets")},
                                  {"total", r.states.total()}, {"paper_bytes", r.states.paper_bytes},
                                  {"paper_formula", r.states.paper_formula}};
        o["layers"] = a.layers;
        o["micro_batches_in_flight"] = a.in_flight;
        o["activation_bytes"] = {{"layers", a.layers_bytes}, {"outside_layers", a.outside_bytes}, {"total", a.total()}};
        o["activation_formula"] = a.formula;
        o["activation_checkpointing"] = a.checkpointing;
        o["framework_reserve_bytes"] = r.fit.reserve;
        o["total_bytes"] = r.fit.total();
        if (r.fit.known()) o["gpu_memory_bytes"] = r.fit.gpu_bytes;
        o["fits"] = r.fit.verdict();
        o["holds_most"] = static_cast<int64_t>(i) == most;
        j.push_back(o);
    }
    out << j.dump(1) << '\n';
    return std::nullopt;
}

}  // namespace zerosim
