#include "analysis/memory_report.hpp"

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
        row.fit = estimate_fit(row.estimate.total(), row.activations, fit.gpu_memory_gb);
        if (measured && measured->stage == st) row.measured = compare_memory(row.estimate, *measured);
        r.stages.push_back(std::move(row));
    }
    return r;
}

void write_memory_text(std::ostream& out, const MemoryReport& r) {
    out << "Model states per rank: " << r.model_name << ", " << r.parameters << " parameters, " << r.world << " ranks, "
        << dtype_name(r.dtype) << " (the rank holding the most; KB/MB/GB are 1024-based)\n";
    for (const auto& row : r.stages) {
        const MemoryEstimate& e = row.estimate;
        out << "\nstage " << row.stage << ": " << ds_size_string(e.total()) << " per rank\n";
        char line[256];
        for (const auto& it : e.items) {
            std::snprintf(line, sizeof line, "  %-48s %11s  %s\n", it.name.c_str(), ds_size_string(it.bytes).c_str(), it.why.c_str());
            out << line;
        }
        out << "  ZeRO paper " << e.paper_formula << ": " << ds_size_string(e.paper_bytes) << "\n";
        if (e.deepspeed_estimator_bytes >= 0)
            out << "  DeepSpeed's " << e.deepspeed_estimator_formula << ": " << ds_size_string(e.deepspeed_estimator_bytes) << "\n";
        for (const auto& d : e.differences) out << "  differs: " << d << "\n";
        out << "  activations per rank (one micro batch): " << ds_size_string(row.activations.total()) << " = "
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

Status write_layout_memory_text(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& s) {
    const ParallelLayout& L = s.meta.layout;
    out << "# Model states per rank: pipe " << L.pipe << " x data " << L.data() << " x sequence " << L.sequence << " x tensor "
        << L.tensor << ", ZeRO stage " << cfg.zero.stage << " over each rank's " << s.meta.world
        << " data-parallel ranks (sizes 1024-based, as DeepSpeed prints them)\n";
    char line[400];
    std::snprintf(line, sizeof line, "%-6s %-6s %16s %12s %12s %12s %12s %12s\n", "stage", "rank", "parameters held", "parameters",
                  "gradients", "optimizer", "buckets", "total");
    out << line;
    for (int64_t stage = 0; stage < L.pipe; ++stage) {
        const ScheduleOptions o = options_for_stage(s.meta, stage);
        auto local = rank_local_model(whole, cfg, o);
        if (!local) return local.error();
        auto sched = stage == s.meta.pipe_stage ? Result<Schedule>(s) : build_schedule(whole, cfg, o);
        if (!sched) return sched.error();
        // estimate_memory reads ZeRO's world from the schedule (the data-parallel group) and the
        // parameters from the model the rank holds.
        const MemoryEstimate e = estimate_memory(local.value(), cfg, sched.value());
        std::snprintf(line, sizeof line, "%-6lld %-6lld %16lld %12s %12s %12s %12s %12s\n", static_cast<long long>(stage),
                      static_cast<long long>(o.rank), static_cast<long long>(local->total_numel()),
                      ds_size_string(e.category("parameters")).c_str(), ds_size_string(e.category("gradients")).c_str(),
                      ds_size_string(e.category("optimizer")).c_str(), ds_size_string(e.category("buckets")).c_str(),
                      ds_size_string(e.total()).c_str());
        out << line;
    }
    out << "Each stage holds its own layers, split over its " << L.tensor
        << " tensor rank(s) (norms and row-parallel biases whole), and ZeRO partitions what it holds over its data-parallel "
           "group. Not counted yet: activations (the micro batches in flight on each stage under 1F1B, Korthikanti et al.'s "
           "/t factors) and the pipeline's send and receive buffers.\n";
    return std::nullopt;
}

}  // namespace zerosim
