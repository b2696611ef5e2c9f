#include "prediction/predict_outputs.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "formats/comms_log.hpp"
#include "formats/schedule_outputs.hpp"
#include "formats/wall_clock_log.hpp"
#include "schedule/collective_table.hpp"
#include "schedule/release_rules.hpp"
#include "timing/phase_spans.hpp"

namespace zerosim {

namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// Every op with its timing in both modes: from the long run's stream, else from the schedule.
void each_timed_op(const PredictReport& r, const std::function<void(const Op&, const OpTiming&, const OpTiming&)>& visit) {
    if (r.timed) {   // the report's `logged` may be the overlapped timing (predict --timing overlapped)
        const bool shows_overlapped = &r.logged == &r.timed->overlapped_run;
        r.timed->each_op([&](const Op& op, const OpTiming& logged, const OpTiming& overlapped) {
            visit(op, shows_overlapped ? overlapped : logged, overlapped);
        });
        return;
    }
    for (size_t i = 0; i < r.schedule.ops.size(); ++i) visit(r.schedule.ops[i], r.logged.ops[i], r.overlapped.ops[i]);
}

}  // namespace

void write_step_summary(std::ostream& out, const PredictReport& r, const std::string& prefix) {
    // What the figures rest on, stated once: the world and its nodes, and the batch, sequence
    // length and dtype (defaults included: the model's sequence length, the config's batch).
    const ScheduleMeta& m = r.timed ? r.timed->stream->meta() : r.schedule.meta;   // a long run's, not its template's
    out << prefix << "world " << (m.layout.is_3d() ? m.layout.world : m.world) << " on " << r.topology.name << " ("
        << r.topology.nodes << (r.topology.nodes == 1 ? " node x " : " nodes x ") << r.topology.gpus_per_node << " GPUs); micro batch " << m.micro_batch
        << ", gradient accumulation " << m.grad_accum << ", sequence length " << m.seq_len << ", " << dtype_name(m.model_dtype)
        << "; " << m.steps << (m.steps == 1 ? " step" : " steps") << "\n";
    out << prefix << "per step (" << timing_mode_name(r.overlapped.mode) << "), milliseconds:\n";
    char line[256];
    std::snprintf(line, sizeof line, "%s%-6s %12s %12s %14s %12s\n", prefix.c_str(), "step", "compute", "comm",
                  "exposed comm", "step time");
    out << line;
    for (const auto& st : r.overlapped.steps) {
        std::snprintf(line, sizeof line, "%s%-6d %12.3f %12.3f %14.3f %12.3f\n", prefix.c_str(), st.step, st.compute_s * 1e3,
                      st.comm_s * 1e3, st.exposed_comm_s * 1e3, st.step_s() * 1e3);
        out << line;
    }
    std::snprintf(line, sizeof line, "%sengine start %.3f ms\n", prefix.c_str(), r.overlapped.init_s * 1e3);
    out << line;
    if (r.overlapped.zero_init_construction_s >= 0) {
        std::snprintf(line, sizeof line, "%smodel construction under deepspeed.zero.Init %.3f ms (before the engine start; not logged)\n",
                      prefix.c_str(), r.overlapped.zero_init_construction_s * 1e3);
        out << line;
    }
    if (r.stages) write_stage_table(out, *r.stages, prefix);
    if (r.stage_fits) {
        for (const StageFit& f : *r.stage_fits) out << prefix << stage_fit_sentence(f) << "\n";
        const int64_t most = stage_holding_most(*r.stage_fits);
        if (most >= 0) out << prefix << "stage " << (*r.stage_fits)[static_cast<size_t>(most)].stage << " holds the most\n";
    } else if (r.fit) {
        out << prefix << fit_sentence(*r.fit) << "\n";
    }
    if (r.overlapped.gathered.empty()) return;
    // Stage 3's host timeline: the gathered parameters beside the memory model's figure.
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double memory = static_cast<double>(gathered_peak_by_memory_model(r.schedule));
    std::snprintf(line, sizeof line, "%sgathered parameters per step, GiB (memory model's peak %.3f):\n", prefix.c_str(), memory / gib);
    out << line;
    const Prediction& p = r.overlapped;
    const bool bounded = p.gathered_budget_bytes < INT64_MAX;
    std::snprintf(line, sizeof line, "%s%-6s %12s %16s%s\n", prefix.c_str(), "step", "peak", "gathered ahead",
                  bounded ? "   host waited ms" : "");
    out << line;
    for (const auto& st : r.overlapped.steps) {
        std::snprintf(line, sizeof line, "%s%-6d %12.3f %16.3f", prefix.c_str(), st.step, static_cast<double>(st.gathered_peak_bytes) / gib,
                      static_cast<double>(st.gathered_ahead_peak_bytes) / gib);
        out << line;
        if (bounded) {
            std::snprintf(line, sizeof line, " %17.3f", st.allocator_stall_s * 1e3);
            out << line;
        }
        out << "\n";
    }
    std::snprintf(line, sizeof line, "%sgathered buffers not yet reusable, at most %.3f GiB", prefix.c_str(),
                  static_cast<double>(p.resident_peak_bytes) / gib);
    out << line;
    // The room is the fit line's: the GPU less what it counts beside the gathered parameters
    // (prediction/gathered_budget.hpp). The host's waits for it are simulated time, in the step
    // times above: it waits while the GPU runs the work issued before (a wait is for that work to
    // end), so a wait costs the step only where the GPU runs out of work meanwhile.
    if (bounded && p.gathered_budget_bytes == 0)
        std::snprintf(line, sizeof line,
                      "; no room for them beside the fit line's other memory (the rank does not fit), so every gather waited for "
                      "the buffers before it to be freed: the host waited %.3f ms in all, inside the step times above",
                      p.allocator_stall_s * 1e3);
    else if (bounded)
        std::snprintf(line, sizeof line,
                      " of the %.3f GiB the GPU has beside the fit line's other memory; the host waited %.3f ms in all for room, "
                      "inside the step times above",
                      static_cast<double>(p.gathered_budget_bytes) / gib, p.allocator_stall_s * 1e3);
    if (bounded) out << line;
    out << "\n";
}

int64_t gathered_peak_by_memory_model(const Schedule& s) {
    return s.meta.stage3_peak_gathered_elements * dtype_size(s.meta.model_dtype);
}

namespace {

// DeepSpeed's own lines of a predicted run, in the order engine.step() prints them at the end of
// each micro step (engine.py v0.14.2 ~2173-2233): the throughput line at a reporting boundary,
// the micro-step timers, and the step's timers at the accumulation boundary. The spans are
// timing/phase_spans.hpp's, of the timing the log shows.
class OwnFigureLines {
public:
    OwnFigureLines(std::ostream& out, const PredictReport& r, int line_no)
        : out_(out), r_(r), line_no_(line_no), counter_([this](const MicroStepSpans& m) { write(m); }) {
        const ScheduleMeta& m = r.timed ? r.timed->stream->meta() : r.schedule.meta;
        on_ = !m.layout.pipelined() && (r.figures.timers || r.figures.steps_per_print > 0);
        // The pipeline engine prints its progress line on global rank 0 alone.
        pipe_ = m.layout.pipelined() && r.figures.steps_per_print > 0 && m.rank == 0 && r.figures.train_batch > 0;
        grad_accum_ = std::max<int64_t>(1, m.grad_accum);
        rank_ = m.rank;
        release_ = m.release;
    }
    void add(const Op& op, const OpTiming& t) {
        if (on_) counter_.add(op, t);
        if (pipe_ && op.step >= 0 && t.simulated) {
            if (op.step != pipe_step_ && pipe_step_ >= 0) pipe_step_done();
            if (op.step != pipe_step_) pipe_step_ = op.step, pipe_begin_ = t.start_s, pipe_end_ = t.end_s;
            pipe_begin_ = std::min(pipe_begin_, t.start_s), pipe_end_ = std::max(pipe_end_, t.end_s);
        }
    }
    void finish() {
        if (on_) counter_.finish();
        if (pipe_ && pipe_step_ >= 0) pipe_step_done();
    }

private:
    // PipelineEngine.train_batch (pipe/engine.py v0.14.2 ~374-396): its timer spans the step's
    // schedule on this rank and accumulates until printed, every steps_per_print steps, as the
    // mean over them.
    void pipe_step_done() {
        pipe_elapsed_s_ += pipe_end_ - pipe_begin_;
        const int64_t global = pipe_step_ + 1;
        if (global % r_.figures.steps_per_print == 0 && pipe_elapsed_s_ > 0) {
            PipeProgressLine p;
            p.step = global;
            p.iter_s = pipe_elapsed_s_ / static_cast<double>(r_.figures.steps_per_print);
            p.samples_per_s = static_cast<double>(r_.figures.train_batch) / p.iter_s;
            out_ << pipe_progress_text(p) << "\n";
            pipe_elapsed_s_ = 0;
        }
    }

    void write(const MicroStepSpans& m) {
        ++micro_steps_;
        sum_.fwd_ms += m.fwd_ms, sum_.bwd_ms += m.bwd_ms, sum_.bwd_inner_ms += m.bwd_inner_ms;
        sum_.bwd_allreduce_ms += m.bwd_ms - m.bwd_inner_ms, sum_.step_ms += m.step_ms;
        step_elapsed_s_ += m.end_s - m.begin_s;
        const bool boundary = m.last_micro || m.micro + 1 >= grad_accum_;
        const int64_t global_step = m.step + 1;
        // ThroughputTimer: its clock runs from the third step (start_step 2) and it reports at
        // global steps divisible by steps_per_print.
        if (boundary && m.step >= 2) {
            total_elapsed_s_ += step_elapsed_s_;
            ++timed_steps_;
        }
        if (boundary && m.step >= 2 && r_.figures.steps_per_print > 0 && global_step % r_.figures.steps_per_print == 0 &&
            step_elapsed_s_ > 0 && r_.figures.train_batch > 0) {
            ThroughputLine t;
            t.global_step = global_step;
            t.micro_step = micro_steps_;
            const double batch = static_cast<double>(r_.figures.train_batch);
            t.running_avg_samples_per_s = batch / (total_elapsed_s_ / static_cast<double>(timed_steps_));
            t.samples_per_s = batch / step_elapsed_s_;
            if (r_.fit) {
                constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
                t.mem_allocated_gib = static_cast<double>(r_.fit->model_states) / kGiB;
                t.max_mem_allocated_gib = static_cast<double>(r_.fit->model_states + r_.fit->activations) / kGiB;
            }
            out_ << ds_info_prefix(m.end_s, "timer.py:" + std::to_string(throughput_log_line(release_)) + ":stop")
                 << throughput_text(t) << "\n";
        }
        if (r_.figures.timers) {
            WallClockMicroStep w;
            w.fwd_ms = m.fwd_ms, w.bwd_ms = m.bwd_ms, w.bwd_inner_ms = m.bwd_inner_ms;
            w.bwd_allreduce_ms = m.bwd_ms - m.bwd_inner_ms, w.step_ms = m.step_ms;
            out_ << ds_line_prefix(m.end_s, line_no_, rank_) << wall_clock_micro_text(w) << "\n";
            if (boundary) out_ << ds_line_prefix(m.end_s, line_no_, rank_) << wall_clock_step_text(sum_) << "\n";
        }
        if (boundary) {
            sum_ = WallClockStep{};
            sum_.fwd_ms = sum_.bwd_ms = sum_.bwd_inner_ms = sum_.bwd_allreduce_ms = sum_.step_ms = 0;
            step_elapsed_s_ = 0;
        }
    }
    std::ostream& out_;
    const PredictReport& r_;
    int line_no_;
    PhaseSpanCounter counter_;
    bool on_ = false, pipe_ = false;
    int pipe_step_ = -1;
    double pipe_begin_ = 0, pipe_end_ = 0, pipe_elapsed_s_ = 0;
    int64_t grad_accum_ = 1, rank_ = 0, micro_steps_ = 0, timed_steps_ = 0;
    Release release_ = kBaselineRelease;
    double step_elapsed_s_ = 0, total_elapsed_s_ = 0;
    WallClockStep sum_{0, 0, 0, 0, 0, 0};
};

}  // namespace

void write_predicted_deepspeed(std::ostream& out, const PredictReport& r, bool log_summary) {
    const auto& m = r.schedule.meta;
    out << "# zerosim predict (" << m.dialect << "): ZeRO stage " << m.stage << ", world " << m.world;
    if (m.layout.is_3d())
        out << " data-parallel of " << m.layout.world << " (pipe " << m.layout.pipe << " x data " << m.layout.data() << " x sequence "
            << m.layout.sequence << " x tensor " << m.layout.tensor << ", expert " << m.layout.expert << "; rank " << m.rank << ")";
    out << ", topology "
        << r.topology.name << " (" << r.topology.nodes << " x " << r.topology.gpus_per_node
        << "); op times: " << timing_mode_name(r.logged.mode) << "\n";
    // Phase markers in the style of the reference runs' training script ("##### PHASE
    // step0.micro0.forward #####"), so the validator can break errors down by step and phase;
    // parsers of comms_logger lines skip them. The synchronized timing as the comms logger would
    // log it: each op's duration, its end as the line's timestamp; written op by op.
    const int line_no = log_dist_line(m.release);
    DsSummary summary;
    std::string phase;
    OwnFigureLines own(out, r, line_no);
    each_timed_op(r, [&](const Op& op, const OpTiming& logged, const OpTiming&) {
        own.add(op, logged);
        // MiCS's parameter gathers bypass the comms logger (comm.py all_gather_coalesced is not timed).
        if (!is_collective(op.kind) || !op.logged) return;
        const LoggedOp l = logged_op(m, op, logged.duration() * 1e3, logged.end_s);
        if (l.phase != phase) {
            out << "##### PHASE " << l.phase << " #####\n";
            phase = l.phase;
        }
        write_ds_verbose_line(out, l, line_no);
        if (log_summary) summary.add(l);
    });
    own.finish();
    if (log_summary) {
        LoggedOp barrier;
        barrier.record = "log_summary_barrier";
        barrier.caller = "log_summary";
        barrier.timestamp_s = r.logged.total_s;
        write_ds_verbose_line(out, barrier, line_no);
        summary.add(barrier);
        summary.write(out);
        write_ds_verbose_line(out, barrier, line_no);
    }
    write_step_summary(out, r, "# ");
}

void write_predicted_json(std::ostream& out, const PredictReport& r) {
    nlohmann::ordered_json j;
    j["format"] = "zerosim-prediction";
    j["topology"] = r.topology.name;
    j["world"] = r.schedule.meta.world;
    j["stage"] = r.schedule.meta.stage;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& st : r.overlapped.steps) {
        nlohmann::ordered_json row = {{"step", st.step}, {"compute_ms", st.compute_s * 1e3}, {"comm_ms", st.comm_s * 1e3},
                                      {"exposed_comm_ms", st.exposed_comm_s * 1e3}, {"step_ms", st.step_s() * 1e3}};
        if (st.gathered_peak_bytes >= 0) {
            row["gathered_peak_bytes"] = st.gathered_peak_bytes;
            row["gathered_ahead_peak_bytes"] = st.gathered_ahead_peak_bytes;
        }
        steps.push_back(std::move(row));
    }
    j["steps"] = steps;
    if (r.schedule.meta.layout.is_3d()) {
        const ParallelLayout& L = r.schedule.meta.layout;
        j["layout"] = {{"world", L.world}, {"pipe", L.pipe},     {"data", L.data()},  {"sequence", L.sequence},
                       {"tensor", L.tensor}, {"expert", L.expert}, {"rank", r.schedule.meta.rank}};
    }
    if (r.stages) {
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const StageTime& st : *r.stages) {
            nlohmann::ordered_json row = {{"stage", st.stage},         {"rank", st.rank},           {"step", st.step},
                                          {"compute_ms", st.compute_s * 1e3}, {"bubble_ms", st.bubble_s * 1e3},
                                          {"bubble_fraction", st.bubble_fraction()}};
            for (Dimension d : {Dimension::Pipe, Dimension::Tensor, Dimension::Sequence, Dimension::Expert, Dimension::Zero}) {
                row[std::string(dimension_name(d)) + "_ms"] = st.comm_s[static_cast<size_t>(d)] * 1e3;
                row[std::string(dimension_name(d)) + "_bytes"] = st.bytes[static_cast<size_t>(d)];
            }
            row["exposed_ms"] = st.exposed_s * 1e3;
            row["step_ms"] = st.step_s * 1e3;
            rows.push_back(std::move(row));
        }
        j["pipeline_stages"] = std::move(rows);
    }
    j["engine_start_ms"] = r.overlapped.init_s * 1e3;
    if (r.overlapped.zero_init_construction_s >= 0) j["zero_init_construction_ms"] = r.overlapped.zero_init_construction_s * 1e3;
    if (!r.overlapped.gathered.empty()) {
        j["memory_gathered_peak_bytes"] = gathered_peak_by_memory_model(r.schedule);
        j["gathered_resident_peak_bytes"] = r.overlapped.resident_peak_bytes;
        if (r.overlapped.gathered_budget_bytes < INT64_MAX) {
            j["gathered_budget_bytes"] = r.overlapped.gathered_budget_bytes;
            j["allocator_stall_ms"] = r.overlapped.allocator_stall_s * 1e3;
        }
    }
    if (r.fit) {
        j["memory_per_rank"] = {{"model_states_bytes", r.fit->model_states}, {"activation_bytes", r.fit->activations},
                                {"framework_reserve_bytes", r.fit->reserve}, {"total_bytes", r.fit->total()},
                                {"gpu_memory_bytes", r.fit->gpu_bytes}, {"fits", r.fit->verdict()}};
    }
    if (!r.what_if_json.empty()) j["what_if"] = nlohmann::ordered_json::parse(r.what_if_json);
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (size_t i = 0; i < r.schedule.ops.size(); ++i) {
        const Op& op = r.schedule.ops[i];
        nlohmann::ordered_json o;
        o["id"] = op.id;
        o["step"] = op.step;
        o["micro"] = op.micro;
        o["phase"] = phase_name(op.phase);
        o["stream"] = stream_name(op.stream);
        o["kind"] = is_collective(op.kind) ? op_record_name(op.kind) : compute_kind_name(op.compute);
        o["caller"] = is_collective(op.kind) ? op.caller : op.module_name;
        o["bytes"] = is_collective(op.kind) ? op.bytes() : op.mem_bytes;
        if (is_collective(op.kind)) {
            o["algorithm"] = algorithm_name(r.logged.ops[i].algorithm);
            o["protocol"] = protocol_name(r.logged.ops[i].protocol);
        }
        o["logged_ms"] = r.logged.ops[i].duration() * 1e3;
        o["start_ms"] = r.overlapped.ops[i].start_s * 1e3;
        o["end_ms"] = r.overlapped.ops[i].end_s * 1e3;
        ops.push_back(std::move(o));
    }
    j["ops"] = std::move(ops);
    out << j.dump(1) << '\n';
}

void write_predicted_csv(std::ostream& out, const PredictReport& r) {
    out << "id,step,micro,phase,stream,kind,caller,bytes,algorithm,protocol,logged_ms,start_ms,end_ms\n";
    each_timed_op(r, [&](const Op& op, const OpTiming& logged, const OpTiming& overlapped) {
        const bool c = is_collective(op.kind);
        out << op.id << ',' << op.step << ',' << op.micro << ',' << phase_name(op.phase) << ',' << stream_name(op.stream)
            << ',' << (c ? op_record_name(op.kind) : compute_kind_name(op.compute)) << ','
            << (c ? op.caller : op.module_name) << ',' << (c ? op.bytes() : op.mem_bytes) << ','
            << (c ? algorithm_name(logged.algorithm) : "") << ',' << (c ? protocol_name(logged.protocol) : "")
            << ',' << fmt("%.6f", logged.duration() * 1e3) << ',' << fmt("%.6f", overlapped.start_s * 1e3)
            << ',' << fmt("%.6f", overlapped.end_s * 1e3) << '\n';
    });
}

namespace {

// Stage 3's host timeline in the trace: the coordinator's calls on a "host" thread (tid 4) and
// the gathered, unreleased parameters as a counter track.
void write_host_trace_events(nlohmann::ordered_json& events, const Schedule& s, const Prediction& p) {
    if (p.host.empty()) return;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 4}, {"args", {{"name", "host"}}}});
    for (size_t e = 0; e < s.host.size() && e < p.host.size(); ++e) {
        const HostEvent& ev = s.host[e];
        nlohmann::ordered_json x;
        x["name"] = host_kind_name(ev.kind);
        x["cat"] = "host";
        x["ph"] = "X";
        x["ts"] = p.host[e].start_s * 1e6;
        x["dur"] = (p.host[e].end_s - p.host[e].start_s) * 1e6;
        x["pid"] = 0;
        x["tid"] = 4;
        nlohmann::ordered_json args;
        args["step"] = ev.step;
        args["module"] = ev.module;
        if (!ev.waits.empty()) args["waits_for_ops"] = ev.waits;
        if (ev.released_elements > 0) args["released_elements"] = ev.released_elements;
        x["args"] = std::move(args);
        events.push_back(std::move(x));
    }
    for (const auto& g : p.gathered)
        events.push_back({{"name", "gathered parameters"}, {"ph", "C"}, {"ts", g.t_s * 1e6}, {"pid", 0},
                          {"args", {{"GiB", static_cast<double>(g.bytes) / (1024.0 * 1024.0 * 1024.0)}}}});
    for (const auto& g : p.resident)
        events.push_back({{"name", "gathered buffers not yet reusable"}, {"ph", "C"}, {"ts", g.t_s * 1e6}, {"pid", 0},
                          {"args", {{"GiB", static_cast<double>(g.bytes) / (1024.0 * 1024.0 * 1024.0)}}}});
}

}  // namespace

namespace {

// One process of the trace: its streams as threads, its ops as complete events.
void write_trace_process(nlohmann::ordered_json& events, int pid, const std::string& name, const Schedule& s, const Prediction& p) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    const char* streams[] = {"compute", "comm", "reduce", "fetch"};
    for (int tid = 0; tid < 4; ++tid)
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", streams[tid]}}}});
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        const OpTiming& t = p.ops[i];
        if (!t.simulated) continue;
        bool c = is_collective(op.kind);
        nlohmann::ordered_json e;
        e["name"] = c ? std::string(op_record_name(op.kind)) + " " + op.caller
                      : std::string(compute_kind_name(op.compute)) + (op.module_name.empty() ? "" : " " + op.module_name);
        e["cat"] = c ? "comm" : "compute";
        e["ph"] = "X";
        e["ts"] = t.start_s * 1e6;
        e["dur"] = t.duration() * 1e6;
        e["pid"] = pid;
        e["tid"] = static_cast<int>(op.stream);
        nlohmann::ordered_json args;
        args["step"] = op.step;
        args["micro"] = op.micro;
        args["phase"] = phase_name(op.phase);
        args["rule"] = rule_name(op.rule);
        if (c) {
            args["bytes"] = op.bytes();
            if (op.group != GroupKind::Dp) args["group"] = group_name(op.group);
            if (op.peer >= 0) args["peer"] = op.peer;
            if (t.wait_s > 0) args["waited_ms"] = t.wait_s * 1e3;
            args["algorithm"] = algorithm_name(t.algorithm);
            args["protocol"] = protocol_name(t.protocol);
        } else {
            args["flops"] = op.flops;
        }
        e["args"] = args;
        events.push_back(std::move(e));
    }
}

void write_trace_document(std::ostream& out, nlohmann::ordered_json events) {
    nlohmann::ordered_json j;
    j["displayTimeUnit"] = "ms";
    j["traceEvents"] = std::move(events);
    out << j.dump() << '\n';
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Schedule& s, const Prediction& p) {
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    std::string ranks = s.meta.world > 1 ? "ranks 0-" + std::to_string(s.meta.world - 1) + " (identical)" : "rank 0";
    if (s.meta.layout.is_3d()) ranks = "rank " + std::to_string(s.meta.rank) + " (its tensor, sequence and expert peers alike)";
    write_trace_process(events, 0, ranks, s, p);
    write_host_trace_events(events, s, p);
    write_trace_document(out, std::move(events));
}

void write_chrome_trace_stages(std::ostream& out, const std::vector<const Schedule*>& stages,
                               const std::vector<const Prediction*>& timings) {
    nlohmann::ordered_json events = nlohmann::ordered_json::array();
    for (size_t k = 0; k < stages.size() && k < timings.size(); ++k) {
        const Schedule& s = *stages[k];
        const std::string name = "stage " + std::to_string(s.meta.pipe_stage) + ": rank " + std::to_string(s.meta.rank);
        write_trace_process(events, static_cast<int>(k), name, s, *timings[k]);
    }
    write_trace_document(out, std::move(events));
}

void write_nccl_tests_table(std::ostream& out, const std::string& op, const std::string& header,
                            const std::vector<BenchRow>& rows) {
    // zerosim's rows as earlier releases printed them: one decimal from 1000 µs (nccl-tests: 100).
    static const NcclTestsLayout layout{.time_width = 7, .one_decimal_from_us = 1000, .not_checked = "N/A"};
    auto kind = collective_named(op);
    bool reduces = kind && collective_info(*kind).reduces, rooted = kind && collective_info(*kind).rooted;
    out << "# zerosim bench: predicted " << op << " (" << header << ")\n";
    write_nccl_tests_header(out);
    double sum_bus = 0;
    for (const auto& r : rows) {
        NcclTestsRow shown = r;
        shown.type = "float";
        shown.redop = reduces ? "sum" : "none";
        shown.root = rooted ? 0 : -1;
        shown.wrong = shown.inplace_wrong = -1;
        shown.inplace_time_us = r.time_us;
        shown.inplace_algbw_gbs = r.algbw_gbs;
        shown.inplace_busbw_gbs = r.busbw_gbs;
        write_nccl_tests_row(out, shown, layout);
        sum_bus += r.busbw_gbs;
    }
    // What NCCL_DEBUG_SUBSYS=TUNING would name, as size ranges: a comment, so the table stays
    // nccl-tests' own.
    std::string picks;
    for (size_t i = 0; i < rows.size();) {
        size_t j = i;
        while (j + 1 < rows.size() && rows[j + 1].algorithm == rows[i].algorithm) ++j;
        if (!rows[i].algorithm.empty())
            picks += (picks.empty() ? "" : "; ") + rows[i].algorithm + " " + ds_size_string(rows[i].bytes) +
                     (j > i ? " to " + ds_size_string(rows[j].bytes) : "");
        i = j + 1;
    }
    if (!picks.empty()) out << "# Algorithm/protocol (predicted tuner choice): " << picks << "\n";
    write_nccl_tests_footer(out, "N/A (predicted)", fmt("%.4f", rows.empty() ? 0.0 : sum_bus / static_cast<double>(rows.size())));
}

}  // namespace zerosim
