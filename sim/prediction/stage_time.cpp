#include "prediction/stage_time.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "schedule/mesh.hpp"
#include "schedule/ordering.hpp"
#include "timing/group_plan.hpp"

namespace zerosim {

const char* dimension_name(Dimension d) {
    switch (d) {
        case Dimension::Pipe: return "pipe";
        case Dimension::Tensor: return "tensor";
        case Dimension::Sequence: return "sequence";
        case Dimension::Expert: return "expert";
        case Dimension::Zero: return "zero";
    }
    return "zero";
}

Dimension dimension_of(const Op& op) {
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv) return Dimension::Pipe;
    switch (op.group) {
        case GroupKind::Pipe: return Dimension::Pipe;          // the loss's broadcast, tied weights
        case GroupKind::Tensor: return Dimension::Tensor;      // Megatron's all_reduces, PartitionedTensor
        case GroupKind::Sequence: return Dimension::Sequence;  // Ulysses' all_to_all
        case GroupKind::Expert: return Dimension::Expert;      // MoE dispatch and combine
        default: return Dimension::Zero;   // data parallel (and ZeRO++/MiCS groups), expert-data, the mpu's norm
    }
}

namespace {

struct Window {
    double start = std::numeric_limits<double>::infinity();
    double end = 0;
};

// The step's window on one stage: its own StepTiming (which starts where its previous step ended).
Window stage_window(const Prediction& p, int step) {
    Window w;
    for (const auto& st : p.steps)
        if (st.step == step) w = {st.start_s, st.end_s};
    return w;
}

StageTime stage_row(const Schedule& s, const Prediction& p, int step, const Window& pipe) {
    StageTime row;
    row.stage = s.meta.pipe_stage;
    row.rank = s.meta.rank;
    row.step = step;
    row.step_s = pipe.end - pipe.start;
    const Window own = stage_window(p, step);
    row.bubble_s = std::max(0.0, own.start - pipe.start) + std::max(0.0, pipe.end - own.end);
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        const OpTiming& t = p.ops[i];
        if (op.step != step || !t.simulated) continue;
        if (op.kind == OpKind::Compute) {
            row.compute_s += t.duration();
            continue;
        }
        const auto d = static_cast<size_t>(dimension_of(op));
        row.comm_s[d] += std::max(0.0, t.duration() - t.wait_s);
        if (op.kind != OpKind::Recv) row.bytes[d] += op.bytes();
        // Waits on the compute queue hold the stage's compute back: that is the bubble.
        if (queue_of(op.stream) == Queue::Default) row.bubble_s += t.wait_s;
    }
    row.exposed_s = std::max(0.0, row.step_s - row.compute_s);
    return row;
}

}  // namespace

std::vector<StageTime> stage_times(const std::vector<const Schedule*>& stages, const std::vector<const Prediction*>& timings,
                                   int step) {
    std::vector<StageTime> rows;
    if (stages.empty() || stages.size() != timings.size()) return rows;
    if (step < 0)
        for (const auto& st : timings[0]->steps) step = std::max(step, st.step);
    Window pipe;
    for (const Prediction* p : timings) {
        const Window w = stage_window(*p, step);
        pipe.start = std::min(pipe.start, w.start);
        pipe.end = std::max(pipe.end, w.end);
    }
    if (!(pipe.end >= pipe.start)) return rows;
    for (size_t k = 0; k < stages.size(); ++k) rows.push_back(stage_row(*stages[k], *timings[k], step, pipe));
    return rows;
}

void write_stage_table(std::ostream& out, const std::vector<StageTime>& rows, const std::string& prefix) {
    if (rows.empty()) return;
    char line[400];
    out << prefix << "per pipeline stage, step " << rows[0].step << " (one rank of each, simulated together), milliseconds:\n";
    std::snprintf(line, sizeof line, "%s%-6s %-6s %11s %11s %8s %10s %10s %10s %10s %10s %11s %11s\n", prefix.c_str(), "stage",
                  "rank", "compute", "bubble", "bubble%", "p2p+pipe", "tensor", "sequence", "expert", "zero", "exposed",
                  "step time");
    out << line;
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, "%s%-6lld %-6lld %11.3f %11.3f %7.1f%% %10.3f %10.3f %10.3f %10.3f %10.3f %11.3f %11.3f\n",
                      prefix.c_str(), static_cast<long long>(r.stage), static_cast<long long>(r.rank), r.compute_s * 1e3,
                      r.bubble_s * 1e3, 100.0 * r.bubble_fraction(), r.comm_s[0] * 1e3, r.comm_s[1] * 1e3,
                      r.comm_s[2] * 1e3, r.comm_s[3] * 1e3, r.comm_s[4] * 1e3, r.exposed_s * 1e3, r.step_s * 1e3);
        out << line;
    }
    out << prefix << "bubble: waiting for other stages (sends and receives for their other end, collectives over stages "
                     "for their last member, and the step's start and end); bubble% = bubble / (compute + bubble). Comm "
                     "columns are each dimension's transfers less those waits, overlapped with compute or not.\n";
}

namespace {

// The share of a group's NIC traffic from `rank` bound for nodes under another leaf switch.
double spine_share(const std::vector<int>& members, int64_t rank, const Topology& t) {
    if (t.nodes_per_leaf <= 0 || members.empty()) return 0.0;   // one leaf holds every node
    const int64_t g = std::max<int64_t>(t.gpus_per_node, 1);
    auto leaf = [&](int64_t r) {
        const int64_t node = node_of(r, g);
        return static_cast<size_t>(node) < t.leaf_of_node.size() ? t.leaf_of_node[static_cast<size_t>(node)] : node / t.nodes_per_leaf;
    };
    int64_t off_node = 0, off_leaf = 0;
    for (int m : members) {
        if (node_of(m, g) == node_of(rank, g)) continue;
        ++off_node;
        off_leaf += leaf(m) != leaf(rank);
    }
    return off_node > 0 ? static_cast<double>(off_leaf) / static_cast<double>(off_node) : 0.0;
}

}  // namespace

std::vector<LinkBytes> link_bytes(const Schedule& s, const Topology& t, int step) {
    std::vector<LinkBytes> out(5);
    std::map<GroupKind, std::vector<int>> own;   // this rank's group of each kind, built once
    for (const Op& op : s.ops) {
        if (op.step != step || !is_collective(op.kind) || op.kind == OpKind::Recv) continue;
        std::vector<int> members;
        if (op.kind == OpKind::Send) {
            members = {static_cast<int>(s.meta.rank), static_cast<int>(op.peer)};
        } else if (s.meta.layout.is_3d()) {
            auto it = own.find(op.group);
            if (it == own.end()) it = own.emplace(op.group, own_group_members(s.meta, op.group)).first;
            members = it->second;
        }
        const CollectivePlan plan = members.empty() ? plan_for_group(t, op, s.meta) : plan_for_members(t, op, members);
        if (members.empty())
            for (int64_t r = 0; r < s.meta.world; ++r) members.push_back(static_cast<int>(r));
        LinkBytes& b = out[static_cast<size_t>(dimension_of(op))];
        b.inside_node += plan.intra_bytes;
        b.nic += plan.inter_bytes;
        b.spine += plan.inter_bytes * spine_share(members, s.meta.rank, t);
    }
    return out;
}

}  // namespace zerosim
