// "What hpZ size should I use, and how much inter-node traffic does it remove?" (issue 17), from
// schedules of the user's model rebuilt at each size. DeepSpeed's tutorial (docs/_tutorials/
// zeropp.md) says the ideal is the ranks per node; the numbers say why: a group inside a node takes
// the backward gathers off the NICs, a larger one cannot, a smaller one keeps more memory.
#include "analysis/zero_variants.hpp"
#include "core/sizes.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "analysis/explain.hpp"
#include "formats/comms_log.hpp"
#include "schedule/mesh.hpp"
#include "schedule/partition.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

namespace {

// Share of the other members of rank 0's group of `op` that sit on another node.
double off_node_share(const Schedule& s, const Op& op, int64_t g) {
    std::vector<int> members;
    for (const auto& pg : s.meta.groups)
        if (pg.kind == op.group && !pg.members.empty()) members = pg.members[0];
    if (members.empty())
        for (int64_t r = 0; r < s.meta.world; ++r) members.push_back(static_cast<int>(r));
    if (members.size() < 2) return 0.0;
    // schedule/mesh.hpp places the members (the one place that puts ranks on nodes).
    const int64_t off = static_cast<int64_t>(members.size()) - place_members(members, g).first_node_members;
    return static_cast<double>(off) / static_cast<double>(members.size() - 1);
}

}  // namespace

double inter_node_bytes_per_rank(const Schedule& s, int step, int64_t gpus_per_node) {
    const int64_t g = std::max<int64_t>(gpus_per_node, 1);
    double total = 0;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind) || op.step != step) continue;
        Schedule one;
        one.meta = s.meta;
        one.ops.push_back(op);
        total += wire_bytes_per_rank(one, step) * off_node_share(s, op, g);
    }
    return total;
}

std::string explain_hpz_choice(const Model& model, const DsConfig& cfg, const Schedule& s) {
    const auto& meta = s.meta;
    if (meta.stage != 3 || meta.world < 2 || meta.variants.mics > 0) return "";
    const bool given = meta.variants.gpus_per_node > 0;
    const int64_t g = given ? meta.variants.gpus_per_node : 8;
    std::ostringstream out;
    out << "## \"What hpZ size (zero_hpz_partition_size) should I use, and how much inter-node traffic does it remove?\"\n"
        << "With " << meta.world << " ranks on nodes of " << g << (given ? "" : " (assumed; give --gpus-per-node)")
        << ", later steps, per rank (bytes received from other nodes; the secondary copy is extra memory):\n";
    char line[200];
    std::snprintf(line, sizeof line, "%-6s %20s %20s %18s\n", "k", "inter-node bytes", "all bytes", "secondary copy");
    out << line;
    const int last = std::max(meta.steps - 1, 1);
    double base = -1;
    int64_t best = 1;
    for (int64_t k = 1; k <= meta.world; k *= 2) {
        if (meta.world % k != 0) continue;
        DsConfig c = cfg;
        c.zero.hpz_partition_size = k;
        ScheduleOptions o;
        o.world = meta.world;
        o.steps = last + 1;
        o.gpus_per_node = meta.variants.gpus_per_node;
        auto sched = build_schedule(model, c, o);
        if (!sched) continue;
        double inter = inter_node_bytes_per_rank(sched.value(), last, g);
        double all = wire_bytes_per_rank(sched.value(), last);
        int64_t sec = 0;
        if (k > 1)
            for (const auto& p : model.params) sec += stage3_partition_numel(p.numel, meta.world) * meta.world / k;
        if (base < 0) base = inter;
        if (k <= g && g % k == 0) best = k;
        std::snprintf(line, sizeof line, "%-6lld %20s %20s %18s\n", static_cast<long long>(k),
                      binary_size_string(static_cast<int64_t>(inter)).c_str(), binary_size_string(static_cast<int64_t>(all)).c_str(),
                      binary_size_string(sec * dtype_size(meta.model_dtype)).c_str());
        out << line;
    }
    out << "hpZ moves the backward re-gathers (and all of step 0's, the first) onto k consecutive ranks; forward gathers "
           "after step 0 stay on all ranks (each step drops the secondary copies). k = "
        << best << " is the largest group inside one node here: it takes the most gather traffic off the NICs; a "
                   "larger k crosses nodes again and only costs memory. Gradients are unchanged (qgZ is the knob for "
                   "them).\n\n";
    return out.str();
}

}  // namespace zerosim
