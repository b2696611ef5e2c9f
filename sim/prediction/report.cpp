#include "prediction/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis/explain.hpp"
#include "analysis/zero_variants.hpp"
#include "formats/schedule_outputs.hpp"
#include "html_text.hpp"

namespace zerosim {

namespace {

using prediction_detail::html_escape;

std::string num(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// Milliseconds as a person reads them on an axis caption: whole from 100 ms up (14837, never
// 1.484e+04), three significant digits below.
std::string ms_caption(double v) { return num(v >= 100 ? "%.0f" : "%.3g", v); }

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

// The lanes' time axis at height `axis_y`: ticks of 1, 2 or 5 x 10^k ms from the step's start, and
// a caption saying where the window [t0, t1] of step `st` starts and how much it shows.
void lanes_time_axis_svg(std::ostream& out, const StepTiming& st, double t0, double t1, double W, double L, double axis_y) {
    const double span_ms = (t1 - t0) * 1e3;
    double step_ms = std::pow(10.0, std::floor(std::log10(span_ms / 6)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (span_ms / (m * step_ms) <= 8) {
            step_ms *= m;
            break;
        }
    out << "<line class='time-axis' x1='" << L << "' x2='" << W << "' y1='" << axis_y << "' y2='" << axis_y << "' stroke='#555'/>";
    for (double v = 0; v <= span_ms * 1.0001; v += step_ms) {
        double x = L + v / span_ms * (W - L);
        out << "<line x1='" << num("%.1f", x) << "' x2='" << num("%.1f", x) << "' y1='" << axis_y << "' y2='" << axis_y + 4
            << "' stroke='#555'/><text class='tick' x='" << num("%.1f", x) << "' y='" << axis_y + 15 << "' text-anchor='"
            << (v == 0 ? "start" : v + step_ms > span_ms * 1.0001 ? "end" : "middle") << "'>" << num("%g", v) << "</text>";
    }
    out << "<text class='xlabel' x='" << (L + W) / 2 << "' y='" << axis_y + 30 << "' text-anchor='middle'>ms from "
        << (t0 == st.start_s ? "the start of step " + std::to_string(st.step) : ms_caption((t0 - st.start_s) * 1e3) + " ms into step " + std::to_string(st.step))
        << " (" << ms_caption(span_ms) << " ms shown)</text>\n";
}

// The lanes' legend under the time axis: one swatch per colour lanes_svg gives an op.
void lanes_legend_svg(std::ostream& out, double L, double axis_y) {
    const std::pair<const char*, const char*> legend[] = {{"#9ecae1", "forward"},     {"#6baed6", "backward"},
                                                          {"#31a354", "optimizer"},   {"#fd8d3c", "all_gather"},
                                                          {"#e6550d", "reduce_scatter"}, {"#de2d26", "all_reduce, broadcast, other"}};
    double lx = L;
    out << "<g class='legend'>";
    for (const auto& [color, name] : legend) {
        out << "<rect x='" << lx << "' y='" << axis_y + 40 << "' width='12' height='12' fill='" << color << "'/><text x='" << lx + 16
            << "' y='" << axis_y + 50 << "'>" << name << "</text>";
        lx += 30 + 7.0 * static_cast<double>(std::string(name).size());
    }
    out << "</g>";
}

// The stream lanes of step `st` over [t0, t1] (ops clamped to it), with a time axis and a legend.
void lanes_svg(std::ostream& out, const Schedule& s, const Prediction& p, const StepTiming& st, double t0, double t1,
               const std::string& id) {
    const double W = 1100, L = 90, lane_h = 34;
    const char* names[] = {"compute", "comm", "reduce", "fetch"};
    out << "<svg id='" << id << "' xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << 4 * lane_h + 80
        << "' font-family='sans-serif' font-size='11'>\n";
    for (int l = 0; l < 4; ++l)
        out << "<text x='4' y='" << 20 + l * lane_h + 14 << "'>" << names[l] << "</text><line x1='" << L << "' x2='" << W
            << "' y1='" << 20 + (l + 1) * lane_h - 2 << "' y2='" << 20 + (l + 1) * lane_h - 2 << "' stroke='#eee'/>\n";
    // Bars narrower than a pixel that touch the previous bar of their lane and colour are drawn as
    // one, titled with how many ops it holds, so a track is not thousands of sub-pixel slivers.
    struct Bar {
        double x = 0, w = 0;
        std::string color, label;
        double ms = 0;
        int ops = 0;
    };
    std::vector<Bar> lanes[4];
    auto flush_bar = [&](int lane, const Bar& b) {
        out << "<rect x='" << num("%.2f", b.x) << "' y='" << 20 + lane * lane_h << "' width='" << num("%.2f", std::max(0.5, b.w))
            << "' height='" << lane_h - 8 << "' fill='" << b.color << "'><title>"
            << (b.ops > 1 ? std::to_string(b.ops) + " ops coalesced (each under a pixel), " + b.label : b.label) << " "
            << num("%.3f", b.ms) << " ms</title></rect>\n";
    };
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.step != st.step || !p.ops[i].simulated || p.ops[i].end_s < t0 || p.ops[i].start_s > t1) continue;
        double a = std::max(0.0, (p.ops[i].start_s - t0) / (t1 - t0)), b = std::min(1.0, (p.ops[i].end_s - t0) / (t1 - t0));
        double x = L + a * (W - L), w = (b - a) * (W - L);
        int lane = std::clamp(static_cast<int>(op.stream), 0, 3);
        bool c = is_collective(op.kind);
        std::string color = !c ? (op.compute == ComputeKind::Backward ? "#6baed6" : op.compute == ComputeKind::Forward ? "#9ecae1" : "#31a354")
                               : op.kind == OpKind::AllGather ? "#fd8d3c" : op.kind == OpKind::ReduceScatter ? "#e6550d" : "#de2d26";
        std::string label = c ? std::string(op_record_name(op.kind)) + " " + op.caller + " " + ds_size_string(op.bytes())
                              : std::string(compute_kind_name(op.compute)) + " " + op.module_name;
        auto& bars = lanes[lane];
        if (!bars.empty() && w < 1 && bars.back().w < 1 + 1e-9 && bars.back().color == color && x <= bars.back().x + bars.back().w + 1) {
            Bar& prev = bars.back();
            prev.w = std::max(prev.w, x + w - prev.x);
            prev.ms += p.ops[i].duration() * 1e3;
            prev.ops++;
            if (prev.w >= 1) {   // now a pixel wide: drawn, and a new bar starts after it
                flush_bar(lane, prev);
                prev.w = 1e9;    // closed
            }
            continue;
        }
        if (!bars.empty() && bars.back().w < 1e9) flush_bar(lane, bars.back());
        bars.push_back(Bar{x, w, color, label, p.ops[i].duration() * 1e3, 1});
        if (w >= 1) {
            flush_bar(lane, bars.back());
            bars.back().w = 1e9;
        }
    }
    for (int l = 0; l < 4; ++l)
        if (!lanes[l].empty() && lanes[l].back().w < 1e9) flush_bar(l, lanes[l].back());
    const double axis_y = 20 + 4 * lane_h;
    lanes_time_axis_svg(out, st, t0, t1, W, L, axis_y);
    lanes_legend_svg(out, L, axis_y);
    out << "</svg>\n";
}

void timeline_svg(std::ostream& out, const Schedule& s, const Prediction& p) {
    if (p.steps.empty()) return;
    const StepTiming& st = p.steps.back();
    double t0 = st.start_s, t1 = st.end_s;
    if (t1 <= t0) t1 = t0 + 1e-9;
    lanes_svg(out, s, p, st, t0, t1, "timeline-svg");
    gathered_svg(out, s, p, t0, t1, 1100, 90);
}

// One layer zoomed: the backward of the middle transformer layer (parameter names
// "<prefix>.<index>"), with a third of its length either side, so its gradient reductions and
// gathers can be read against its compute. Empty for a model without numbered layers.
void layer_zoom_svg(std::ostream& out, const Schedule& s, const Prediction& p) {
    if (p.steps.empty()) return;
    const StepTiming& st = p.steps.back();
    auto layer_of = [](const std::string& name) {
        size_t start = 0;
        while (start < name.size()) {
            size_t end = name.find('.', start);
            if (end == std::string::npos) end = name.size();
            if (end > start && name.find_first_not_of("0123456789", start) >= end) return name.substr(0, end);
            start = end + 1;
        }
        return std::string();
    };
    std::vector<std::string> layers;
    for (const auto& op : s.ops) {
        std::string l = op.step == st.step && op.compute == ComputeKind::Backward ? layer_of(op.module_name) : "";
        if (!l.empty() && std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
    }
    if (layers.empty()) return;
    const std::string layer = layers[layers.size() / 2];
    double a = 1e300, b = -1e300;
    for (size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].step == st.step && s.ops[i].compute == ComputeKind::Backward && layer_of(s.ops[i].module_name) == layer)
            a = std::min(a, p.ops[i].start_s), b = std::max(b, p.ops[i].end_s);
    if (!(b > a)) return;
    const double pad = (b - a) / 3;
    out << "<section id='timeline-layer'><h2>One layer: the backward of " << html_escape(layer) << "</h2><p>The same lanes, zoomed to "
        << "this layer's backward compute with a third of its length either side.</p>\n";
    lanes_svg(out, s, p, st, std::max(st.start_s, a - pad), std::min(st.end_s, b + pad), "timeline-layer-svg");
    out << "</section>\n";
}

void measured_chart(std::ostream& out, const std::vector<std::pair<double, double>>& pts) {
    // Predicted against measured time per matched op, log-log, with the diagonal; decades ticked
    // and labelled on both axes, the points clipped to the frame.
    const double S = 440, M = 60, top = 10, side = S - M - top;
    double lo = 1e300, hi = 0;
    for (auto [p, m] : pts) {
        if (p > 0) lo = std::min(lo, p), hi = std::max(hi, p);
        if (m > 0) lo = std::min(lo, m), hi = std::max(hi, m);
    }
    if (hi <= 0) return;
    double dlo = std::floor(std::log10(lo)), dhi = std::ceil(std::log10(hi));
    if (dhi <= dlo) dhi = dlo + 1;
    auto X = [&](double v) { return M + (std::log10(v) - dlo) / (dhi - dlo) * side; };
    auto Y = [&](double v) { return top + side - (std::log10(v) - dlo) / (dhi - dlo) * side; };
    out << "<svg id='measured-chart' xmlns='http://www.w3.org/2000/svg' width='" << S << "' height='" << S
        << "' font-family='sans-serif' font-size='11'><defs><clipPath id='measured-frame'><rect x='" << M << "' y='" << top
        << "' width='" << side << "' height='" << side << "'/></clipPath></defs>"
        << "<rect class='frame' x='" << M << "' y='" << top << "' width='" << side << "' height='" << side
        << "' fill='none' stroke='#999'/>";
    for (double d = dlo; d <= dhi + 1e-9; d += 1) {
        const double v = std::pow(10.0, d);
        out << "<line x1='" << X(v) << "' x2='" << X(v) << "' y1='" << top << "' y2='" << top + side << "' stroke='#eee'/>"
            << "<line x1='" << M << "' x2='" << M + side << "' y1='" << Y(v) << "' y2='" << Y(v) << "' stroke='#eee'/>"
            << "<text class='tick xtick' x='" << X(v) << "' y='" << top + side + 15 << "' text-anchor='middle'>" << num("%g", v)
            << "</text><text class='tick ytick' x='" << M - 5 << "' y='" << Y(v) + 4 << "' text-anchor='end'>" << num("%g", v)
            << "</text>";
    }
    out << "<text class='xlabel' x='" << M + side / 2 << "' y='" << S - 18 << "' text-anchor='middle'>predicted ms (log)</text>"
        << "<text class='ylabel' x='14' y='" << top + side / 2 << "' transform='rotate(-90 14 " << top + side / 2
        << ")' text-anchor='middle'>measured ms (log)</text><g clip-path='url(#measured-frame)'>"
        << "<line x1='" << X(std::pow(10.0, dlo)) << "' y1='" << Y(std::pow(10.0, dlo)) << "' x2='" << X(std::pow(10.0, dhi))
        << "' y2='" << Y(std::pow(10.0, dhi)) << "' stroke='#bbb' stroke-dasharray='4'/>";
    for (auto [p, m] : pts)
        if (p > 0 && m > 0)
            out << "<circle class='point' cx='" << num("%.1f", X(p)) << "' cy='" << num("%.1f", Y(m)) << "' r='3' fill='#3182bd'/>";
    out << "</g></svg>\n";
}

// Milliseconds to three significant digits ("0.0123", "4.56", "789", "15498").
std::string ms_text(double ms) {
    if (ms >= 100) return num("%.0f", ms);
    if (ms >= 10) return num("%.1f", ms);
    if (ms >= 1) return num("%.2f", ms);
    return num("%.3g", ms);
}

// The explanation's text as HTML: "## " headings, "  - key = value" lists, the volume table kept
// preformatted, other lines as paragraphs.
void explanation_html(std::ostream& out, const std::string& text) {
    std::istringstream in(text);
    std::string line;
    bool list = false, table = false;
    auto close = [&] {
        if (list) out << "</ul>";
        if (table) out << "</pre>";
        list = table = false;
    };
    while (std::getline(in, line)) {
        if (line.rfind("# ", 0) == 0) {
            close();
            out << "<p><b>" << html_escape(line.substr(2)) << "</b></p>\n";
        } else if (line.rfind("## ", 0) == 0) {
            close();
            out << "<h3>" << html_escape(line.substr(3)) << "</h3>\n";
        } else if (line.rfind("  - ", 0) == 0 || line.rfind("- ", 0) == 0) {
            if (table) close();
            if (!list) out << "<ul>";
            list = true;
            out << "<li>" << html_escape(line.substr(line.find("- ") + 2)) << "</li>";
        } else if (line.rfind("stage ", 0) == 0 && line.find("paper") != std::string::npos) {
            close();
            out << "<pre class='volume'>" << html_escape(line) << "\n";
            table = true;
        } else if (table && !line.empty() && line[0] >= '0' && line[0] <= '9') {
            out << html_escape(line) << "\n";
        } else if (!line.empty()) {
            close();
            out << "<p>" << html_escape(line.rfind("  ", 0) == 0 ? line.substr(2) : line) << "</p>\n";
        }
    }
    close();
}

// The page's head and style, and the run it reports: model, stage, ranks, topology, batch.
void report_head_html(std::ostream& out, const ReportInput& in) {
    const auto& m = in.schedule.meta;
    out << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>zerosim report: " << html_escape(m.model_name)
        << "</title><style>.nofit{color:#b00}.fits{color:#070}body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}"
           "pre{background:#f8f8f8;padding:10px;white-space:pre-wrap;font-size:12px}h2{border-bottom:1px solid #ccc}"
           "summary{cursor:pointer;margin:4px 0}h3{font-size:14px;margin:14px 0 4px}</style></head><body>\n";
    out << "<h1>zerosim report</h1><p>" << html_escape(m.model_name) << " (" << m.total_params << " parameters), ZeRO stage " << m.stage
        << ", " << m.world << " ranks on " << html_escape(in.topology.name) << " (" << in.topology.nodes << " x "
        << in.topology.gpus_per_node << "), " << dtype_name(m.model_dtype) << ", micro batch " << m.micro_batch
        << ", gradient accumulation " << m.grad_accum << ", sequence " << m.seq_len << ". DeepSpeed dialect " << html_escape(m.dialect)
        << ".</p>\n";
}

// The step table of the overlapped prediction, and the what-if's when there is one.
void report_steps_html(std::ostream& out, const ReportInput& in) {
    out << "<section id='steps'><h2>Step time</h2><table><tr><th>step</th><th>compute ms</th><th>communication ms</th>"
           "<th>exposed communication ms</th><th>step ms</th></tr>\n";
    for (const auto& st : in.overlapped.steps)
        out << "<tr><td>" << st.step << "</td><td>" << ms_text(st.compute_s * 1e3) << "</td><td>" << ms_text(st.comm_s * 1e3)
            << "</td><td>" << ms_text(st.exposed_comm_s * 1e3) << "</td><td>" << ms_text(st.step_s() * 1e3) << "</td></tr>\n";
    out << "</table><p>Engine start: " << num("%.3f", in.overlapped.init_s * 1e3) << " ms.</p></section>\n";
    if (!in.what_if_text.empty())   // --what-if: prediction/what_if_compare.hpp's table
        out << "<section id='what-if'><h2>What-if (NOT DeepSpeed's schedule)</h2><pre>" << html_escape(in.what_if_text) << "</pre></section>\n";
}

// Issue 17: what hpZ, qgZ and MiCS move off the NICs, as analysis/zero_variants.hpp counts it.
void report_traffic_html(std::ostream& out, const ReportInput& in) {
    const auto& s = in.schedule;
    const auto& m = s.meta;
    out << "<section id='traffic'><h2>Traffic per rank: inside the node and across nodes</h2><table><tr><th>step</th>"
           "<th>intra-node</th><th>inter-node</th><th>inter-node share</th></tr>\n";
    for (int st = 0; st < m.steps; ++st) {
        const double all = wire_bytes_per_rank(s, st), inter = inter_node_bytes_per_rank(s, st, in.topology.gpus_per_node);
        out << "<tr><td>" << st << "</td><td>" << ds_size_string(static_cast<int64_t>(all - inter)) << "</td><td>"
            << ds_size_string(static_cast<int64_t>(inter)) << "</td><td>" << num("%.1f%%", all > 0 ? inter / all * 100 : 0.0)
            << "</td></tr>\n";
    }
    out << "</table><p>Bytes one rank receives per step, each collective's on its own process group, split by whether "
           "the sender sits on another node (ranks placed in order, " << in.topology.gpus_per_node << " per node).</p></section>\n";
}

// Memory per rank item by item, against the ZeRO paper's and DeepSpeed's estimators, and the fit.
void report_memory_html(std::ostream& out, const ReportInput& in) {
    out << "<section id='memory'><h2>Memory per rank</h2><table><tr><th class='l'>item</th><th>GiB</th><th class='l'>why</th></tr>\n";
    for (const auto& it : in.memory.items)
        out << "<tr><td class='l'>" << html_escape(it.name) << "</td><td>" << num("%.3f", static_cast<double>(it.bytes) / (1 << 30))
            << "</td><td class='l'>" << html_escape(it.why) << "</td></tr>\n";
    out << "<tr><th class='l'>total</th><th>" << num("%.3f", static_cast<double>(in.memory.total()) / (1 << 30))
        << "</th><th></th></tr></table><p>ZeRO paper (" << html_escape(in.memory.paper_formula) << "): "
        << num("%.3f", static_cast<double>(in.memory.paper_bytes) / (1 << 30)) << " GiB.";
    if (in.memory.deepspeed_estimator_bytes >= 0)
        out << " DeepSpeed's estimator (" << html_escape(in.memory.deepspeed_estimator_formula) << "): "
            << num("%.3f", static_cast<double>(in.memory.deepspeed_estimator_bytes) / (1 << 30)) << " GiB.";
    out << "</p><ul>";
    for (const auto& d : in.memory.differences) out << "<li>" << html_escape(d) << "</li>";
    out << "</ul>";
    if (in.fit)
        out << "<p id='fit' class='" << (in.fit->fits() ? "fits" : in.fit->known() ? "nofit" : "unknown") << "'><b>"
            << html_escape(fit_sentence(*in.fit)) << "</b></p><p>Activations: " << html_escape(in.activation_formula)
            << ". The reserve is zerosim's assumed CUDA context, NCCL buffers and allocator fragmentation.</p>";
    out << "</section>\n";
}

// Every collective, grouped per step and phase, each group folded but the last step's; none
// left out, so the step the timeline shows is always there.
void report_ops_html(std::ostream& out, const ReportInput& in) {
    const auto& s = in.schedule;
    out << "<section id='ops'><h2>Collectives</h2><p>Every collective of the schedule, per step and phase (the last step "
           "unfolded). Logged ms: as the comms logger times it; start and end: as the hardware overlaps them.</p>\n";
    const int last_step = s.meta.steps - 1;
    size_t i = 0, total = 0;
    while (i < s.ops.size()) {
        if (!is_collective(s.ops[i].kind)) {
            ++i;
            continue;
        }
        const int step = s.ops[i].step;
        const Phase phase = s.ops[i].phase;
        size_t j = i, count = 0;
        int64_t bytes = 0;
        double logged_ms = 0;
        for (; j < s.ops.size() && (s.ops[j].step == step && (s.ops[j].phase == phase || !is_collective(s.ops[j].kind))); ++j)
            if (is_collective(s.ops[j].kind)) ++count, bytes += s.ops[j].bytes(), logged_ms += in.logged.ops[j].duration() * 1e3;
        total += count;
        out << "<details class='ops-group'" << (step == last_step ? " open" : "") << "><summary>"
            << (step < 0 ? std::string("engine start") : "step " + std::to_string(step)) << ", " << phase_name(phase) << ": "
            << count << " collective(s), " << ds_size_string(bytes) << " logged, " << ms_text(logged_ms)
            << " ms as logged</summary><table><tr><th>#</th><th class='l'>op</th><th class='l'>caller</th><th>size</th>"
               "<th class='l'>algorithm</th><th>logged ms</th><th>start ms</th><th>end ms</th></tr>\n";
        for (size_t k = i; k < j; ++k) {
            const Op& op = s.ops[k];
            if (!is_collective(op.kind)) continue;
            out << "<tr><td>" << op.id << "</td><td class='l'>" << op_record_name(op.kind) << "</td><td class='l'>" << html_escape(op.caller)
                << "</td><td>" << ds_size_string(op.bytes()) << "</td><td class='l'>" << algorithm_name(in.logged.ops[k].algorithm)
                << "/" << protocol_name(in.logged.ops[k].protocol) << "</td><td>" << ms_text(in.logged.ops[k].duration() * 1e3)
                << "</td><td>" << ms_text(in.overlapped.ops[k].start_s * 1e3) << "</td><td>"
                << ms_text(in.overlapped.ops[k].end_s * 1e3) << "</td></tr>\n";
        }
        out << "</table></details>\n";
        i = j;
    }
    out << "<p>" << total << " collectives in all.</p></section>\n";
}

// Matched in order by (op, printed size): a structural diff is the validator's job; this
// section sets predicted beside measured for the ops both logs have.
void report_measured_html(std::ostream& out, const ReportInput& in) {
    const auto& s = in.schedule;
    std::vector<std::pair<double, double>> pts;
    size_t j = 0, matched = 0, missing = 0;
    out << "<section id='measured'><h2>Predicted against measured: " << html_escape(in.measured_name)
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
    if (!in.diff_text.empty()) out << "<h3>Validation (zerosim validate)</h3><pre>" << html_escape(in.diff_text) << "</pre>\n";
    out << "</section>\n";
}

}  // namespace

void write_html_report(std::ostream& out, const ReportInput& in) {
    const auto& s = in.schedule;
    report_head_html(out, in);
    report_steps_html(out, in);
    report_traffic_html(out, in);
    report_pipeline_html(out, in);
    report_dimension_bytes_html(out, in);
    out << "<section id='timeline'><h2>Timeline of the last step</h2><p>One group of identical ranks, one track per stream; "
           "hover a bar for the op.</p>\n";
    timeline_svg(out, s, in.overlapped);
    out << "</section>\n";
    layer_zoom_svg(out, s, in.overlapped);
    report_memory_html(out, in);
    out << "<section id='explain'><h2>Why these collectives</h2>\n";
    explanation_html(out, in.explanation);
    out << "</section>\n";
    report_ops_html(out, in);
    if (in.measured) report_measured_html(out, in);
    out << "<footer><p>Made by zerosim; self-contained: no network access needed.</p></footer></body></html>\n";
}

}  // namespace zerosim
