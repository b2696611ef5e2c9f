#include "prediction/need_layout.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace zerosim {

namespace {

std::string layout_label(const SweepPoint& p) {
    return "pp " + std::to_string(p.pp) + " x tp " + std::to_string(p.tp) + (p.sp > 1 ? " x sp " + std::to_string(p.sp) : "") +
           (p.ep > 1 ? " (ep " + std::to_string(p.ep) + ")" : "");
}

// Why DeepSpeed cannot run a layout on `world` ranks at ZeRO stage `stage`; "" when it can.
std::string cannot_run(const SweepPoint& p, int64_t world, int stage) {
    const int64_t cut = p.pp * p.tp * p.sp;
    if (world % cut != 0) return "pp x tp x sp does not divide the " + std::to_string(world) + " ranks";
    if ((world / cut) % p.ep != 0) return "ep does not divide the data-parallel ranks";
    if (p.pp > 1 && stage > 1) return "a pipeline runs ZeRO stage 0 or 1 only";
    return "";
}

}  // namespace

Result<LayoutAnswer> solve_layout(const NeedProblem& p, const LayoutCandidates& c) {
    auto topo = scale_to_nodes(p.topology, p.nodes > 0 ? p.nodes : p.topology.nodes);
    if (!topo) return topo.error();
    SweepSpec spec;
    spec.steps = p.steps;
    spec.seq_len = p.seq_len;
    spec.activation_checkpointing = c.activation_checkpointing;
    spec.fabric = p.fabric;   // --fabric and its what-ifs, as sweep's layout points take them
    spec.pipe_engine = p.pipe_engine;
    spec.pp_partition = p.pp_partition;
    LayoutAnswer a;
    for (int64_t pp : c.pp)
        for (int64_t tp : c.tp)
            for (int64_t sp : c.sp)
                for (int64_t ep : c.ep) {
                    SweepPoint pt;
                    pt.topology = topo->name;
                    pt.nodes = topo->nodes;
                    pt.stage = p.cfg.zero.stage;
                    pt.pp = pp, pt.tp = tp, pt.sp = sp, pt.ep = ep;
                    if (auto why = cannot_run(pt, topo->total_gpus(), pt.stage); !why.empty()) {
                        a.left_out.push_back(layout_label(pt) + ": " + why);
                        continue;
                    }
                    SweepResult r;
                    r.point = pt;
                    r.world = topo->total_gpus();
                    predict_layout_point(spec, p.model, p.cfg, topo.value(), pt, r);
                    a.tried.push_back(std::move(r));
                }
    if (a.tried.empty())
        return Error{"", "--pp/--tp/--sp/--ep", "not one candidate layout runs on " + std::to_string(topo->total_gpus()) + " ranks"};
    std::stable_sort(a.tried.begin(), a.tried.end(), [](const SweepResult& x, const SweepResult& y) {
        if (x.error.empty() != y.error.empty()) return x.error.empty();
        return x.step_ms < y.step_ms;
    });
    for (size_t i = 0; i < a.tried.size() && a.best < 0; ++i)
        if (a.tried[i].error.empty() && a.tried[i].fits == "yes") a.best = static_cast<int>(i);
    return a;
}

void write_layout_answer(std::ostream& out, const NeedProblem& p, const LayoutAnswer& a) {
    const SweepResult& any = a.tried.front();
    out << "need: the layout with the shortest step that fits\n";
    out << "  " << p.model.name << ", ZeRO stage " << p.cfg.zero.stage << ", " << p.topology.name << " x " << any.point.nodes
        << " nodes (" << any.world << " ranks); the last of " << p.steps << " predicted steps\n";
    if (a.best >= 0) {
        const SweepResult& b = a.tried[static_cast<size_t>(a.best)];
        char line[256];
        std::snprintf(line, sizeof line, "answer: %s, step %.1f ms (bubble %.1f ms), memory per rank %.2f GiB of %.2f GiB\n",
                      layout_label(b.point).c_str(), b.step_ms, b.bubble_ms,
                      static_cast<double>(b.memory_bytes + b.activation_bytes) / (1024.0 * 1024 * 1024),
                      static_cast<double>(b.gpu_memory_bytes) / (1024.0 * 1024 * 1024));
        out << line;
    } else {
        out << "answer: none of the layouts below fits the GPU (fits: no or unknown)\n";
    }
    char line[512];
    std::snprintf(line, sizeof line, "%-24s %12s %12s %12s %14s %14s %6s  %s\n", "layout", "step ms", "bubble ms", "exposed ms",
                  "states GiB", "activations GiB", "fits", "error");
    out << line;
    const double gib = 1024.0 * 1024 * 1024;
    for (size_t i = 0; i < a.tried.size(); ++i) {
        const SweepResult& r = a.tried[i];
        std::snprintf(line, sizeof line, "%-24s %12.1f %12.1f %12.1f %14.2f %14.2f %6s  %s%s\n", layout_label(r.point).c_str(),
                      r.step_ms, r.bubble_ms, r.exposed_ms, static_cast<double>(r.memory_bytes) / gib,
                      static_cast<double>(r.activation_bytes) / gib, r.fits.empty() ? "-" : r.fits.c_str(), r.error.c_str(),
                      static_cast<int>(i) == a.best ? "<- answer" : "");
        out << line;
    }
    for (const auto& why : a.left_out) out << "  left out: " << why << "\n";
}

}  // namespace zerosim
