// explain's part for a 3D layout: what each parallel dimension adds on this rank, over which group,
// how many ops and bytes per step, beside ZeRO's own on the data-parallel group; under a pipeline,
// each stage's ZeRO reduction (the "one big all_reduce" question asked per stage).
#include <map>
#include <sstream>

#include "analysis/explain.hpp"
#include "formats/comms_log.hpp"
#include "schedule/mesh.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

namespace {

// Which dimension adds an op: its group, and for ZeRO's own groups what ZeRO does there.
const char* dimension_of(GroupKind g) {
    switch (g) {
        case GroupKind::Pipe: return "pipeline: activations and gradients to the next and previous stage, the loss";
        case GroupKind::Tensor: return "tensor: Megatron's layer all_reduces (and ZeRO's norm across tensor ranks)";
        case GroupKind::ModelParallel: return "pipeline x tensor: ZeRO's gradient norm across the model-parallel ranks";
        case GroupKind::Sequence: return "sequence: Ulysses' all_to_all of q, k, v and the attention output";
        case GroupKind::Expert: return "expert: MoE dispatch and combine all_to_all";
        case GroupKind::ExpertData: return "expert data: ZeRO on the experts' gradients and partitions";
        default: return "data: ZeRO's reductions, gathers and norms";
    }
}

struct DimensionUse {
    int ops = 0;
    int64_t logged = 0;
    double wire = 0;
};

std::string members_text(const std::vector<int>& m) {
    std::string s = "{";
    for (size_t i = 0; i < m.size(); ++i) s += (i ? "," : "") + std::to_string(m[i]);
    return s + "}";
}

// This rank's group of a kind, from the schedule's groups (the data group: from the mesh).
std::vector<int> rank_group(const Schedule& s, const Mesh& mesh, GroupKind g) {
    if (g == GroupKind::Dp)
        return mesh.group_of(s.meta.layout.sequence > 1 ? MeshGroup::SequenceData : MeshGroup::Data, s.meta.rank);
    for (const auto& pg : s.meta.groups)
        if (pg.kind == g)
            for (const auto& m : pg.members)
                if (std::find(m.begin(), m.end(), static_cast<int>(s.meta.rank)) != m.end()) return m;
    return {};
}

void write_dimension_table(std::ostream& out, const Schedule& s, const Mesh& mesh, int last) {
    std::map<GroupKind, DimensionUse> use;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind) || op.step != last) continue;
        DimensionUse& u = use[op.group];
        ++u.ops;
        u.logged += op.bytes();
        u.wire += op_wire_bytes(op, s.meta.group_size(op.group));
    }
    char line[400];
    std::snprintf(line, sizeof line, "%-15s %-18s %8s %14s %16s  %s\n", "group", "this rank's", "ops", "logged bytes",
                  "sent/received", "what adds them");
    out << line;
    for (const auto& [g, u] : use) {
        std::snprintf(line, sizeof line, "%-15s %-18s %8d %14s %16s  %s\n", group_name(g), members_text(rank_group(s, mesh, g)).c_str(),
                      u.ops, ds_size_string(u.logged).c_str(), ds_size_string(static_cast<int64_t>(u.wire)).c_str(), dimension_of(g));
        out << line;
    }
}

}  // namespace

std::string explain_layout(const Model& whole, const Schedule& s) {
    const ParallelLayout& L = s.meta.layout;
    if (!L.is_3d()) return "";
    auto mesh = Mesh::build(L);
    if (!mesh) return "";
    const int last = s.meta.steps - 1;
    std::ostringstream out;
    out << "## Rank " << s.meta.rank << " of " << L.world << ": pipe " << L.pipe << " x data " << L.data() << " x sequence "
        << L.sequence << " x tensor " << L.tensor;
    if (L.expert > 1) out << " (expert " << L.expert << " inside data)";
    out << "\nRanks are laid as DeepSpeed's grid lays them: tensor fastest, then sequence, data, pipe slowest. This rank";
    if (L.pipe > 1) out << " is pipeline stage " << s.meta.pipe_stage << " and";
    out << " holds " << s.meta.total_params << " of the model's " << whole.total_numel()
        << " parameters; ZeRO shards them over its data-parallel group of " << s.meta.world << " ranks.\n"
        << "Per step (step " << last << "), by process group:\n";
    write_dimension_table(out, s, mesh.value(), last);
    out << "ZeRO's own volume (the paper's 2Ψ for stages 1 and 2, 3Ψ for stage 3) counts Ψ = the parameters this rank holds, "
           "on its data-parallel group; the other groups add what the table says on top.\n\n";
    return out.str();
}

}  // namespace zerosim
