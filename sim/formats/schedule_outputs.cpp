#include "formats/schedule_outputs.hpp"

#include <cstdio>
#include <map>

#include "schedule/release_rules.hpp"

namespace zerosim {

LoggedOp logged_op(const Schedule& s, const Op& op, double time_ms, double end_s) {
    return logged_op(s.meta, op, time_ms, end_s);
}

LoggedOp logged_op(const ScheduleMeta& m, const Op& op, double time_ms, double end_s) {
    LoggedOp l;
    l.record = op_record_name(op.kind);
    l.caller = op.caller;
    l.bytes = op.bytes();
    l.size_text = ds_size_string(l.bytes);
    l.line = static_cast<int>(op.id);
    l.phase = phase_label(op, m.grad_accum);
    l.time_ms = time_ms;
    l.rank = m.rank;
    // Bus bandwidth over the op's own group (a 3D schedule's tensor, pipe, sequence and expert groups).
    const int64_t group = m.group_size(op.group);
    Bandwidth bw = ds_bandwidth(l.record, l.bytes, l.time_ms, group > 0 ? group : m.world);
    l.algbw_gbps = bw.algbw_gbps;
    l.busbw_gbps = bw.busbw_gbps;
    l.timestamp_s = end_s;
    return l;
}

std::vector<LoggedOp> logged_ops(const Schedule& s, const std::vector<OpLogTime>& times) {
    std::vector<LoggedOp> out;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        // MiCS's parameter gathers bypass the comms logger (comm.py all_gather_coalesced is not timed).
        if (!is_collective(s.ops[i].kind) || !s.ops[i].logged) continue;
        OpLogTime t = i < times.size() ? times[i] : OpLogTime{};
        out.push_back(logged_op(s, s.ops[i], t.time_ms, t.end_s));
    }
    return out;
}

// "rank 2 of 4 (pipe 2 x data 2, stage 1), " for a 3D schedule; "" otherwise.
static std::string layout_words(const ScheduleMeta& m) {
    const ParallelLayout& L = m.layout;
    if (!L.is_3d()) return "";
    std::string s = "rank " + std::to_string(m.rank) + " (";
    const std::pair<const char*, int64_t> axes[] = {{"pipe", L.pipe}, {"data", L.data()}, {"sequence", L.sequence},
                                                    {"tensor", L.tensor}, {"expert", L.expert}};
    bool first = true;
    for (const auto& [name, n] : axes)
        if (n > 1 || std::string(name) == "data") {
            s += std::string(first ? "" : " x ") + name + " " + std::to_string(n);
            first = false;
        }
    if (L.pipe > 1) s += ", stage " + std::to_string(m.pipe_stage);
    return s + "; ZeRO over " + std::to_string(m.world) + " ranks), ";
}

void write_schedule_deepspeed(std::ostream& out, const Schedule& s, const DeepSpeedLogOptions& opt) {
    write_schedule_deepspeed(out, ScheduleStream::of(s), opt);
}

void write_schedule_deepspeed(std::ostream& out, const ScheduleStream& s, const DeepSpeedLogOptions& opt) {
    const auto& m = s.meta();
    if (opt.header)
        out << "# zerosim schedule (" << m.dialect << "): ZeRO stage " << m.stage << ", world "
            << (m.layout.is_3d() ? m.layout.world : m.world) << ", " << layout_words(m) << m.steps << " step(s), model " << m.model_name
            << "; times and bandwidths are not simulated here (0.00)\n";
    const int line = log_dist_line(m.release);
    DsSummary summary;
    s.each_op([&](const Op& op) {
        // MiCS's parameter gathers bypass the comms logger (comm.py all_gather_coalesced is not timed).
        if (!is_collective(op.kind) || !op.logged) return;
        const LoggedOp l = logged_op(m, op);
        write_ds_verbose_line(out, l, line);
        if (opt.log_summary) summary.add(l);
    });
    if (opt.log_summary) {
        // log_summary() runs a barrier that the logger records before it prints the table, and the
        // table's own barrier afterwards.
        LoggedOp barrier;
        barrier.record = "log_summary_barrier";
        barrier.caller = "log_summary";
        write_ds_verbose_line(out, barrier, line);
        summary.add(barrier);
        summary.write(out);
        write_ds_verbose_line(out, barrier, line);
    }
}

namespace {

// One op's line of the table (compute segments only where asked).
void write_table_line(std::ostream& out, const Op& op) {
    char line[512];
    std::string step = op.step < 0 ? "init" : std::to_string(op.step);
    std::string micro = op.micro < 0 ? "-" : std::to_string(op.micro);
    std::string what = is_collective(op.kind) ? op_record_name(op.kind) : compute_kind_name(op.compute);
    std::string caller = is_collective(op.kind) ? op.caller : op.module_name;
    int64_t bytes = is_collective(op.kind) ? op.bytes() : op.mem_bytes;
    std::snprintf(line, sizeof line, "%-5lld %-5s %-6s %-8s %-23s %14lld %-10s %-5s %-34s %s\n",
                  static_cast<long long>(op.id), step.c_str(), micro.c_str(), phase_name(op.phase), what.c_str(),
                  static_cast<long long>(bytes), ds_size_string(bytes).c_str(),
                  is_collective(op.kind) ? dtype_name(op.dtype) : "-", caller.c_str(), rule_name(op.rule));
    std::string text = line;
    // ZeRO++ / MiCS: the group an op runs on, and whether DeepSpeed's logger sees it.
    if (is_collective(op.kind) && (op.group != GroupKind::Dp || !op.logged)) {
        text.pop_back();
        text += std::string(" [group ") + group_name(op.group) + (op.logged ? "" : ", not logged") + "]\n";
    }
    out << text;
}

}  // namespace

void write_schedule_table(std::ostream& out, const Schedule& s, const TableOptions& opt) {
    write_schedule_table(out, ScheduleStream::of(s), opt);
}

void write_schedule_table(std::ostream& out, const ScheduleStream& s, const TableOptions& opt) {
    char line[512];
    std::snprintf(line, sizeof line, "%-5s %-5s %-6s %-8s %-23s %14s %-10s %-5s %-34s %s\n", "#", "step", "micro",
                  "phase", "op", "bytes", "size", "dtype", "caller", "rule");
    out << line;
    // Totals per phase, for a quick read of volume.
    std::map<std::string, std::pair<int64_t, int64_t>> totals;
    s.each_op([&](const Op& op) {
        if (is_collective(op.kind) || opt.compute) write_table_line(out, op);
        if (!is_collective(op.kind)) return;
        auto& t = totals[op.step < 0 ? "init" : "steps"];
        t.first += 1;
        t.second += op.bytes();
    });
    for (const auto& [k, v] : totals)
        out << "# " << k << ": " << v.first << " collectives, " << v.second << " bytes (" << ds_size_string(v.second)
            << ") as logged\n";
}

}  // namespace zerosim
