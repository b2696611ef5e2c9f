#include "prediction/what_if_compare.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/explain.hpp"
#include "analysis/zero_variants.hpp"
#include "prediction/what_if_fsdp.hpp"

namespace zerosim {

int64_t what_if_model_state_bytes(const Schedule& s, int64_t deepspeed_bytes) {
    return is_fsdp_schedule(s) ? fsdp_model_state_bytes(s) : deepspeed_bytes;
}

WhatIfSide what_if_side(const std::string& label, const Schedule& s, const Prediction& overlapped, FitEstimate fit,
                        int64_t gpus_per_node) {
    WhatIfSide w;
    w.label = label;
    const int last = s.meta.steps - 1;
    w.volume_bytes = wire_bytes_per_rank(s, last);
    w.inter_node_bytes = inter_node_bytes_per_rank(s, last, gpus_per_node);
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

}  // namespace

void write_what_if_table(std::ostream& out, const WhatIfComparison& c, const std::string& prefix) {
    const double gb = 1e9, gib = 1024.0 * 1024.0 * 1024.0;
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
    row("volume sent+received, GB", num(r.volume_bytes / gb, "%.3f"), num(w.volume_bytes / gb, "%.3f"), change(r.volume_bytes, w.volume_bytes));
    row("inter-node bytes, GB", num(r.inter_node_bytes / gb, "%.3f"), num(w.inter_node_bytes / gb, "%.3f"),
        change(r.inter_node_bytes, w.inter_node_bytes));
    row("communication, ms", num(r.comm_ms, "%.1f"), num(w.comm_ms, "%.1f"), change(r.comm_ms, w.comm_ms));
    row("exposed communication, ms", num(r.exposed_ms, "%.1f"), num(w.exposed_ms, "%.1f"), change(r.exposed_ms, w.exposed_ms));
    row("step time, ms", num(r.step_ms, "%.1f"), num(w.step_ms, "%.1f"), change(r.step_ms, w.step_ms));
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
                                      {"inter_node_bytes_per_rank", s.inter_node_bytes},
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
