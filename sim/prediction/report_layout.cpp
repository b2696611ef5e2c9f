// The report's sections for a 3D layout (prediction/report.hpp): the pipeline's step per stage, one
// track per stage's compute queue drawn from the stages' joint simulation (timing/engine.hpp
// simulate_ranks), the stage table, and the bytes each dimension sends per link class.
#include <algorithm>
#include <cstdio>
#include <string>

#include "html_text.hpp"
#include "prediction/report.hpp"
#include "prediction/stage_time.hpp"
#include "schedule/ordering.hpp"

namespace zerosim {

using prediction_detail::html_escape;

namespace {

std::string fixed(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

// A colour per stretch of a stage's compute queue: a micro batch's forward or backward (its compute
// and the tensor, sequence and expert collectives between its layers), sends and receives, the step's
// optimizer, and ZeRO's and the rest.
const char* stage_colour(const Op& op) {
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return "#969696";
    if (op.kind == OpKind::Compute && op.compute == ComputeKind::OptimizerStep) return "#31a354";
    const bool in_layers = op.kind == OpKind::Compute || op.group == GroupKind::Tensor || op.group == GroupKind::Sequence ||
                           op.group == GroupKind::Expert;
    if (in_layers && op.phase == Phase::Forward) return "#9ecae1";
    if (in_layers && op.phase == Phase::Backward) return "#6baed6";
    return "#de2d26";
}

void stage_tracks_svg(std::ostream& out, const ReportInput& in, int step, double t0, double t1) {
    const double W = 1100, L = 90, h = 30;
    const auto& stages = *in.stages;
    out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << h * static_cast<double>(stages.size()) + 50
        << "' font-family='sans-serif' font-size='11'>\n";
    for (size_t k = 0; k < stages.size(); ++k) {
        const Schedule& s = *stages[k];
        const Prediction& p = *(*in.stage_timings)[k];
        const double y = 10 + h * static_cast<double>(k);
        out << "<text x='4' y='" << y + 16 << "'>stage " << s.meta.pipe_stage << "</text>\n";
        // Bars of one colour less than half a pixel apart are drawn as one (a micro batch's layers), titled
        // with what they hold, so a stage is tens of bars, not thousands of slivers.
        struct Bar {
            double x0 = 0, x1 = -1;
            const char* colour = "";
            int ops = 0;
            double ms = 0;
            std::string first;
        } bar;
        auto flush = [&] {
            if (bar.ops == 0) return;
            out << "<rect x='" << fixed("%.2f", bar.x0) << "' y='" << y << "' width='" << fixed("%.2f", std::max(0.5, bar.x1 - bar.x0))
                << "' height='" << h - 8 << "' fill='" << bar.colour << "'><title>" << html_escape(bar.first)
                << (bar.ops > 1 ? " and " + std::to_string(bar.ops - 1) + " more ops" : std::string()) << ", " << fixed("%.3f", bar.ms)
                << " ms</title></rect>\n";
            bar = Bar{};
        };
        for (size_t i = 0; i < s.ops.size(); ++i) {
            const Op& op = s.ops[i];
            const OpTiming& t = p.ops[i];
            if (op.step != step || !t.simulated || queue_of(op.stream) != Queue::Default) continue;
            const double a = std::clamp((t.start_s + t.wait_s - t0) / (t1 - t0), 0.0, 1.0),
                         b = std::clamp((t.end_s - t0) / (t1 - t0), 0.0, 1.0);
            if (b <= a) continue;   // waiting only: the white between bars is the bubble
            const double x0 = L + a * (W - L), x1 = L + b * (W - L);
            const char* colour = stage_colour(op);
            if (bar.ops > 0 && (colour != bar.colour || x0 > bar.x1 + 0.5)) flush();
            if (bar.ops == 0) {
                bar.x0 = x0;
                bar.colour = colour;
                bar.first = (op.kind == OpKind::Compute ? std::string(compute_kind_name(op.compute)) + " " + op.module_name
                                                        : std::string(op_record_name(op.kind)) + " " + op.caller) +
                            " (micro " + std::to_string(op.micro) + ")";
            }
            bar.x1 = std::max(bar.x1, x1);
            bar.ms += (t.end_s - t.start_s - t.wait_s) * 1e3;
            ++bar.ops;
        }
        flush();
    }
    const double axis = 10 + h * static_cast<double>(stages.size());
    out << "<text x='" << L << "' y='" << axis + 14 << "'>0 ms</text><text x='" << W - 80 << "' y='" << axis + 14 << "'>"
        << fixed("%.1f", (t1 - t0) * 1e3) << " ms</text>\n";
    const std::pair<const char*, const char*> legend[] = {{"#9ecae1", "forward (with its tp/sp/ep collectives)"},
                                                          {"#6baed6", "backward"}, {"#969696", "send/recv"},
                                                          {"#31a354", "optimizer"}, {"#de2d26", "ZeRO and the rest"}};
    double x = L + 120;
    for (const auto& [colour, name] : legend) {
        out << "<rect x='" << x << "' y='" << axis + 4 << "' width='12' height='12' fill='" << colour << "'/><text x='" << x + 16
            << "' y='" << axis + 14 << "'>" << name << "</text>";
        x += 30 + 7.0 * static_cast<double>(std::string(name).size());
    }
    out << "</svg>\n";
}

}  // namespace

void report_pipeline_html(std::ostream& out, const ReportInput& in) {
    if (!in.stages || in.stages->empty() || !in.stage_timings) return;
    const auto rows = stage_times(*in.stages, *in.stage_timings);
    if (rows.empty()) return;
    double t0 = 1e300, t1 = 0;
    for (const Prediction* p : *in.stage_timings)
        for (const auto& st : p->steps)
            if (st.step == rows[0].step) t0 = std::min(t0, st.start_s), t1 = std::max(t1, st.end_s);
    if (!(t1 > t0)) return;
    out << "<section id='pipeline'><h2>The pipeline's last step, per stage</h2><p>One rank of each stage, simulated together: "
           "each track is the stage's compute queue (its compute, its sends and receives, its tensor-parallel collectives); "
           "the white between bars is the time it waits for other stages, the bubble.</p>\n";
    stage_tracks_svg(out, in, rows[0].step, t0, t1);
    out << "<table><tr><th>stage</th><th>rank</th><th>compute ms</th><th>bubble ms</th><th>bubble %</th><th>pipe ms</th>"
           "<th>tensor ms</th><th>sequence ms</th><th>expert ms</th><th>ZeRO ms</th><th>exposed ms</th><th>step ms</th></tr>\n";
    for (const StageTime& r : rows) {
        out << "<tr><td>" << r.stage << "</td><td>" << r.rank << "</td><td>" << fixed("%.3f", r.compute_s * 1e3) << "</td><td>"
            << fixed("%.3f", r.bubble_s * 1e3) << "</td><td>" << fixed("%.1f", 100 * r.bubble_fraction()) << "</td>";
        for (double c : r.comm_s) out << "<td>" << fixed("%.3f", c * 1e3) << "</td>";
        out << "<td>" << fixed("%.3f", r.exposed_s * 1e3) << "</td><td>" << fixed("%.3f", r.step_s * 1e3) << "</td></tr>\n";
    }
    out << "</table></section>\n";
}

void report_dimension_bytes_html(std::ostream& out, const ReportInput& in) {
    if (!in.schedule.meta.layout.is_3d() || in.overlapped.steps.empty()) return;
    const int step = in.overlapped.steps.back().step;
    const std::vector<const Schedule*> ranks = in.stages && !in.stages->empty() ? *in.stages : std::vector<const Schedule*>{&in.schedule};
    out << "<section id='dimensions'><h2>Bytes per dimension and link, per rank and step</h2><table><tr><th>stage</th>"
           "<th class='l'>dimension</th><th>inside the node</th><th>through the NICs</th><th>of which across the spine</th></tr>\n";
    for (const Schedule* s : ranks) {
        const auto bytes = link_bytes(*s, in.topology, step);
        for (size_t d = 0; d < bytes.size(); ++d) {
            if (bytes[d].inside_node + bytes[d].nic <= 0) continue;
            out << "<tr><td>" << s->meta.pipe_stage << "</td><td class='l'>" << dimension_name(static_cast<Dimension>(d)) << "</td><td>"
                << ds_size_string(static_cast<int64_t>(bytes[d].inside_node)) << "</td><td>"
                << ds_size_string(static_cast<int64_t>(bytes[d].nic)) << "</td><td>"
                << ds_size_string(static_cast<int64_t>(bytes[d].spine)) << "</td></tr>\n";
        }
    }
    out << "</table><p>What each stage's rank sends in step " << step << ", each op planned on its own group's placement (ranks "
        << in.topology.gpus_per_node << " per node, DeepSpeed's grid: tensor innermost, pipe outermost); the spine column is "
           "the NIC bytes bound for nodes under another leaf switch"
        << (in.topology.nodes_per_leaf > 0 ? " (" + std::to_string(in.topology.nodes_per_leaf) + " nodes per leaf)" : " (one leaf: none)")
        << ", each group's shared evenly over its members on other nodes.</p></section>\n";
}

}  // namespace zerosim
