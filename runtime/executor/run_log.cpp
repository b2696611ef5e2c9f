#include "executor/run_log.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "executor/memory.hpp"
#include "formats/comms_log.hpp"
#include "formats/schedule_outputs.hpp"
#include "schedule/release_rules.hpp"

namespace zerorun {

using nlohmann::json;
using zerosim::OpKind;

nlohmann::json rank_json(int rank, const zerosim::Schedule& s, const RankResult& r) {
    json ops = json::array();
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const auto& op = s.ops[i];
        const auto& rec = r.ops[i];
        json o = {{"id", op.id},
                  {"kind", op.kind == OpKind::Compute ? zerosim::compute_kind_name(op.compute) : zerosim::op_record_name(op.kind)},
                  {"bytes", op.bytes()},
                  {"start_us", rec.start_us},
                  {"end_us", rec.end_us},
                  {"call_us", rec.call_us},
                  {"check", rec.check},
                  {"checked", rec.checked},
                  {"wrong", rec.wrong}};
        if (op.kind == OpKind::Compute) o["flops_run"] = rec.flops_run;
        ops.push_back(std::move(o));
    }
    json mem = json::object();
    for (int c = 0; c < kMemCats; ++c) {
        MemCat cat = static_cast<MemCat>(c);
        mem[mem_cat_name(cat)] = {{"current", r.memory->current(cat)}, {"peak", r.memory->peak(cat)}};
    }
    mem["state_peak"] = r.memory->peak_state();
    return {{"rank", rank}, {"wrong", r.wrong_total}, {"peak_rss_bytes", r.peak_rss}, {"memory", mem}, {"ops", ops}};
}

// The op's time as the comms_logger lines and the JSON log report it (--op-time): rank 0's own
// call, or the shortest call over ranks (the rank that arrived last waited for nobody).
double reported_op_us(const std::vector<json>& ranks, size_t i, const std::string& op_time) {
    auto own = [&](const json& r) { return r.at("ops").at(i).at("call_us").get<double>(); };
    double best = own(ranks.at(0));
    // In a 3D layout ranks run different programs (op i is not the same op on every rank): the
    // shortest call is taken over the ranks whose op i is this op (same kind and size).
    const json& mine = ranks.at(0).at("ops").at(i);
    if (op_time == "skew-free")
        for (const auto& r : ranks) {
            const json& ops = r.at("ops");
            if (i < ops.size() && ops.at(i).at("kind") == mine.at("kind") && ops.at(i).at("bytes") == mine.at("bytes"))
                best = std::min(best, own(r));
        }
    return best;
}

nlohmann::json run_json(const zerosim::Schedule& s, const ExecOptions& a, const std::string& backend,
                        const std::vector<json>& ranks) {
    // Times relative to the earliest op start on any rank (all ranks share the host clock).
    double epoch = std::numeric_limits<double>::max();
    for (const auto& r : ranks)
        for (const auto& o : r.at("ops")) epoch = std::min(epoch, o.at("start_us").get<double>());
    if (epoch == std::numeric_limits<double>::max()) epoch = 0;
    std::vector<json> rs = ranks;
    int64_t wrong = 0;
    for (auto& r : rs) {
        wrong += r.at("wrong").get<int64_t>();
        for (auto& o : r["ops"]) {
            o["start_us"] = o["start_us"].get<double>() - epoch;
            o["end_us"] = o["end_us"].get<double>() - epoch;
        }
    }
    json ops = json::array();
    for (const auto& op : s.ops) {
        const size_t i = static_cast<size_t>(&op - s.ops.data());
        json o = {{"id", op.id},
                  {"kind", op.kind == OpKind::Compute ? "compute" : zerosim::op_record_name(op.kind)},
                  {"rule", zerosim::rule_name(op.rule)},
                  {"step", op.step},
                  {"micro", op.micro},
                  {"phase", zerosim::phase_name(op.phase)},
                  {"stream", zerosim::stream_name(op.stream)}};
        if (op.kind == OpKind::Compute) {
            o["compute"] = zerosim::compute_kind_name(op.compute);
            o["flops"] = op.flops;
        } else {
            o["caller"] = op.caller;
            o["elements"] = op.elements;
            o["bytes"] = op.bytes();
            o["dtype"] = zerosim::dtype_name(op.dtype);
            if (op.root >= 0) o["root"] = op.root;
            o["time_ms"] = reported_op_us(rs, i, op_time_name(a.op_time)) / 1000.0;
        }
        ops.push_back(std::move(o));
    }
    return {{"format", "zerorun-log"},
            {"version", 1},
            {"backend", backend},
            {"world", s.meta.world},
            {"stage", s.meta.stage},
            {"steps", s.meta.steps},
            {"grad_accum", s.meta.grad_accum},
            {"model", s.meta.model_name},
            {"model_dtype", zerosim::dtype_name(s.meta.model_dtype)},
            {"comm_dtype", zerosim::dtype_name(s.meta.comm_dtype)},
            {"sync_each_op", a.sync_each_op},
            {"op_time", op_time_name(a.op_time)},
            {"compute_scale", a.compute_scale},
            // What the model's own data is: a pipeline's real MLP, or synthetic (docs/runtime.md).
            {"model_data", a.pipeline_mlp ? "mlp" : a.tensor_mlp ? "tensor_mlp" : a.moe_mlp ? "moe_mlp" : a.ulysses_mlp ? "ulysses_mlp" : "synthetic"},
            {"epoch_unix_us", epoch},
            {"wrong", wrong},
            {"ops", ops},
            {"ranks", rs}};
}

void write_measured_deepspeed(std::ostream& out, const zerosim::Schedule& s, const json& log) {
    // Timestamps are rank 0's, on the wall clock (run_json made them relative to the epoch).
    const auto& recs = log.at("ranks").at(0).at("ops");
    const double epoch = log.at("epoch_unix_us").get<double>();
    std::vector<zerosim::OpLogTime> times(s.ops.size());
    for (size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].kind != OpKind::Compute)
            times[i] = {log.at("ops").at(i).at("time_ms").get<double>(), (recs.at(i).at("end_us").get<double>() + epoch) / 1e6};
    const std::vector<zerosim::LoggedOp> logged = zerosim::logged_ops(s, times);
    // The release's own logger line in the prefix (schedule/release_rules.hpp), as predict writes it,
    // so that validate reads the run as the release it ran.
    const int line = zerosim::log_dist_line(s.meta.release);
    for (const auto& l : logged) zerosim::write_ds_verbose_line(out, l, line);
    zerosim::write_ds_summary(out, logged);
}

void write_memory_report(std::ostream& out, const zerosim::Schedule& s, const std::vector<json>& ranks) {
    char line[512];
    out << "zerorun memory per rank: stage " << s.meta.stage << ", " << zerosim::dtype_name(s.meta.model_dtype) << ", "
        << s.meta.world << " ranks, " << s.meta.total_params << " parameters (peak bytes per category)\n";
    std::snprintf(line, sizeof line, "%5s %12s %12s %12s %12s %12s %12s %12s\n", "rank", "parameters", "gradients",
                  "optim_states", "buckets", "state_peak", "workspace", "peak_rss");
    out << line;
    for (const auto& r : ranks) {
        const auto& m = r.at("memory");
        auto pk = [&](const char* c) { return human_bytes(m.at(c).at("peak").get<int64_t>()); };
        std::snprintf(line, sizeof line, "%5d %12s %12s %12s %12s %12s %12s %12s\n", r.at("rank").get<int>(),
                      pk("parameters").c_str(), pk("gradients").c_str(), pk("optimizer_states").c_str(),
                      pk("buckets").c_str(), human_bytes(m.at("state_peak").get<int64_t>()).c_str(),
                      pk("workspace").c_str(), human_bytes(r.at("peak_rss_bytes").get<int64_t>()).c_str());
        out << line;
    }
    out.flush();
}

}  // namespace zerorun
