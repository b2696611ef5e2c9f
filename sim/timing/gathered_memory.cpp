// Stage 3's gathered parameters on the timeline: the per-step peaks the engine reports
// (engine.hpp summarise_gathered).
#include <algorithm>
#include <map>
#include <utility>

#include "timing/engine.hpp"

namespace zerosim {

namespace {

// The peak of a set of [begin, end) intervals carrying bytes, per step: a sweep over their edges
// (ends before begins at the same instant).
std::map<int, int64_t> peaks(std::vector<std::pair<std::pair<double, int64_t>, int>> edges) {
    std::sort(edges.begin(), edges.end());
    std::map<int, int64_t> level, peak;
    for (const auto& [edge, step] : edges) {
        level[step] += edge.second;
        peak[step] = std::max(peak[step], level[step]);
    }
    return peak;
}

}  // namespace

void summarise_gathered(const Schedule& s, Prediction& p) {
    std::map<int, int64_t> gathered;
    for (const auto& g : p.gathered)
        if (g.step >= 0) gathered[g.step] = std::max(gathered[g.step], g.bytes);
    // Gathered ahead: a fetch or prefetch from its end until the first compute segment after it
    // that uses one of its parameters starts (O4 makes that segment wait for it).
    const int64_t width = dtype_size(s.meta.model_dtype);
    std::map<int, std::vector<size_t>> pending;   // parameter -> gathers not yet consumed
    std::vector<std::pair<std::pair<double, int64_t>, int>> edges;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.step < 0) continue;
        if (op.stream == Stream::Fetch && op.kind == OpKind::AllGather) {
            for (int q : op.params) pending[q].push_back(i);
            continue;
        }
        if (op.kind != OpKind::Compute) continue;
        for (int q : op.params) {
            auto it = pending.find(q);
            if (it == pending.end()) continue;
            for (size_t g : it->second) {
                const Op& gather = s.ops[g];
                double from = p.ops[g].end_s, to = p.ops[i].start_s;
                if (to <= from) continue;
                int64_t bytes = 0;
                for (int r : gather.params) bytes += s.params[static_cast<size_t>(r)].numel * width;
                edges.push_back({{from, bytes}, gather.step});
                edges.push_back({{to, -bytes}, gather.step});
            }
            // A gather's other parameters were consumed with it (one interval per gather).
            std::vector<size_t> used = it->second;
            for (size_t g : used)
                for (int r : s.ops[g].params) {
                    auto& v = pending[r];
                    v.erase(std::remove(v.begin(), v.end(), g), v.end());
                }
        }
    }
    auto ahead = peaks(std::move(edges));
    for (auto& st : p.steps) {
        st.gathered_peak_bytes = gathered.count(st.step) ? gathered[st.step] : 0;
        st.gathered_ahead_peak_bytes = ahead.count(st.step) ? ahead[st.step] : 0;
    }
}

}  // namespace zerosim
