// `zerosim sweep --plot`: step time and memory per rank against ranks, one series per topology,
// stage and setting. What a reader needs to tell the series apart and read values off: ticks in
// engineering units, a y range that shows the differences (its start said when it is not 0),
// log-scale ranks, the Okabe-Ito colour-blind-safe palette with a dash pattern and a marker shape
// per series (so identical series, such as stages 1 and 2 of one model, stay visible; with several
// topologies the colour is the stage and settings and the dash and marker the topology, so twelve
// series read as four colours in three styles), legends in words ("stage 2, dgx-h100") grouped by
// topology, a GPU-memory line per GPU size, notes wrapped under each title, and hollow crossed
// markers where the rank does not fit its GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "analysis/fit.hpp"
#include "schedule/what_if.hpp"
#include "prediction/sweep.hpp"
#include "html_text.hpp"

namespace zerosim {

namespace {

// Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
// deficiency; yellow last, as it reads poorly on white.
const char* const kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"};
const char* const kDashes[] = {"", "7 3", "2 2", "9 3 2 3", "4 4"};
const int kShapes = 6;

// A marker of shape k centred on (x, y), radius r, as an SVG path.
std::string marker_path(int k, double x, double y, double r) {
    char b[256];
    switch (k % kShapes) {
        case 0:  // circle
            std::snprintf(b, sizeof b, "M%.1f,%.1f a%.1f,%.1f 0 1,0 %.1f,0 a%.1f,%.1f 0 1,0 %.1f,0 Z", x - r, y, r, r, 2 * r, r, r,
                          -2 * r);
            break;
        case 1: std::snprintf(b, sizeof b, "M%.1f,%.1f h%.1f v%.1f h%.1f Z", x - r, y - r, 2 * r, 2 * r, -2 * r); break;  // square
        case 2: std::snprintf(b, sizeof b, "M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f Z", x, y - r * 1.2, x + r * 1.1, y + r * 0.8, x - r * 1.1, y + r * 0.8); break;
        case 3: std::snprintf(b, sizeof b, "M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f Z", x, y - r * 1.3, x + r, y, x, y + r * 1.3, x - r, y); break;
        case 4: std::snprintf(b, sizeof b, "M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f Z", x, y + r * 1.2, x + r * 1.1, y - r * 0.8, x - r * 1.1, y - r * 0.8); break;
        default:  // pentagon-ish: a square turned into a house
            std::snprintf(b, sizeof b, "M%.1f,%.1f L%.1f,%.1f V%.1f H%.1f V%.1f Z", x, y - r * 1.3, x + r, y - r * 0.3, y + r, x - r, y - r * 0.3);
    }
    return b;
}

// A step of 1, 2, 2.5 or 5 x 10^k giving about `want` intervals over `span`.
double nice_step(double span, int want) {
    double raw = span / want, p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * p >= raw) return m * p;
    return 10 * p;
}

// The axis's unit, chosen by the range's top so ticks read "250" or "1.25", never "1.25e+03":
// time in µs, ms or s (values in ms), memory in MiB, GiB or TiB (values in GiB).
struct AxisUnit {
    const char* name;
    double per;   // values per unit
};
AxisUnit time_unit(double top_ms) { return top_ms >= 2000 ? AxisUnit{"s", 1000} : top_ms >= 2 ? AxisUnit{"ms", 1} : AxisUnit{"\u00b5s", 1e-3}; }
AxisUnit memory_unit(double top_gib) {
    return top_gib >= 2048 ? AxisUnit{"TiB", 1024} : top_gib >= 2 ? AxisUnit{"GiB", 1} : AxisUnit{"MiB", 1.0 / 1024};
}
std::string tick_label(double v, AxisUnit u) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", std::round(v / u.per * 1000) / 1000);
    return b;
}

using prediction_detail::html_escape;

struct Series {
    std::string label;      // "stage 2, dgx-h100, reduce_bucket_size=5e8"
    std::string topology;   // "dgx-h100"
    std::vector<const SweepResult*> points;
    // Colour: the series' stage and settings, the same on every topology. Style (dash and marker):
    // its topology where the sweep has several, else the same as the colour.
    size_t colour = 0, style = 0;
};

double memory_gib(const SweepResult& r) {
    return static_cast<double>(r.memory_bytes + r.activation_bytes + kFrameworkReserveBytes) / static_cast<double>(int64_t{1} << 30);
}

// The series of a sweep, one per topology, stage and settings (and what-if), ordered by
// topology, stage and first point's grid order; each series' points by ranks.
std::vector<Series> sweep_plot_series(const SweepSpec& spec, const std::vector<SweepResult>& rows) {
    std::map<std::string, Series> by_key;   // ordered by topology, stage, settings
    for (const auto& r : rows) {
        if (!r.error.empty()) continue;
        std::string topo = r.point.topology.substr(r.point.topology.find_last_of('/') + 1);
        if (topo.size() > 5 && topo.substr(topo.size() - 5) == ".json") topo.resize(topo.size() - 5);
        std::string label = "stage " + std::to_string(r.point.stage) + ", " + topo;
        for (size_t i = 0; i < spec.settings.size(); ++i) {
            const std::string& k = spec.settings[i].key;
            label += ", " + k.substr(k.find_last_of('.') + 1) + "=" + r.point.values[i];
        }
        if (!spec.what_if.empty() && what_if_applies(spec.what_if, r.point.stage)) label += ", what-if " + spec.what_if;
        char key[32];
        std::snprintf(key, sizeof key, "%04zu", r.point.index);   // first point's grid order
        auto it = std::find_if(by_key.begin(), by_key.end(), [&](const auto& kv) { return kv.second.label == label; });
        if (it == by_key.end())
            it = by_key.emplace(topo + "\x01" + std::to_string(r.point.stage) + "\x01" + key, Series{label, topo, {}}).first;
        it->second.points.push_back(&r);
    }
    std::vector<Series> series;
    std::vector<std::string> withins, topologies;   // first-seen order
    auto index_of = [](std::vector<std::string>& seen, const std::string& v) {
        auto it = std::find(seen.begin(), seen.end(), v);
        if (it != seen.end()) return static_cast<size_t>(it - seen.begin());
        seen.push_back(v);
        return seen.size() - 1;
    };
    for (auto& [k, s] : by_key) {
        std::sort(s.points.begin(), s.points.end(), [](auto* a, auto* b) { return a->world < b->world; });
        std::string within = s.label;
        within.erase(within.find(", " + s.topology), 2 + s.topology.size());
        s.colour = index_of(withins, within);
        s.style = index_of(topologies, s.topology);
        series.push_back(std::move(s));
    }
    if (topologies.size() == 1)
        for (auto& s : series) s.style = s.colour;
    return series;
}

// A GPU's memory as a line on the memory panel: one per distinct size, with the topologies that have it.
struct GpuLine {
    double gib = 0;
    std::string topologies;   // "aws-p4d, gcp-a3-ultra"
};

// What both panels share: the page's sizes (the panels' top margin T grows with their notes), the
// ranks' log-scale x axis, the GPUs' memory, and each series' line width and marker size.
struct SweepPlotFrame {
    double W = 920, H = 360, L = 90, R = 24, T = 46, B = 56, legend_row = 22;
    double pw = W - L - R, ph = H - T - B;
    double wmin = 1e300, wmax = 0;
    std::vector<GpuLine> gpus;   // by size, ascending
    double n_series = 1;
    size_t n_topologies = 1;

    // Room for `lines` lines of notes under a panel's title (the first at y0 + 40, 15 px apart).
    void make_room_for_notes(size_t lines) {
        T = 30 + 16 * static_cast<double>(std::max<size_t>(1, lines));
        H = T + 258 + B;
        ph = H - T - B;
    }

    // 4% of the width either side, so the end markers sit inside the frame.
    double x_of(double w) const {
        return L + pw * (0.04 + 0.92 * (std::log2(w) - std::log2(wmin)) / (std::log2(wmax) - std::log2(wmin)));
    }
    // Earlier series are drawn wider and with bigger markers, so a later series on top of an
    // identical one leaves it visible as a border.
    double line_width(size_t k) const { return 1.6 + 2.4 * (n_series - 1 - static_cast<double>(k)) / std::max(1.0, n_series - 1); }
    double marker_radius(size_t k) const { return 4.0 + 2.5 * (n_series - 1 - static_cast<double>(k)) / std::max(1.0, n_series - 1); }
};

SweepPlotFrame sweep_plot_frame(const std::vector<Series>& series) {
    SweepPlotFrame f;
    std::map<int64_t, std::vector<std::string>> gpus;   // bytes -> topologies
    for (const auto& s : series)
        for (const auto* r : s.points) {
            f.wmin = std::min(f.wmin, static_cast<double>(r->world));
            f.wmax = std::max(f.wmax, static_cast<double>(r->world));
            if (r->gpu_memory_bytes <= 0) continue;
            auto& names = gpus[r->gpu_memory_bytes];
            if (std::find(names.begin(), names.end(), s.topology) == names.end()) names.push_back(s.topology);
        }
    for (const auto& [bytes, names] : gpus) {
        GpuLine g{static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30), ""};
        for (const auto& n : names) g.topologies += (g.topologies.empty() ? "" : ", ") + n;
        f.gpus.push_back(g);
    }
    std::vector<std::string> topologies;
    for (const auto& s : series)
        if (std::find(topologies.begin(), topologies.end(), s.topology) == topologies.end()) topologies.push_back(s.topology);
    f.n_topologies = std::max<size_t>(1, topologies.size());
    if (f.wmax <= 0) f.wmin = f.wmax = 1;
    const bool one_world = f.wmax == f.wmin;
    if (one_world) f.wmin /= 2, f.wmax *= 2;
    f.n_series = static_cast<double>(std::max<size_t>(series.size(), 1));
    return f;
}

// The value a panel plots of a sweep point: step time in ms, or memory per rank in GiB.
using SweepValue = double (*)(const SweepResult&);

double sweep_step_ms(const SweepResult& r) { return r.step_ms; }

// A panel's y axis: from ylo to yhi in steps of `step`.
struct SweepYAxis {
    double ylo = 0, yhi = 1, step = 1;

    // The y of value v in the panel whose top is at y0.
    double y_of(double v, double y0, const SweepPlotFrame& f) const { return y0 + f.T + f.ph - (v - ylo) / (yhi - ylo) * f.ph; }
};

SweepYAxis sweep_y_axis(const std::vector<Series>& series, SweepValue value, const SweepPlotFrame& f, bool from_zero, bool is_time) {
    double lo = 1e300, hi = -1e300;
    for (const auto& s : series)
        for (const auto* r : s.points) lo = std::min(lo, value(*r)), hi = std::max(hi, value(*r));
    if (!is_time)
        for (const auto& g : f.gpus) hi = std::max(hi, g.gib), lo = std::min(lo, g.gib);
    if (hi < lo) lo = 0, hi = 1;
    // Start at 0 unless the values sit far above it: then a range around them shows the
    // differences, and the plot says where the axis starts.
    if (from_zero || lo < 0.35 * hi) lo = 0;
    double span = hi - lo > 0 ? hi - lo : std::max(std::fabs(hi), 1.0);
    SweepYAxis y;
    y.step = nice_step(span, 5);
    y.ylo = lo == 0 ? 0 : std::floor((lo - 0.05 * span) / y.step) * y.step;
    y.yhi = std::ceil((hi + 0.02 * span) / y.step) * y.step;
    if (y.ylo < 0) y.ylo = 0;
    if (y.yhi <= y.ylo) y.yhi = y.ylo + y.step;
    // At least 9 px between the extreme values and the frame, so markers stay inside it.
    for (int i = 0; i < 8 && (y.yhi - hi) / (y.yhi - y.ylo) * f.ph < 9; ++i) y.yhi += y.step;
    for (int i = 0; i < 8 && y.ylo > 0 && (lo - y.ylo) / (y.yhi - y.ylo) * f.ph < 9; ++i) y.ylo = std::max(0.0, y.ylo - y.step);
    return y;
}

// A panel's title, frame, ticks and axis labels, with a break mark and a note when y does not
// start at 0.
void sweep_panel_axes_svg(std::ostream& out, const SweepPlotFrame& f, const SweepYAxis& ya, double y0, const std::string& title,
                          AxisUnit unit, bool is_time) {
    const double L = f.L, T = f.T, pw = f.pw, ph = f.ph;
    out << "<text class='title' x='" << L << "' y='" << y0 + 24 << "' font-size='15' font-weight='bold'>" << html_escape(title) << "</text>\n";
    out << "<rect class='frame' x='" << L << "' y='" << y0 + T << "' width='" << pw << "' height='" << ph
        << "' fill='none' stroke='#777'/>\n";
    for (double w = std::exp2(std::ceil(std::log2(f.wmin))); w <= f.wmax * 1.0001; w *= 2) {
        out << "<line x1='" << f.x_of(w) << "' x2='" << f.x_of(w) << "' y1='" << y0 + T << "' y2='" << y0 + T + ph << "' stroke='#eee'/>";
        out << "<text class='tick xtick' x='" << f.x_of(w) << "' y='" << y0 + T + ph + 16 << "' text-anchor='middle'>"
            << static_cast<int64_t>(w) << "</text>\n";
    }
    out << "<text class='xlabel' x='" << L + pw / 2 << "' y='" << y0 + T + ph + 38
        << "' text-anchor='middle'>data-parallel ranks (log scale)</text>\n";
    for (double v = ya.ylo; v <= ya.yhi + ya.step * 1e-6; v += ya.step) {
        out << "<line x1='" << L << "' x2='" << L + pw << "' y1='" << ya.y_of(v, y0, f) << "' y2='" << ya.y_of(v, y0, f) << "' stroke='#eee'/>";
        out << "<text class='tick ytick' x='" << L - 6 << "' y='" << ya.y_of(v, y0, f) + 4 << "' text-anchor='end'>"
            << tick_label(v, unit) << "</text>\n";
    }
    out << "<text class='ylabel' transform='translate(" << 16 << "," << y0 + T + ph / 2 << ") rotate(-90)' text-anchor='middle'>"
        << (is_time ? "step time (" : "memory per rank (") << unit.name << ")</text>\n";
    if (ya.ylo > 0) {
        // The axis does not start at zero: a break mark on it and a note.
        double yb = y0 + T + ph;
        out << "<path class='axis-break' d='M" << L - 6 << "," << yb - 4 << " l12,-5 M" << L - 6 << "," << yb + 1
            << " l12,-5' stroke='#333' stroke-width='1.5'/>";
    }
}

// Series that coincide in a panel ("a = b; c = d"), said so that none seems missing.
std::string sweep_identical_series(const std::vector<Series>& series, SweepValue value) {
    std::string same;
    for (size_t k = 1; k < series.size(); ++k)
        for (size_t j = 0; j < k; ++j) {
            const auto &a = series[j].points, &b = series[k].points;
            bool eq = a.size() == b.size();
            for (size_t i = 0; eq && i < a.size(); ++i)
                eq = a[i]->world == b[i]->world && std::fabs(value(*a[i]) - value(*b[i])) <= 1e-9 * std::max(1.0, std::fabs(value(*a[i])));
            if (eq) {
                same += (same.empty() ? "" : "; ") + series[k].label + " = " + series[j].label;
                break;
            }
        }
    return same;
}

// Each series' line and markers in the panel whose top is at y0, clipped to the plot area. The
// markers of points that do not fit come last, on top: a series identical in this panel but on a
// larger GPU (memory per rank is the same on every topology) must not hide them.
void sweep_series_svg(std::ostream& out, const SweepPlotFrame& f, const SweepYAxis& ya, const std::vector<Series>& series,
                      SweepValue value, double y0) {
    out << "<g clip-path='url(#plot-area)' transform='translate(0," << y0 << ")'>\n";
    for (size_t k = 0; k < series.size(); ++k) {
        const char* c = kColours[series[k].colour % 8];
        std::string d;
        for (const auto* r : series[k].points) {
            char seg[64];
            std::snprintf(seg, sizeof seg, "%s%.1f,%.1f", d.empty() ? "M" : " L", f.x_of(static_cast<double>(r->world)),
                          ya.y_of(value(*r), y0, f) - y0);
            d += seg;
        }
        out << "<path class='series' data-series='" << k << "' d='" << d << "' fill='none' stroke='" << c
            << "' stroke-width='" << f.line_width(k) << "' stroke-dasharray='" << kDashes[series[k].style % 5] << "'/>\n";
    }
    for (bool nofit : {false, true})
        for (size_t k = 0; k < series.size(); ++k) {
            const char* c = kColours[series[k].colour % 8];
            for (const auto* r : series[k].points) {
                if ((r->fits == "no") != nofit) continue;
                const double x = f.x_of(static_cast<double>(r->world)), y = ya.y_of(value(*r), y0, f) - y0;
                out << "<path class='marker " << (nofit ? "nofit" : "fit") << "' data-series='" << k << "' d='"
                    << marker_path(static_cast<int>(series[k].style), x, y, f.marker_radius(k)) << "' fill='" << (nofit ? "white" : c)
                    << "' stroke='" << c << "' stroke-width='1.5'/>";
                if (nofit)
                    out << "<path class='cross' d='M" << x - 3 << "," << y - 3 << " L" << x + 3 << "," << y + 3 << " M" << x - 3 << ","
                        << y + 3 << " L" << x + 3 << "," << y - 3 << "' stroke='" << c << "' stroke-width='1.2'/>";
                out << "\n";
            }
        }
    out << "</g>";
}

// The notes under a panel's title, wrapped to its width: where the y axis starts when not at 0,
// and the series that coincide.
std::vector<std::string> sweep_panel_notes(const SweepPlotFrame& f, const std::vector<Series>& series, SweepValue value, bool from_zero,
                                           bool is_time) {
    const SweepYAxis ya = sweep_y_axis(series, value, f, from_zero, is_time);
    const AxisUnit unit = is_time ? time_unit(ya.yhi) : memory_unit(ya.yhi);
    std::vector<std::string> notes;
    if (ya.ylo > 0) notes.push_back("y axis starts at " + tick_label(ya.ylo, unit) + " " + unit.name + ", not 0");
    const std::string same = sweep_identical_series(series, value);
    if (!same.empty()) notes.push_back("identical: " + same);
    // About 6.6 px per character at 12 px sans-serif: lines of the panel's width, cut after "; "
    // or else at a space.
    const size_t width = static_cast<size_t>(f.pw / 6.6);
    std::vector<std::string> lines;
    for (std::string rest : notes) {
        while (rest.size() > width) {
            size_t cut = rest.rfind("; ", width);
            cut = cut != std::string::npos && cut > width / 2 ? cut + 1 : rest.rfind(' ', width);
            if (cut == std::string::npos || cut == 0) cut = width;
            lines.push_back(rest.substr(0, cut));
            rest = rest.substr(rest[cut] == ' ' ? cut + 1 : cut);
        }
        lines.push_back(rest);
    }
    return lines;
}

// The GPUs' memory on the memory panel: a line per size, labelled at its right end with the
// topologies that have it; labels of lines closer than a line of text move apart.
void sweep_gpu_lines_svg(std::ostream& out, const SweepPlotFrame& f, const SweepYAxis& ya, double y0, AxisUnit unit) {
    double last_label = -1e300;
    for (auto g = f.gpus.rbegin(); g != f.gpus.rend(); ++g) {   // top down
        const double y = ya.y_of(g->gib, y0, f);
        const double label = std::max(y - 5, last_label + 13);
        last_label = label;
        out << "<line class='gpu-memory' x1='" << f.L << "' x2='" << f.L + f.pw << "' y1='" << y << "' y2='" << y
            << "' stroke='#b00' stroke-dasharray='6 3'/><text class='gpu-memory-label' x='" << f.L + f.pw - 4 << "' y='" << label
            << "' text-anchor='end' fill='#b00' stroke='white' stroke-width='3' paint-order='stroke'>GPU memory " << tick_label(g->gib, unit) << " " << unit.name << ": "
            << html_escape(g->topologies) << "</text>\n";
    }
}

// One panel, its top at y0: `value` of every series against ranks, its notes under the title, and
// the GPUs' memory as lines on the memory panel.
void sweep_panel_svg(std::ostream& out, const SweepPlotFrame& f, const std::vector<Series>& series, const char* id, double y0,
                     const std::string& title, SweepValue value, bool from_zero, bool is_time) {
    const SweepYAxis ya = sweep_y_axis(series, value, f, from_zero, is_time);
    const AxisUnit unit = is_time ? time_unit(ya.yhi) : memory_unit(ya.yhi);
    out << "<g class='panel' id='" << id << "'>\n";
    sweep_panel_axes_svg(out, f, ya, y0, title, unit, is_time);
    const auto notes = sweep_panel_notes(f, series, value, from_zero, is_time);
    for (size_t i = 0; i < notes.size(); ++i)
        out << "<text class='note' x='" << f.L << "' y='" << y0 + 40 + 15 * static_cast<double>(i) << "' fill='#333'>"
            << html_escape(notes[i]) << "</text>\n";
    if (!is_time) sweep_gpu_lines_svg(out, f, ya, y0, unit);
    sweep_series_svg(out, f, ya, series, value, y0);
    out << "</g>\n";
}

// The legend's rows: each series, and where the sweep has several topologies, a heading before
// each topology's series (its GPU memory beside it).
size_t sweep_legend_rows(const SweepPlotFrame& f, const std::vector<Series>& series) {
    size_t rows = series.size() + 1;   // and the hollow-marker note
    for (size_t k = 0; f.n_topologies > 1 && k < series.size(); ++k) rows += k == 0 || series[k].topology != series[k - 1].topology;
    return rows;
}

// The legend under the panels: each series' line, marker and label (grouped by topology when
// there are several: the colour is the stage and settings, the dash and marker the topology),
// and what a hollow crossed marker means.
void sweep_legend_svg(std::ostream& out, const SweepPlotFrame& f, const std::vector<Series>& series) {
    const double L = f.L;
    out << "<g class='legend'>\n";
    double y = 2 * f.H + 24;
    for (size_t k = 0; k < series.size(); ++k) {
        if (f.n_topologies > 1 && (k == 0 || series[k].topology != series[k - 1].topology)) {
            std::string gpu;
            for (const auto& g : f.gpus)
                if ((", " + g.topologies + ",").find(", " + series[k].topology + ",") != std::string::npos)
                    gpu = " (GPU memory " + tick_label(g.gib, AxisUnit{"GiB", 1}) + " GiB)";
            out << "<text class='legend-group' x='" << L << "' y='" << y + 4 << "' font-weight='bold'>"
                << html_escape(series[k].topology + gpu) << "</text>\n";
            y += f.legend_row;
        }
        const char* c = kColours[series[k].colour % 8];
        const int shape = static_cast<int>(series[k].style);
        out << "<g class='entry' data-series='" << k << "'><line x1='" << L << "' x2='" << L + 36 << "' y1='" << y << "' y2='" << y
            << "' stroke='" << c << "' stroke-width='" << f.line_width(k) << "' stroke-dasharray='" << kDashes[series[k].style % 5]
            << "'/><path d='" << marker_path(shape, L + 18, y, 4.5) << "' fill='" << c << "' stroke='" << c << "'/><text x='" << L + 46
            << "' y='" << y + 4 << "'>" << html_escape(series[k].label) << "</text></g>\n";
        y += f.legend_row;
    }
    out << "<g class='entry-note'><path d='" << marker_path(0, L + 18, y, 4.5) << "' fill='white' stroke='#555'/><path d='M"
        << L + 15 << "," << y - 3 << " L" << L + 21 << "," << y + 3 << " M" << L + 15 << "," << y + 3 << " L" << L + 21 << "," << y - 3
        << "' stroke='#555'/><text x='" << L + 46 << "' y='" << y + 4
        << "'>hollow and crossed: does not fit the GPU (model states + activations + reserve above its memory)</text></g>\n";
    out << "</g>\n";
}

}  // namespace

void write_sweep_svg(std::ostream& out, const SweepSpec& spec, const std::vector<SweepResult>& rows) {
    const std::vector<Series> series = sweep_plot_series(spec, rows);
    SweepPlotFrame f = sweep_plot_frame(series);
    f.make_room_for_notes(std::max(sweep_panel_notes(f, series, sweep_step_ms, false, true).size(),
                                   sweep_panel_notes(f, series, memory_gib, true, false).size()));
    const double total_h = 2 * f.H + 40 + f.legend_row * static_cast<double>(sweep_legend_rows(f, series) + 1);
    out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << f.W << "' height='" << total_h << "' viewBox='0 0 " << f.W << " "
        << total_h << "' font-family='sans-serif' font-size='12'>\n";
    out << "<defs><clipPath id='plot-area'><rect x='" << f.L << "' y='" << f.T << "' width='" << f.W - f.L - f.R << "' height='"
        << f.H - f.T - f.B << "'/></clipPath></defs>\n";
    sweep_panel_svg(out, f, series, "step-time", 0, "Step time (the last predicted step)", sweep_step_ms, false, true);
    sweep_panel_svg(out, f, series, "memory", f.H, "Memory per rank: model states + activations + framework reserve", memory_gib, true,
                    false);
    sweep_legend_svg(out, f, series);
    out << "</svg>\n";
}

}  // namespace zerosim
