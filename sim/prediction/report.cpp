#include "prediction/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "formats/schedule_outputs.hpp"

namespace zerosim {

namespace {

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

std::string num(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// Stage 3's host timeline under the streams, on the same time axis: the coordinator's calls on
// the host, and the gathered, unreleased parameters (the memory model's quantity) as a step line.
void gathered_svg(std::ostream& out, const Schedule& s, const Prediction& p, double t0, double t1, double W, double L) {
    if (p.host.empty() || p.gathered.empty()) return;
    const double H = 120, top = 26, lane = 18;
    auto X = [&](double t) { return L + std::clamp((t - t0) / (t1 - t0), 0.0, 1.0) * (W - L); };
    int64_t peak = 1;
    for (const auto& g : p.gathered) peak = std::max(peak, g.bytes);
    out << "<svg id='gathered' xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << top + lane + H + 24
        << "' font-family='sans-serif' font-size='11'>\n<text x='4' y='" << top - 12 << "'>host</text>\n";
    for (size_t e = 0; e < s.host.size() && e < p.host.size(); ++e) {
        if (p.host[e].end_s < t0 || p.host[e].start_s > t1) continue;
        const bool waits = !s.host[e].waits.empty();
        out << "<rect x='" << num("%.2f", X(p.host[e].start_s)) << "' y='" << top - lane << "' width='"
            << num("%.2f", std::max(0.5, X(p.host[e].end_s) - X(p.host[e].start_s))) << "' height='" << lane - 4
            << "' fill='" << (waits ? "#d62728" : "#969696") << "'><title>" << host_kind_name(s.host[e].kind)
            << (waits ? " (waits on the fetch throttle)" : "") << "</title></rect>\n";
    }
    const double base = top + lane + H;
    // A step line of samples over [t0, t1], scaled so that `scale` bytes fill the height.
    auto step_line = [&](const std::vector<GatheredSample>& samples, int64_t scale) {
        std::string pts;
        double prev_y = base;
        bool started = false;
        for (const auto& g : samples) {
            if (g.t_s > t1) break;
            const double y = base - static_cast<double>(g.bytes) / static_cast<double>(std::max<int64_t>(scale, 1)) * H;
            if (g.t_s >= t0) {
                if (!started) pts += num("%.2f", L) + "," + num("%.2f", prev_y) + " ";
                started = true;
                pts += num("%.2f", X(g.t_s)) + "," + num("%.2f", prev_y) + " " + num("%.2f", X(g.t_s)) + "," + num("%.2f", y) + " ";
            }
            prev_y = y;
        }
        return pts + num("%.2f", W) + "," + num("%.2f", prev_y);
    };
    int64_t resident = 1;
    for (const auto& g : p.resident) resident = std::max(resident, g.bytes);
    out << "<text x='4' y='" << top + lane + 12 << "'>gathered</text><polyline fill='none' stroke='#2ca02c' points='"
        << step_line(p.gathered, peak) << "'/>\n";
    if (!p.resident.empty())
        out << "<polyline fill='none' stroke='#9467bd' stroke-dasharray='3' points='" << step_line(p.resident, resident) << "'/>\n";
    out << "<text x='4' y='" << base + 16 << "'><tspan fill='#2ca02c'>gathered, unreleased (the memory model's count): peak "
        << num("%.3f", static_cast<double>(peak) / (1 << 30)) << " GiB</tspan>";
    if (!p.resident.empty())
        out << "<tspan fill='#9467bd'> - dashed: gathered buffers not yet reusable (device memory): peak "
            << num("%.3f", static_cast<double>(resident) / (1 << 30)) << " GiB</tspan>";
    out << " (each line to its own peak, all steps)</text></svg>\n";
}

void timeline_svg(std::ostream& out, const Schedule& s, const Prediction& p) {
    if (p.steps.empty()) return;
    const StepTiming& st = p.steps.back();
    double t0 = st.start_s, t1 = st.end_s;
    if (t1 <= t0) t1 = t0 + 1e-9;
    const double W = 1100, L = 90, lane_h = 34;
    const char* names[] = {"compute", "comm", "reduce", "fetch"};
    out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << 4 * lane_h + 40
        << "' font-family='sans-serif' font-size='11'>\n";
    for (int l = 0; l < 4; ++l)
        out << "<text x='4' y='" << 20 + l * lane_h + 14 << "'>" << names[l] << "</text><line x1='" << L << "' x2='" << W
            << "' y1='" << 20 + (l + 1) * lane_h - 2 << "' y2='" << 20 + (l + 1) * lane_h - 2 << "' stroke='#eee'/>\n";
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.step != st.step || !p.ops[i].simulated) continue;
        double a = (p.ops[i].start_s - t0) / (t1 - t0), b = (p.ops[i].end_s - t0) / (t1 - t0);
        double x = L + a * (W - L), w = std::max(0.5, (b - a) * (W - L));
        int lane = static_cast<int>(op.stream);
        bool c = is_collective(op.kind);
        std::string color = !c ? (op.compute == ComputeKind::Backward ? "#6baed6" : op.compute == ComputeKind::Forward ? "#9ecae1" : "#31a354")
                               : op.kind == OpKind::AllGather ? "#fd8d3c" : op.kind == OpKind::ReduceScatter ? "#e6550d" : "#de2d26";
        std::string label = c ? std::string(op_record_name(op.kind)) + " " + op.caller + " " + ds_size_string(op.bytes())
                              : std::string(compute_kind_name(op.compute)) + " " + op.module_name;
        out << "<rect x='" << num("%.2f", x) << "' y='" << 20 + lane * lane_h << "' width='" << num("%.2f", w) << "' height='"
            << lane_h - 8 << "' fill='" << color << "'><title>" << esc(label) << " " << num("%.3f", p.ops[i].duration() * 1e3)
            << " ms</title></rect>\n";
    }
    out << "<text x='" << L << "' y='" << 4 * lane_h + 36 << "'>step " << st.step << ": "
        << num("%.3f", (t1 - t0) * 1e3) << " ms</text></svg>\n";
    gathered_svg(out, s, p, t0, t1, W, L);
}

void measured_chart(std::ostream& out, const std::vector<std::pair<double, double>>& pts) {
    // Predicted against measured time per matched op, log-log, with the diagonal.
    const double S = 420, M = 50;
    double lo = 1e300, hi = 0;
    for (auto [p, m] : pts) {
        if (p > 0) lo = std::min(lo, p), hi = std::max(hi, p);
        if (m > 0) lo = std::min(lo, m), hi = std::max(hi, m);
    }
    if (hi <= 0) return;
    if (lo >= hi) lo = hi / 10;
    auto X = [&](double v) { return M + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (S - M - 10); };
    auto Y = [&](double v) { return S - M - (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (S - M - 10); };
    out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << S << "' height='" << S << "' font-family='sans-serif' font-size='11'>"
        << "<rect x='" << M << "' y='10' width='" << S - M - 10 << "' height='" << S - M - 10 << "' fill='none' stroke='#999'/>"
        << "<line x1='" << X(lo) << "' y1='" << Y(lo) << "' x2='" << X(hi) << "' y2='" << Y(hi) << "' stroke='#bbb' stroke-dasharray='4'/>"
        << "<text x='" << S / 2 << "' y='" << S - 12 << "' text-anchor='middle'>predicted ms</text>"
        << "<text x='14' y='" << S / 2 << "' transform='rotate(-90 14 " << S / 2 << ")' text-anchor='middle'>measured ms</text>";
    for (auto [p, m] : pts)
        if (p > 0 && m > 0) out << "<circle cx='" << num("%.1f", X(p)) << "' cy='" << num("%.1f", Y(m)) << "' r='3' fill='#3182bd'/>";
    out << "</svg>\n";
}

}  // namespace

void write_html_report(std::ostream& out, const ReportInput& in) {
    const auto& s = in.schedule;
    const auto& m = s.meta;
    out << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>zerosim report: " << esc(m.model_name)
        << "</title><style>.nofit{color:#b00}.fits{color:#070}body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}"
           "pre{background:#f8f8f8;padding:10px;white-space:pre-wrap;font-size:12px}h2{border-bottom:1px solid #ccc}</style></head><body>\n";
    out << "<h1>zerosim report</h1><p>" << esc(m.model_name) << " (" << m.total_params << " parameters), ZeRO stage " << m.stage
        << ", " << m.world << " ranks on " << esc(in.topology.name) << " (" << in.topology.nodes << " x "
        << in.topology.gpus_per_node << "), " << dtype_name(m.model_dtype) << ", micro batch " << m.micro_batch
        << ", gradient accumulation " << m.grad_accum << ", sequence " << m.seq_len << ". DeepSpeed dialect " << esc(m.dialect)
        << ".</p>\n";

    out << "<section id='steps'><h2>Step time</h2><table><tr><th>step</th><th>compute ms</th><th>communication ms</th>"
           "<th>exposed communication ms</th><th>step ms</th></tr>\n";
    for (const auto& st : in.overlapped.steps)
        out << "<tr><td>" << st.step << "</td><td>" << num("%.3f", st.compute_s * 1e3) << "</td><td>"
            << num("%.3f", st.comm_s * 1e3) << "</td><td>" << num("%.3f", st.exposed_comm_s * 1e3) << "</td><td>"
            << num("%.3f", st.step_s() * 1e3) << "</td></tr>\n";
    out << "</table><p>Engine start: " << num("%.3f", in.overlapped.init_s * 1e3) << " ms.</p></section>\n";

    out << "<section id='timeline'><h2>Timeline of the last step</h2><p>One group of identical ranks, one track per stream; "
           "hover a bar for the op.</p>\n";
    timeline_svg(out, s, in.overlapped);
    out << "</section>\n";

    out << "<section id='memory'><h2>Memory per rank</h2><table><tr><th class='l'>item</th><th>GiB</th><th class='l'>why</th></tr>\n";
    for (const auto& it : in.memory.items)
        out << "<tr><td class='l'>" << esc(it.name) << "</td><td>" << num("%.3f", static_cast<double>(it.bytes) / (1 << 30))
            << "</td><td class='l'>" << esc(it.why) << "</td></tr>\n";
    out << "<tr><th class='l'>total</th><th>" << num("%.3f", static_cast<double>(in.memory.total()) / (1 << 30))
        << "</th><th></th></tr></table><p>ZeRO paper (" << esc(in.memory.paper_formula) << "): "
        << num("%.3f", static_cast<double>(in.memory.paper_bytes) / (1 << 30)) << " GiB.";
    if (in.memory.deepspeed_estimator_bytes >= 0)
        out << " DeepSpeed's estimator (" << esc(in.memory.deepspeed_estimator_formula) << "): "
            << num("%.3f", static_cast<double>(in.memory.deepspeed_estimator_bytes) / (1 << 30)) << " GiB.";
    out << "</p><ul>";
    for (const auto& d : in.memory.differences) out << "<li>" << esc(d) << "</li>";
    out << "</ul>";
    if (in.fit)
        out << "<p id='fit' class='" << (in.fit->fits() ? "fits" : in.fit->known() ? "nofit" : "unknown") << "'><b>"
            << esc(fit_sentence(*in.fit)) << "</b></p><p>Activations: " << esc(in.activation_formula)
            << ". The reserve is zerosim's assumed CUDA context, NCCL buffers and allocator fragmentation.</p>";
    out << "</section>\n";

    out << "<section id='explain'><h2>Why these collectives</h2><pre>" << esc(in.explanation) << "</pre></section>\n";

    out << "<section id='ops'><h2>Collectives</h2><table><tr><th>#</th><th>step</th><th class='l'>phase</th><th class='l'>op</th>"
           "<th class='l'>caller</th><th>size</th><th class='l'>algorithm</th><th>logged ms</th><th>start ms</th><th>end ms</th></tr>\n";
    size_t shown = 0;
    for (size_t i = 0; i < s.ops.size() && shown < 3000; ++i) {
        const Op& op = s.ops[i];
        if (!is_collective(op.kind)) continue;
        ++shown;
        out << "<tr><td>" << op.id << "</td><td>" << (op.step < 0 ? "init" : std::to_string(op.step)) << "</td><td class='l'>"
            << phase_name(op.phase) << "</td><td class='l'>" << op_record_name(op.kind) << "</td><td class='l'>" << esc(op.caller)
            << "</td><td>" << ds_size_string(op.bytes()) << "</td><td class='l'>" << algorithm_name(in.logged.ops[i].algorithm)
            << "/" << protocol_name(in.logged.ops[i].protocol) << "</td><td>" << num("%.3f", in.logged.ops[i].duration() * 1e3)
            << "</td><td>" << num("%.3f", in.overlapped.ops[i].start_s * 1e3) << "</td><td>"
            << num("%.3f", in.overlapped.ops[i].end_s * 1e3) << "</td></tr>\n";
    }
    out << "</table></section>\n";

    if (in.measured) {
        // Matched in order by (op, printed size): a structural diff is the validator's job; this
        // section sets predicted beside measured for the ops both logs have.
        std::vector<std::pair<double, double>> pts;
        size_t j = 0, matched = 0, missing = 0;
        out << "<section id='measured'><h2>Predicted against measured: " << esc(in.measured_name)
            << "</h2><table><tr><th>#</th><th class='l'>op</th><th>size</th><th>predicted ms</th><th>measured ms</th><th>error</th></tr>\n";
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const Op& op = s.ops[i];
            if (!is_collective(op.kind)) continue;
            const LoggedOp want = logged_op(s, op);
            size_t k = j;
            while (k < in.measured->size() && !((*in.measured)[k].record == want.record &&
                                                 ds_size_string((*in.measured)[k].bytes) == want.size_text))
                ++k;
            if (k == in.measured->size()) {
                ++missing;
                continue;
            }
            j = k + 1;
            ++matched;
            double p = in.logged.ops[i].duration() * 1e3, mm = (*in.measured)[k].time_ms;
            pts.emplace_back(p, mm);
            out << "<tr><td>" << op.id << "</td><td class='l'>" << want.record_key() << "</td><td>" << want.size_text
                << "</td><td>" << num("%.3f", p) << "</td><td>" << num("%.2f", mm) << "</td><td>"
                << (mm > 0 ? num("%+.1f%%", (p - mm) / mm * 100) : "-") << "</td></tr>\n";
        }
        out << "</table><p>" << matched << " ops matched, " << missing << " predicted ops not found in the measured log.</p>\n";
        measured_chart(out, pts);
        if (!in.diff_text.empty()) out << "<h3>Validation (zerosim validate)</h3><pre>" << esc(in.diff_text) << "</pre>\n";
        out << "</section>\n";
    }
    out << "<footer><p>Made by zerosim; self-contained: no network access needed.</p></footer></body></html>\n";
}

}  // namespace zerosim
