#include "prediction/what_if_compare.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "analysis/explain.hpp"
#include "analysis/memory_report.hpp"
#include "schedule/mesh.hpp"
#include "schedule/what_if_fsdp.hpp"

namespace zerosim {

int64_t what_if_model_state_bytes(const Schedule& s, int64_t deepspeed_bytes) {
    return is_fsdp_schedule(s) ? fsdp_model_state_bytes(s) : deepspeed_bytes;
}

FitEstimate point_fit(const Model& model, const DsConfig& cfg, const Schedule& s, const Topology& t, bool activation_checkpointing) {
    FitEstimate fit = schedule_fit(model, cfg, s,
                                   FitOptions{activation_checkpointing, 0, t.gpu_memory_gb, t.name, t.host_memory_gb, t.gpus_per_node});
    fit.model_states = what_if_model_state_bytes(s, fit.model_states);
    return fit;
}

// Bytes per GPU through its node's NICs for the collectives of `step`: NCCL's rings and trees cross
// each node boundary once per chunk and relay inside the node over NVLink, so what a group's members
// on one node need from other nodes (each rank's wire bytes times the share of its peers off the
// node) enters that node once, shared by those members' NICs: divided by the members on a node.
// Ranks on nodes of `gpus_per_node` in order; the group containing rank 0 stands for its kind.
double nic_bytes_per_gpu(const Schedule& s, int step, int64_t gpus_per_node) {
    const int64_t g = std::max<int64_t>(gpus_per_node, 1);
    // Per group name: its size and how many of its first member set share the first member's node
    // (computed once per group, not once per op; "" and unknown names are the world).
    struct Shape {
        int64_t n = 0, on_node = 0;
    };
    auto shape_of = [&](const std::vector<int>& members) {
        // schedule/mesh.hpp places the members (the one place that puts ranks on nodes).
        return Shape{static_cast<int64_t>(members.size()), place_members(members, g).first_node_members};
    };
    const Shape world{s.meta.world, std::min<int64_t>(s.meta.world, g)};
    std::map<GroupKind, Shape> shapes;
    for (const auto& pg : s.meta.groups)
        if (!pg.members.empty() && !pg.members[0].empty() && !shapes.count(pg.kind)) shapes[pg.kind] = shape_of(pg.members[0]);
    double total = 0;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind) || op.step != step) continue;
        auto it = shapes.find(op.group);
        const Shape sh = it == shapes.end() ? world : it->second;
        if (sh.n <= 1 || sh.on_node == sh.n) continue;
        const double off = static_cast<double>(sh.n - sh.on_node) / static_cast<double>(sh.n - 1);
        total += op_wire_bytes(op, sh.n) * off / static_cast<double>(sh.on_node);
    }
    return total;
}

WhatIfSide what_if_side(const std::string& label, const Schedule& s, const Prediction& overlapped, FitEstimate fit,
                        int64_t gpus_per_node) {
    WhatIfSide w;
    w.label = label;
    const int last = s.meta.steps - 1;
    w.volume_bytes = wire_bytes_per_rank(s, last);
    w.inter_node_bytes = nic_bytes_per_gpu(s, last, gpus_per_node);
    if (!overlapped.steps.empty()) {
        const auto& st = overlapped.steps.back();
        w.step_ms = st.step_s() * 1e3;
        w.comm_ms = st.comm_s * 1e3;
        w.exposed_ms = st.exposed_comm_s * 1e3;
    }
    fit.model_states = what_if_model_state_bytes(s, fit.model_states);
    w.fit = fit;
    return w;
}

namespace {

std::string change(double before, double after) {
    if (before == 0) return after == 0 ? "same" : "new";
    char b[32];
    std::snprintf(b, sizeof b, "%+.1f%%", (after - before) / before * 100.0);
    return b;
}

// Bytes in the unit their size asks for (decimal, as the volumes elsewhere), times in ms with the
// digits a small run needs.
std::string bytes_text(double b) {
    char t[48];
    if (b >= 1e9) std::snprintf(t, sizeof t, "%.2f GB", b / 1e9);
    else if (b >= 1e6) std::snprintf(t, sizeof t, "%.2f MB", b / 1e6);
    else std::snprintf(t, sizeof t, "%.2f KB", b / 1e3);
    return t;
}

// Both sides of a row with the same decimals: 1 from 100 ms on, else 3.
std::string ms_text(double ms, double other) {
    char t[48];
    std::snprintf(t, sizeof t, std::max(ms, other) >= 100 ? "%.1f" : "%.3f", ms);
    return t;
}

}  // namespace

void write_what_if_table(std::ostream& out, const WhatIfComparison& c, const std::string& prefix) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    out << prefix << "what-if " << c.name << " beside the real schedule (last step, per rank; the what-if is NOT DeepSpeed's):\n";
    char line[320];
    auto row = [&](const char* what, const std::string& a, const std::string& b, const std::string& d) {
        std::snprintf(line, sizeof line, "%s  %-28s %30s %36s %8s\n", prefix.c_str(), what, a.c_str(), b.c_str(), d.c_str());
        out << line;
    };
    auto num = [](double v, const char* fmt) {
        char b[48];
        std::snprintf(b, sizeof b, fmt, v);
        return std::string(b);
    };
    row("", c.real.label, c.what_if.label, "change");
    const WhatIfSide &r = c.real, &w = c.what_if;
    row("volume sent+received", bytes_text(r.volume_bytes), bytes_text(w.volume_bytes), change(r.volume_bytes, w.volume_bytes));
    row("through the NICs per GPU", bytes_text(r.inter_node_bytes), bytes_text(w.inter_node_bytes),
        change(r.inter_node_bytes, w.inter_node_bytes));
    row("communication, ms", ms_text(r.comm_ms, w.comm_ms), ms_text(w.comm_ms, r.comm_ms), change(r.comm_ms, w.comm_ms));
    row("exposed communication, ms", ms_text(r.exposed_ms, w.exposed_ms), ms_text(w.exposed_ms, r.exposed_ms), change(r.exposed_ms, w.exposed_ms));
    row("step time, ms", ms_text(r.step_ms, w.step_ms), ms_text(w.step_ms, r.step_ms), change(r.step_ms, w.step_ms));
    row("model states, GiB", num(static_cast<double>(r.fit.model_states) / gib, "%.2f"),
        num(static_cast<double>(w.fit.model_states) / gib, "%.2f"),
        change(static_cast<double>(r.fit.model_states), static_cast<double>(w.fit.model_states)));
    auto total = [&](const FitEstimate& f) {
        return num(static_cast<double>(f.total()) / gib, "%.2f") + (f.known() ? (f.fits() ? " (fits)" : " (does not fit)") : "");
    };
    row("memory per rank, GiB", total(r.fit), total(w.fit),
        change(static_cast<double>(r.fit.total()), static_cast<double>(w.fit.total())));
}

std::string what_if_json(const WhatIfComparison& c) {
    auto side = [](const WhatIfSide& s) {
        return nlohmann::ordered_json{{"label", s.label},
                                      {"volume_bytes_per_rank", s.volume_bytes},
                                      {"nic_bytes_per_gpu", s.inter_node_bytes},
                                      {"comm_ms", s.comm_ms},
                                      {"exposed_comm_ms", s.exposed_ms},
                                      {"step_ms", s.step_ms},
                                      {"model_states_bytes", s.fit.model_states},
                                      {"memory_per_rank_bytes", s.fit.total()},
                                      {"fits", s.fit.verdict()}};
    };
    nlohmann::ordered_json j{{"name", c.name}, {"deepspeed_schedule", side(c.real)}, {"what_if", side(c.what_if)}};
    return j.dump();
}

}  // namespace zerosim
