// explain's part for a 3D layout: what each parallel dimension adds on this rank, over which group,
// how many ops and bytes per step, beside ZeRO's own on the data-parallel group; under a pipeline,
// each stage's ZeRO reduction (the "one big all_reduce" question asked per stage).
#include <algorithm>
#include "core/sizes.hpp"
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
                      u.ops, ds_size_string(u.logged).c_str(), binary_size_string(static_cast<int64_t>(u.wire)).c_str(), dimension_of(g));
        out << line;
    }
}

// One rank of each pipeline stage (the same data and tensor index as `s`'s rank), built as `s` was.
std::vector<Schedule> stage_schedules(const Model& whole, const DsConfig& cfg, const Schedule& s) {
    std::vector<Schedule> out;
    for (int64_t stage = 0; stage < s.meta.layout.pipe; ++stage) {
        const ScheduleOptions o = options_for_stage(s.meta, stage);
        auto built = stage == s.meta.pipe_stage ? Result<Schedule>(s) : build_schedule(whole, cfg, o);
        if (!built) return {};
        out.push_back(std::move(built).value());
    }
    return out;
}

// What a stage's ops of one kind on one group add up to in a step: "3 x all_reduce, largest 1.2 GB".
std::string ops_summary(const Schedule& s, GroupKind g, int last, bool p2p) {
    std::map<std::string, std::pair<int, int64_t>> by_kind;   // op name -> count, bytes
    int64_t largest = 0;
    for (const auto& op : s.ops) {
        if (op.step != last || op.group != g || (op.kind == OpKind::Send || op.kind == OpKind::Recv) != p2p) continue;
        if (!is_collective(op.kind) && !p2p) continue;
        auto& k = by_kind[op_record_name(op.kind) + std::string(op.logged ? "" : "*")];
        ++k.first;
        k.second += op.bytes();
        largest = std::max(largest, op.bytes());
    }
    if (by_kind.empty()) return "-";
    std::string text;
    for (const auto& [name, cb] : by_kind)
        text += (text.empty() ? "" : ", ") + std::to_string(cb.first) + " " + name + " " + binary_size_string(cb.second);
    return text;
}

// Under a pipeline: each stage's layers, parameters and ZeRO reduction, the question of
// docs/zero-comm.md ("why one big all_reduce") answered stage by stage.
void write_stage_table(std::ostream& out, const Model& whole, const DsConfig& cfg, const Schedule& s, int last) {
    const auto stages = stage_schedules(whole, cfg, s);
    if (stages.empty()) return;
    out << "Each pipeline stage (one rank of each, the same data and tensor index), step " << last
        << "; * = not in DeepSpeed's comms log:\n";
    char line[600];
    for (const auto& st : stages) {
        std::snprintf(line, sizeof line, "stage %lld (rank %lld): %lld parameters on this rank\n  ZeRO on its data group: %s\n"
                      "  pipeline send/recv: %s\n  tensor group: %s\n",
                      static_cast<long long>(st.meta.pipe_stage), static_cast<long long>(st.meta.rank),
                      static_cast<long long>(st.meta.total_params), ops_summary(st, GroupKind::Dp, last, false).c_str(),
                      ops_summary(st, GroupKind::Pipe, last, true).c_str(), ops_summary(st, GroupKind::Tensor, last, false).c_str());
        out << line;
    }
    const char* why = cfg.zero.stage == 0 ? "ZeRO stage 0 all_reduces every gradient bucket over the stage's data group"
                                          : "ZeRO stage 1 under the pipeline engine reduces each stage's gradients once, at the "
                                            "end of the batch (engine.py _exec_reduce_grads), in buckets of reduce_bucket_size; "
                                            "each bucket is all_reduced whole and every rank keeps its own slices (see the "
                                            "all_reduce question below); reduce_scatter is never called";
    out << "Why all_reduce on every stage: " << why << ". Each stage reduces only its own layers' gradients, over its own "
        << s.meta.world << " data-parallel ranks, so the stage with the most parameters sends the most.\n";
}

}  // namespace

std::string explain_layout(const Model& whole, const DsConfig& cfg, const Schedule& s) {
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
    if (L.pipelined()) write_stage_table(out, whole, cfg, s, last);
    out << "ZeRO's own volume (the paper's 2Ψ for stages 1 and 2, 3Ψ for stage 3) counts Ψ = the parameters this rank holds, "
           "on its data-parallel group; the other groups add what the table says on top.\n\n";
    return out.str();
}

}  // namespace zerosim
