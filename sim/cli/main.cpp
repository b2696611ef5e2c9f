// zerosim: the command-line front of sim/ (and, as they arrive, validate/).
// Exit codes: 0 success, 2 bad input (one line on stderr naming file and field), 1 other failure.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "inputs/ds_config.hpp"
#include "core/json_input.hpp"
#include "timing/engine.hpp"
#include "analysis/explain.hpp"
#include "analysis/memory.hpp"
#include "inputs/model.hpp"
#include "formats/comms_log.hpp"
#include "prediction/predict_outputs.hpp"
#include "prediction/report.hpp"
#include "formats/schedule_outputs.hpp"
#include "schedule/schedule.hpp"
#include "prediction/sweep.hpp"
#include "timing/topology.hpp"
#include "validate/calibrate.hpp"
#include "validate/diff.hpp"
#include "formats/measured_logs.hpp"

#include <unistd.h>
#include <chrono>
#include <thread>

using namespace zerosim;

namespace {

int input_error(const Error& e) {
    std::cerr << "zerosim: error: " << e.what() << '\n';
    return 2;
}

// Parses "1,3,5" into step indices.
Result<std::vector<int>> parse_step_list(const std::string& text) {
    std::vector<int> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        try {
            size_t used = 0;
            int v = std::stoi(item, &used);
            if (used != item.size()) throw std::invalid_argument(item);
            out.push_back(v);
        } catch (const std::exception&) {
            return Error{"", "--overflow-steps", "expected comma-separated step numbers, found '" + item + "'"};
        }
    }
    return out;
}

// Writes to -o FILE through a temporary file and a rename, so a failed run leaves no half file;
// refuses to write over an input.
int emit(const std::string& path, const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write) {
    if (path.empty() || path == "-") {
        write(std::cout);
        std::cout.flush();
        return std::cout ? 0 : 1;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& in : inputs)
        if (fs::exists(path, ec) && fs::equivalent(path, in, ec))
            return input_error(Error{path, "-o", "is one of the inputs; zerosim never overwrites what it was given"});
    std::string tmp = path + ".tmp-zerosim";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return input_error(Error{path, "-o", "cannot open for writing"});
        write(f);
        f.flush();
        if (!f) {
            fs::remove(tmp, ec);
            std::cerr << "zerosim: error: " << path << ": write failed\n";
            return 1;
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        std::cerr << "zerosim: error: " << path << ": cannot write: " << ec.message() << '\n';
        return 1;
    }
    return 0;
}

struct ScheduleArgs {
    std::string ds_config;
    std::string model;
    int64_t world = 0;
    int steps = 2;
    int64_t seq_len = 0;
    std::string format = "table";
    std::string output;
    std::string overflow_steps;
    bool log_summary = false;
    bool compute = false;
};

// What a command reads once: the config, the model, and the schedule built from them.
struct Inputs {
    DsConfig cfg;
    Model model;
    Schedule schedule;
};

// Reads the config and the model and builds the schedule; prints warnings on the way.
Result<Inputs> load_inputs(const ScheduleArgs& a) {
    auto cfg = load_ds_config(a.ds_config);
    if (!cfg) return cfg.error();
    if (!cfg->ignored_keys.empty()) {
        std::string keys;
        for (const auto& k : cfg->ignored_keys) keys += (keys.empty() ? "" : ", ") + k;
        std::cerr << "zerosim: warning: " << a.ds_config << ": ignoring keys zerosim does not know: " << keys << '\n';
    }
    if (cfg->zero.offload_optimizer || cfg->zero.offload_param)
        std::cerr << "zerosim: warning: " << a.ds_config
                  << ": offload_optimizer/offload_param are not modelled; the schedule is that of the same config without offload\n";
    auto model = load_model(a.model);
    if (!model) return model.error();
    ScheduleOptions opt;
    opt.world = a.world;
    opt.steps = a.steps;
    opt.seq_len = a.seq_len;
    auto steps = parse_step_list(a.overflow_steps);
    if (!steps) return steps.error();
    opt.overflow_steps = steps.value();
    auto sched = build_schedule(model.value(), cfg.value(), opt);
    if (!sched) return sched.error();
    return Inputs{std::move(cfg).value(), std::move(model).value(), std::move(sched).value()};
}

Result<Schedule> load_schedule(const ScheduleArgs& a) {
    auto in = load_inputs(a);
    if (!in) return in.error();
    return std::move(in.value().schedule);
}

int run_schedule(const ScheduleArgs& a) {
    auto sched = load_schedule(a);
    if (!sched) return input_error(sched.error());
    const Schedule& s = sched.value();
    return emit(a.output, {a.ds_config, a.model}, [&](std::ostream& out) {
        if (a.format == "deepspeed") {
            DeepSpeedLogOptions o;
            o.log_summary = a.log_summary;
            write_schedule_deepspeed(out, s, o);
        } else if (a.format == "json") {
            write_schedule_json(out, s);
        } else {
            TableOptions o;
            o.compute = a.compute;
            write_schedule_table(out, s, o);
        }
    });
}

struct PredictArgs {
    ScheduleArgs sched;
    std::string topology;
    int64_t nodes = 0;
    std::string format = "deepspeed";
    std::string trace;
    std::string timing = "logger";
    bool no_summary = false;
};

int run_predict(PredictArgs& a) {
    auto topo = load_topology(a.topology, a.nodes);
    if (!topo) return input_error(topo.error());
    if (a.sched.world <= 0) a.sched.world = topo->total_gpus();
    if (a.sched.world > topo->total_gpus())
        return input_error(Error{a.topology, "--world",
                                 "world size " + std::to_string(a.sched.world) + " needs more GPUs than " +
                                     std::to_string(topo->nodes) + " nodes x " + std::to_string(topo->gpus_per_node) +
                                     "; pass --nodes " +
                                     std::to_string((a.sched.world + topo->gpus_per_node - 1) / topo->gpus_per_node)});
    auto sched = load_schedule(a.sched);
    if (!sched) return input_error(sched.error());
    if (a.sched.steps > 1 || a.sched.world > 256)
        std::cerr << "zerosim: simulating " << sched->ops.size() << " ops on " << topo->name << " ...\n";
    auto logged = simulate(sched.value(), topo.value(), TimingMode::Synchronized);
    if (!logged) return input_error(logged.error());
    auto overlapped = simulate(sched.value(), topo.value(), TimingMode::Overlapped);
    if (!overlapped) return input_error(overlapped.error());
    // The deepspeed format shows the logger's view unless asked for the overlapped one.
    const Prediction& shown = a.timing == "overlapped" ? overlapped.value() : logged.value();
    PredictReport report{sched.value(), topo.value(), shown, overlapped.value()};
    std::vector<std::string> inputs = {a.sched.ds_config, a.sched.model, a.topology};
    if (!a.trace.empty()) {
        int rc = emit(a.trace, inputs, [&](std::ostream& out) { write_chrome_trace(out, sched.value(), overlapped.value()); });
        if (rc != 0) return rc;
    }
    return emit(a.sched.output, inputs, [&](std::ostream& out) {
        if (a.format == "json")
            write_predicted_json(out, report);
        else if (a.format == "csv")
            write_predicted_csv(out, report);
        else if (a.format == "summary")
            write_step_summary(out, report, "");
        else
            write_predicted_deepspeed(out, report, !a.no_summary);
    });
}

// 1024-based, as DeepSpeed prints sizes ("1.86 GB" = GiB).

struct MemoryArgs {
    ScheduleArgs sched;
    std::string stages = "0,1,2,3";
    std::string format = "text";
    std::string measured;   // a zerorun --json log
};

// zerorun's measured peak bytes per category (the largest over ranks) and its stage and world.
struct MeasuredMemory {
    int stage = -1;
    int64_t world = 0;
    std::map<std::string, int64_t> peak;
};

Result<MeasuredMemory> read_zerorun_memory(const std::string& path) {
    auto doc = read_json_file(path);
    if (!doc) return doc.error();
    MeasuredMemory m;
    try {
        JsonField root(doc.value(), path, "");
        if (!root.has("format") || root.at("format").as_string().find("zerorun") == std::string::npos)
            root.fail_here("expected a zerorun --json log (\"format\": \"zerorun-...\")");
        m.stage = static_cast<int>(root.at("stage").as_integer());
        m.world = root.at("world").as_integer();
        auto ranks = root.at("ranks");
        ranks.expect_array();
        for (size_t i = 0; i < ranks.size(); ++i) {
            auto mem = ranks.at(i).at("memory");
            for (auto it = mem.raw().begin(); it != mem.raw().end(); ++it)
                if (it.value().is_object() && it.value().contains("peak"))
                    m.peak[it.key()] = std::max(m.peak[it.key()], it.value()["peak"].get<int64_t>());
        }
    } catch (const InputFailure& f) {
        return f.error;
    }
    return m;
}

int run_memory(MemoryArgs& a) {
    auto cfg = load_ds_config(a.sched.ds_config);
    if (!cfg) return input_error(cfg.error());
    auto model = load_model(a.sched.model);
    if (!model) return input_error(model.error());
    auto stages = parse_step_list(a.stages);
    if (!stages || stages->empty()) return input_error(Error{"", "--stages", "expected stages such as 0,1,2,3"});
    std::optional<MeasuredMemory> measured;
    if (!a.measured.empty()) {
        auto m = read_zerorun_memory(a.measured);
        if (!m) return input_error(m.error());
        measured = m.value();
        if (measured->world != a.sched.world)
            return input_error(Error{a.measured, "world", "the measured run had " + std::to_string(measured->world) +
                                                             " ranks, --world says " + std::to_string(a.sched.world)});
    }
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    std::ostringstream text;
    text << "Model states per rank: " << model->name << ", " << model->total_numel() << " parameters, "
         << a.sched.world << " ranks, " << dtype_name(cfg->model_dtype) << " (the rank holding the most; KB/MB/GB are 1024-based)\n";
    for (int st : stages.value()) {
        if (st < 0 || st > 3) return input_error(Error{"", "--stages", "stage " + std::to_string(st) + " is not 0..3"});
        DsConfig c = cfg.value();
        if (c.zero.stage != st) {
            c.zero.stage = st;
            c.zero.overlap_comm = st == 3 ? true : c.zero.overlap_comm && st != 0;
        }
        ScheduleOptions o;
        o.world = a.sched.world;
        o.steps = 2;  // stage 3's steady state (prefetch, reuse) starts at the second step
        auto s = build_schedule(model.value(), c, o);
        if (!s) return input_error(s.error());
        MemoryEstimate e = estimate_memory(model.value(), c, s.value());
        nlohmann::ordered_json row;
        row["stage"] = st;
        nlohmann::ordered_json items = nlohmann::ordered_json::array();
        text << "\nstage " << st << ": " << ds_size_string(e.total()) << " per rank\n";
        for (const auto& it : e.items) {
            items.push_back({{"name", it.name}, {"category", it.category}, {"bytes", it.bytes}, {"why", it.why}});
            char line[256];
            std::snprintf(line, sizeof line, "  %-48s %11s  %s\n", it.name.c_str(), ds_size_string(it.bytes).c_str(), it.why.c_str());
            text << line;
        }
        text << "  ZeRO paper " << e.paper_formula << ": " << ds_size_string(e.paper_bytes) << "\n";
        if (e.deepspeed_estimator_bytes >= 0)
            text << "  DeepSpeed's " << e.deepspeed_estimator_formula << ": " << ds_size_string(e.deepspeed_estimator_bytes) << "\n";
        for (const auto& d : e.differences) text << "  differs: " << d << "\n";
        if (measured && measured->stage == st) {
            // zerorun's categories beside the schedule's: it names optimizer states
            // "optimizer_states" and keeps its checking copies apart ("verification").
            static const std::pair<const char*, const char*> cats[] = {
                {"parameters", "parameters"}, {"gradients", "gradients"}, {"optimizer", "optimizer_states"}, {"buckets", "buckets"}};
            text << "  measured by zerorun (" << a.measured << ", peak bytes, largest rank):\n";
            nlohmann::ordered_json mj;
            for (const auto& [ours, theirs] : cats) {
                int64_t p = e.category(ours), m = measured->peak.count(theirs) ? measured->peak.at(theirs) : -1;
                char line[200];
                std::snprintf(line, sizeof line, "    %-12s predicted %12lld  measured %12lld  %s\n", ours, static_cast<long long>(p),
                              static_cast<long long>(m), m < 0 ? "(not reported)" : p == m ? "(equal)" : "");
                text << line;
                mj[ours] = {{"predicted", p}, {"measured", m}};
            }
            row["measured"] = mj;
        }
        row["items"] = items;
        row["total_bytes"] = e.total();
        row["paper_bytes"] = e.paper_bytes;
        row["paper_formula"] = e.paper_formula;
        row["deepspeed_estimator_bytes"] = e.deepspeed_estimator_bytes;
        row["differences"] = e.differences;
        j.push_back(row);
    }
    return emit(a.sched.output, {a.sched.ds_config, a.sched.model}, [&](std::ostream& out) {
        if (a.format == "json")
            out << j.dump(1) << '\n';
        else
            out << text.str();
    });
}

int run_explain(const ScheduleArgs& a) {
    auto in = load_inputs(a);
    if (!in) return input_error(in.error());
    std::string text = explain_schedule(in->model, in->cfg, in->schedule);
    return emit(a.output, {a.ds_config, a.model}, [&](std::ostream& out) { out << text; });
}

struct SweepArgs {
    SweepSpec spec;
    std::vector<std::string> topologies;
    std::string stages = "0,1,2,3";
    std::string nodes = "1";
    std::vector<std::string> sets;
    std::string output;
    std::string plot;
    std::string shard;
    int jobs = 0;
};

// An output path must be writable before minutes of work go into it.
Status check_writable(const std::string& path, const char* flag) {
    if (path.empty() || path == "-") return std::nullopt;
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir) || access(dir.c_str(), W_OK) != 0)
        return Error{path, flag, "cannot write here: " + dir.string() + " is not a writable folder"};
    return std::nullopt;
}

int run_sweep_cmd(SweepArgs& a) {
    SweepSpec& spec = a.spec;
    for (const auto& t : a.topologies) {
        std::stringstream ss(t);
        std::string one;
        while (std::getline(ss, one, ','))
            if (!one.empty()) spec.topologies.push_back(one);
    }
    auto stages = parse_step_list(a.stages);
    if (!stages) return input_error(Error{"", "--stages", "expected stages such as 0,1,2,3"});
    for (int st : stages.value())
        if (st < 0 || st > 3) return input_error(Error{"", "--stages", "stage " + std::to_string(st) + " is not 0..3"});
    spec.stages = stages.value();
    auto nodes = parse_step_list(a.nodes);
    if (!nodes) return input_error(Error{"", "--nodes", "expected node counts such as 1,2,4"});
    for (int n : nodes.value()) {
        if (n < 1) return input_error(Error{"", "--nodes", "node counts must be at least 1"});
        spec.nodes.push_back(n);
    }
    for (const auto& s : a.sets) {
        auto set = parse_sweep_setting(s);
        if (!set) return input_error(set.error());
        spec.settings.push_back(set.value());
    }
    // Inputs are read once, here, so that a bad file is one clear error, not one per point.
    auto inputs = load_sweep_inputs(spec);
    if (!inputs) return input_error(inputs.error());
    if (!spec.ds_config.empty()) {
        auto cfg = parse_ds_config(spec.ds_config, inputs->ds_config.dump());
        if (!cfg) return input_error(cfg.error());
    }
    if (!a.shard.empty()) {
        auto slash = a.shard.find('/');
        try {
            spec.shard = std::stoi(a.shard.substr(0, slash));
            spec.shards = std::stoi(a.shard.substr(slash + 1));
        } catch (const std::exception&) {
            spec.shards = 0;
        }
        if (slash == std::string::npos || spec.shards < 1 || spec.shard < 0 || spec.shard >= spec.shards)
            return input_error(Error{"", "--shard", "expected i/k with 0 <= i < k, found '" + a.shard + "'"});
    }
    if (auto e = check_writable(a.output, "-o")) return input_error(*e);
    if (auto e = check_writable(a.plot, "--plot")) return input_error(*e);
    auto all = sweep_points(spec);
    if (all.empty()) return input_error(Error{"", "--topology/--stages/--nodes", "the grid is empty: nothing to predict"});
    auto points = shard_points(all, spec.shard, spec.shards);
    spec.jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    bool tty = isatty(2);
    auto t0 = std::chrono::steady_clock::now();
    size_t last_pct = 0;
    auto progress = [&](size_t done, size_t total) {
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double left = done > 0 ? el / static_cast<double>(done) * static_cast<double>(total - done) : 0;
        size_t pct = done * 100 / total;
        if (!tty && pct < last_pct + 10 && done != total) return;
        last_pct = pct;
        int bar = static_cast<int>(done * 30 / total);
        std::fprintf(stderr, "%s[%s%s] %zu/%zu points, %.1f s elapsed, about %.1f s left%s", tty ? "\r" : "",
                     std::string(static_cast<size_t>(bar), '#').c_str(), std::string(static_cast<size_t>(30 - bar), ' ').c_str(),
                     done, total, el, left, tty && done != total ? "" : "\n");
    };
    auto rows = run_sweep(spec, inputs.value(), points, progress);
    if (!rows) return input_error(rows.error());
    size_t failed = 0;
    for (const auto& r : rows.value())
        if (!r.error.empty()) ++failed;
    if (failed) std::cerr << "zerosim: warning: " << failed << " point(s) could not be predicted (see the error column)\n";
    std::vector<std::string> files = spec.topologies;
    files.push_back(spec.model);
    if (!spec.ds_config.empty()) files.push_back(spec.ds_config);
    if (!a.plot.empty()) {
        int rc = emit(a.plot, files, [&](std::ostream& out) { write_sweep_svg(out, spec, rows.value()); });
        if (rc) return rc;
    }
    return emit(a.output, files, [&](std::ostream& out) { write_sweep_csv(out, spec, rows.value(), spec.shard == 0); });
}

struct ReportArgs {
    PredictArgs predict;
    std::string measured;
};

int run_report(ReportArgs& a) {
    PredictArgs& p = a.predict;
    auto topo = load_topology(p.topology, p.nodes);
    if (!topo) return input_error(topo.error());
    if (p.sched.world <= 0) p.sched.world = topo->total_gpus();
    auto in = load_inputs(p.sched);
    if (!in) return input_error(in.error());
    const DsConfig& cfg = in->cfg;
    const Model& model = in->model;
    const Schedule& schedule = in->schedule;
    auto logged = simulate(schedule, topo.value(), TimingMode::Synchronized);
    if (!logged) return input_error(logged.error());
    auto overlapped = simulate(schedule, topo.value(), TimingMode::Overlapped);
    if (!overlapped) return input_error(overlapped.error());
    MemoryEstimate mem = estimate_memory(model, cfg, schedule);
    std::string explanation = explain_schedule(model, cfg, schedule);
    std::vector<LoggedOp> measured;
    std::string measured_text;   // read once: its lines for the chart, the whole for the validator
    if (!a.measured.empty()) {
        auto text = read_text_file(a.measured, "log");
        if (!text) return input_error(Error{a.measured, "--measured", "cannot open the measured log"});
        measured_text = std::move(text).value();
        std::istringstream in(measured_text);
        std::string line;
        while (std::getline(in, line))
            if (auto parsed = parse_ds_verbose_line(line)) measured.push_back(parsed->op);
        if (measured.empty())
            return input_error(Error{a.measured, "--measured", "no DeepSpeed comms_logger lines ('comm op: ...') found"});
    }
    ReportInput ri{schedule, topo.value(), logged.value(), overlapped.value(), mem, explanation,
                   a.measured.empty() ? nullptr : &measured, a.measured, ""};
    if (!a.measured.empty()) {
        // The validator's view: the prediction as a log against the measured one.
        MeasuredLog pred_log;
        pred_log.path = "prediction";
        for (size_t i = 0; i < schedule.ops.size(); ++i) {
            const Op& op = schedule.ops[i];
            if (!is_collective(op.kind)) continue;
            LogOp l;
            l.record = op_record_name(op.kind);
            l.caller = op.caller;
            l.bytes = static_cast<double>(op.bytes());
            l.size_text = ds_size_string(op.bytes());
            l.time_ms = logged->ops[i].duration() * 1e3;
            l.line = static_cast<int>(i);
            l.phase = phase_label(op, schedule.meta.grad_accum);
            pred_log.ops.push_back(std::move(l));
        }
        auto meas_log = parse_log(measured_text, a.measured);
        if (!meas_log) return input_error(meas_log.error());
        std::ostringstream d;
        write_diff_text(d, diff_logs(pred_log, meas_log.value(), 0.15, DiffScope::All));
        ri.diff_text = d.str();
    }
    std::vector<std::string> inputs = {p.sched.ds_config, p.sched.model, p.topology};
    if (!a.measured.empty()) inputs.push_back(a.measured);
    return emit(p.sched.output, inputs, [&](std::ostream& out) { write_html_report(out, ri); });
}

Result<int64_t> parse_size(const std::string& text, const char* flag);

struct ValidateArgs {
    std::string predicted, measured;
    double tolerance = 0.15;
    std::string what = "all";
    std::string format = "text";
    double min_ms = 0.0;
    std::string min_bytes;
    std::string output;
};

// Exit codes: 0 within tolerance, 1 not, 2 unreadable input.
int run_validate(const ValidateArgs& a) {
    auto pred = read_log(a.predicted);
    if (!pred) return input_error(pred.error());
    auto meas = read_log(a.measured);
    if (!meas) return input_error(meas.error());
    if (!(a.tolerance >= 0)) return input_error(Error{"", "--tolerance", "expected a fraction such as 0.15"});
    bool tables = pred->format == LogFormat::NcclTests, tables_m = meas->format == LogFormat::NcclTests;
    if (tables != tables_m)
        return input_error(Error{a.measured, "", std::string("cannot compare a ") + log_format_name(pred->format) + " log with a " +
                                                     log_format_name(meas->format) + " one"});
    DiffScope scope = a.what == "ops" ? DiffScope::Ops : a.what == "time" ? DiffScope::Time : DiffScope::All;
    double min_bytes = 0;
    if (!a.min_bytes.empty()) {
        auto mb = parse_size(a.min_bytes, "--min-bytes");
        if (!mb) return input_error(mb.error());
        min_bytes = static_cast<double>(*mb);
    }
    DiffReport r = tables ? diff_nccl_tables(pred.value(), meas.value(), a.tolerance)
                          : diff_logs(pred.value(), meas.value(), a.tolerance, scope, a.min_ms, min_bytes);
    int rc = emit(a.output, {a.predicted, a.measured}, [&](std::ostream& out) {
        if (a.format == "json")
            write_diff_json(out, r);
        else if (a.format == "row")
            write_diff_row(out, r);
        else if (a.format == "md")
            write_diff_markdown(out, r);
        else
            write_diff_text(out, r);
    });
    if (rc) return rc;
    return r.pass() ? 0 : 1;
}

struct CalibrateArgs {
    std::string topology;
    std::vector<std::string> files;
    std::string op;
    int64_t world = 0;
    int64_t nodes = 0;
    std::string column = "as-deepspeed";
    std::string output;
};

int run_calibrate(const CalibrateArgs& a) {
    // Each file is read once: the topology both parsed and kept as JSON (the output is the input
    // plus a calibration block), each table parsed and its head searched for the collective.
    auto topo_text = read_text_file(a.topology, "topology file");
    if (!topo_text) return input_error(topo_text.error());
    auto topo = parse_topology(a.topology, topo_text.value(), a.nodes);
    if (!topo) return input_error(topo.error());
    auto doc = parse_json_text(topo_text.value(), a.topology);
    if (!doc) return input_error(doc.error());
    int64_t world = a.world > 0 ? a.world : topo->total_gpus();
    std::vector<Measurement> rows;
    for (const auto& f : a.files) {
        auto text = read_text_file(f, "log");
        if (!text) return input_error(text.error());
        auto log = parse_log(text.value(), f);
        if (!log) return input_error(log.error());
        if (log->format != LogFormat::NcclTests)
            return input_error(Error{f, "", "calibrate reads nccl-tests style tables (nccl-tests, zerorun bench, zerosim bench)"});
        OpKind op = OpKind::AllReduce;
        if (!a.op.empty()) {
            auto named = collective_named(a.op);
            if (!named) return input_error(Error{"", "--op", "unknown collective '" + a.op + "'"});
            op = *named;
        } else {
            if (!guess_collective(text->substr(0, 4000), op) && !guess_collective(f, op))
                return input_error(Error{f, "--op", "cannot tell which collective this table measured; pass --op"});
        }
        // The column that times the op as it will be used; a table without in-place columns
        // (some nccl-tests builds, older logs) gives its out-of-place time.
        bool in_place = a.column == "in-place" || (a.column == "as-deepspeed" && deepspeed_calls_in_place(op));
        for (const auto& t : log->tables)
            for (const auto& r : t.rows) {
                double us = in_place && r.inplace_time_us > 0 ? r.inplace_time_us : r.time_us;
                rows.push_back({op, r.bytes, us, world, f + ": size " + std::to_string(r.bytes)});
            }
    }
    auto cal = calibrate(topo.value(), rows);
    if (!cal) return input_error(Error{a.files.front(), cal.error().field, cal.error().message});
    auto show = [](const std::string& what, const FitResult& f) {
        char line[256];
        std::snprintf(line, sizeof line, "  %-16s latency x%.4f  bandwidth x%.4f  R^2 %.5f  median |residual| %.1f%%  (%zu rows)\n",
                      what.c_str(), f.latency_scale, f.bandwidth_scale, f.r2, f.median_abs_error * 100, f.used);
        std::cerr << line;
    };
    std::cerr << "zerosim calibrate: " << cal->global.used << " rows fitted (" << cal->global.scope << ")\n";
    show("all collectives", cal->global);
    for (const auto& [name, f] : cal->per_collective) show(name, f);
    for (const auto& u : cal->global.unused) std::cerr << "  not used: " << u << "\n";
    Json out = doc.value();
    Json jc = Json::object();
    jc["bandwidth_scale"] = cal->global.bandwidth_scale;
    jc["latency_scale"] = cal->global.latency_scale;
    if (!cal->per_collective.empty()) {
        Json per = Json::object();
        for (const auto& [name, f] : cal->per_collective)
            per[name] = {{"bandwidth_scale", f.bandwidth_scale}, {"latency_scale", f.latency_scale}, {"rows", f.used}, {"r2", f.r2}};
        jc["per_collective"] = per;
    }
    jc["fitted_from"] = a.files;
    jc["column"] = a.column;
    out["calibration"] = jc;
    if (a.output.empty()) return input_error(Error{"", "-o", "give the calibrated topology a file name (the input is never overwritten)"});
    std::vector<std::string> inputs = a.files;
    inputs.push_back(a.topology);
    return emit(a.output, inputs, [&](std::ostream& o) { o << out.dump(2) << '\n'; });
}

// "8", "64K", "8M", "8G" (binary multiples, as nccl-tests reads them).
Result<int64_t> parse_size(const std::string& text, const char* flag) {
    if (text.empty()) return Error{"", flag, "expected a size such as 8, 64K, 8M or 8G"};
    char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    int64_t mult = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : unit == 'G' ? 1024LL * 1024 * 1024 : 1;
    std::string digits = mult == 1 ? text : text.substr(0, text.size() - 1);
    try {
        size_t used = 0;
        long long v = std::stoll(digits, &used);
        if (used != digits.size() || v <= 0) throw std::invalid_argument(text);
        return static_cast<int64_t>(v) * mult;
    } catch (const std::exception&) {
        return Error{"", flag, "expected a positive size such as 8, 64K, 8M or 8G, found '" + text + "'"};
    }
}

struct BenchArgs {
    std::string topology;
    int64_t nodes = 0;
    int64_t world = 0;
    std::string op = "all_reduce";
    std::string min = "8";
    std::string max = "128M";
    int64_t factor = 2;
    int gpus_per_thread = 1;
    std::string algo;
    std::string proto;
    std::string output;
};

// --algo / --proto as NCCL_ALGO / NCCL_PROTO: checked against what the tuner can weigh here.
Result<TunerChoice> tuner_choice(const BenchArgs& a, const Topology& t, OpKind kind, int64_t world) {
    TunerChoice c;
    if (!a.algo.empty()) {
        c.algorithm = algorithm_named(a.algo);
        if (!c.algorithm) return Error{"", "--algo", "unknown algorithm '" + a.algo + "'; expected ring, tree or nvls"};
    }
    if (!a.proto.empty()) {
        c.protocol = protocol_named(a.proto);
        if (!c.protocol) return Error{"", "--proto", "unknown protocol '" + a.proto + "'; expected LL, LL128 or Simple"};
    }
    std::vector<TunerCandidate> all = tuner_candidates(t, kind, world);
    if (std::none_of(all.begin(), all.end(), [&](const TunerCandidate& x) { return c.allows(x); })) {
        std::string avail;
        for (const auto& x : all)
            avail += (avail.empty() ? "" : ", ") + algorithm_protocol_name(x.algorithm, x.protocol);
        return Error{t.source, a.algo.empty() ? "--proto" : "--algo",
                     "NCCL has no " + (a.algo.empty() ? std::string("") : a.algo + " ") +
                         (a.proto.empty() ? std::string("") : a.proto + " ") + "for " + a.op + " on " +
                         std::to_string(world) + " ranks of " + t.name + "; it weighs " + avail};
    }
    return c;
}

int run_bench(const BenchArgs& a) {
    auto kind = collective_named(a.op);
    if (!kind)
        return input_error(Error{"", "--op", "unknown collective '" + a.op +
                                                 "'; expected all_reduce, all_gather, reduce_scatter, broadcast or reduce"});
    auto topo = load_topology(a.topology, a.nodes);
    if (!topo) return input_error(topo.error());
    int64_t world = a.world > 0 ? a.world : topo->total_gpus();
    if (world > topo->total_gpus())
        return input_error(Error{a.topology, "--world", "world size " + std::to_string(world) + " exceeds the topology's " +
                                                            std::to_string(topo->total_gpus()) + " GPUs; pass --nodes"});
    auto lo = parse_size(a.min, "--min");
    if (!lo) return input_error(lo.error());
    auto hi = parse_size(a.max, "--max");
    if (!hi) return input_error(hi.error());
    if (*hi < *lo) return input_error(Error{"", "--max", "must be at least --min"});
    if (a.factor < 2) return input_error(Error{"", "--factor", "expected 2 or more"});
    if (a.gpus_per_thread < 1 || a.gpus_per_thread > topo->gpus_per_node)
        return input_error(Error{"", "--gpus-per-thread", "expected 1 to " + std::to_string(topo->gpus_per_node) +
                                                              " (the GPUs of one node)"});
    auto only = tuner_choice(a, topo.value(), *kind, world);
    if (!only) return input_error(only.error());
    std::vector<BenchRow> rows;
    const CollectiveInfo& info = collective_info(*kind);
    for (int64_t size = *lo; size <= *hi; size *= a.factor) {
        double logged = logged_bytes_of_buffer(*kind, static_cast<double>(size), world);
        BenchRow r;
        r.bytes = size;
        r.count = size / 4;
        CollectivePlan plan;
        r.time_us = back_to_back_call_us(
            topo.value(), simulate_single_collective(topo.value(), *kind, logged, world, &plan, only.value()) * 1e6,
            a.gpus_per_thread);
        r.algorithm = algorithm_protocol_name(plan.algorithm, plan.protocol);
        r.algbw_gbs = r.time_us > 0 ? static_cast<double>(size) / (r.time_us * 1e3) : 0.0;
        r.busbw_gbs = r.algbw_gbs * info.bus_factor(world);
        rows.push_back(r);
        if (size > INT64_MAX / a.factor) break;
    }
    std::string header = topo->name + ", " + std::to_string(world) + " ranks on " + std::to_string(topo->nodes) + " x " +
                         std::to_string(topo->gpus_per_node) + ", " + std::to_string(a.gpus_per_thread) +
                         (a.gpus_per_thread == 1 ? " GPU" : " GPUs") + " per host thread";
    return emit(a.output, {a.topology}, [&](std::ostream& out) { write_nccl_tests_table(out, a.op, header, rows); });
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"zerosim: what DeepSpeed ZeRO puts on the network, op by op"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "zerosim 0.1.0 (DeepSpeed dialect 0.14.2)");

    ScheduleArgs sa;
    auto* sched = app.add_subcommand(
        "schedule", "List every collective (and compute segment) ZeRO issues for a model, config and world size");
    sched->add_option("--ds-config", sa.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize")->required();
    sched->add_option("--model", sa.model, "Hugging Face config.json (gpt2, gpt_neox, llama...) or a parameter-list JSON")
        ->required();
    sched->add_option("--world", sa.world, "Data-parallel world size (number of ranks)")->required();
    sched->add_option("--steps", sa.steps, "Optimizer steps to list")->capture_default_str();
    sched->add_option("--seq-len", sa.seq_len, "Sequence length for compute estimates (default: the model's, else 1024)");
    sched->add_option("--format", sa.format, "deepspeed (comms_logger lines), table, or json (the schedule IR)")
        ->check(CLI::IsMember({"deepspeed", "table", "json"}))
        ->capture_default_str();
    sched->add_option("-o,--output", sa.output, "Write to this file instead of standard output");
    sched->add_option("--overflow-steps", sa.overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    sched->add_flag("--log-summary", sa.log_summary, "deepspeed format: end with deepspeed.comm.log_summary()'s table");
    sched->add_flag("--compute", sa.compute, "table format: include compute segments");

    auto add_schedule_inputs = [](CLI::App* sub, ScheduleArgs& a, bool world_required) {
        sub->add_option("--ds-config", a.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize")->required();
        sub->add_option("--model", a.model, "Hugging Face config.json (gpt2, gpt_neox, llama...) or a parameter-list JSON")
            ->required();
        auto* w = sub->add_option("--world", a.world, "Data-parallel world size (number of ranks)");
        if (world_required) w->required();
        sub->add_option("--steps", a.steps, "Optimizer steps")->capture_default_str();
        sub->add_option("--seq-len", a.seq_len, "Sequence length for compute (default: the model's, else 1024)");
        sub->add_option("-o,--output", a.output, "Write to this file instead of standard output");
        sub->add_option("--overflow-steps", a.overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    };

    PredictArgs pa;
    auto* pred = app.add_subcommand("predict", "Time the schedule on a topology by discrete-event simulation (SimGrid)");
    add_schedule_inputs(pred, pa.sched, false);
    pred->add_option("--topology", pa.topology, "Topology JSON (see topologies/README.md)")->required();
    pred->add_option("--nodes", pa.nodes, "Scale the topology's node design to this many nodes");
    pred->add_option("--format", pa.format,
                     "deepspeed (comms_logger lines, summary and step times), json or csv (per op), summary (step times)")
        ->check(CLI::IsMember({"deepspeed", "json", "csv", "summary"}))
        ->capture_default_str();
    pred->add_option("--trace", pa.trace, "Write a Chrome-trace timeline (open in Perfetto or chrome://tracing)");
    pred->add_flag("--no-log-summary", pa.no_summary, "deepspeed format: leave out the log_summary() table");
    pred->add_option("--timing", pa.timing,
                     "op times in the deepspeed format: logger (synchronised after every op, as DeepSpeed's comms "
                     "logger measures) or overlapped (as the hardware runs them)")
        ->check(CLI::IsMember({"logger", "overlapped"}))
        ->capture_default_str();

    BenchArgs ba;
    auto* bench = app.add_subcommand("bench", "Predicted nccl-tests table for one collective over a size sweep");
    bench->add_option("--topology", ba.topology, "Topology JSON")->required();
    bench->add_option("--nodes", ba.nodes, "Scale the topology to this many nodes");
    bench->add_option("--world", ba.world, "Ranks (default: every GPU of the topology)");
    bench->add_option("--op", ba.op, "all_reduce, all_gather, reduce_scatter, broadcast or reduce")->capture_default_str();
    bench->add_option("-b,--min", ba.min, "Smallest size (bytes; K, M, G suffixes)")->capture_default_str();
    bench->add_option("-e,--max", ba.max, "Largest size")->capture_default_str();
    bench->add_option("-f,--factor", ba.factor, "Size multiplier between rows")->capture_default_str();
    bench->add_option("-g,--gpus-per-thread", ba.gpus_per_thread,
                      "GPUs one host thread drives, as nccl-tests -g (1: one process per GPU, as DeepSpeed runs)")
        ->capture_default_str();
    bench->add_option("--algo", ba.algo, "Only this algorithm, as NCCL_ALGO: ring, tree or nvls (default: NCCL's tuner picks)");
    bench->add_option("--proto", ba.proto, "Only this protocol, as NCCL_PROTO: LL, LL128 or Simple (default: NCCL's tuner picks)");
    bench->add_option("-o,--output", ba.output, "Write to this file instead of standard output");

    MemoryArgs ma;
    auto* mem = app.add_subcommand("memory", "Model-state memory per rank and stage, beside the ZeRO paper and DeepSpeed's estimator");
    add_schedule_inputs(mem, ma.sched, true);
    mem->add_option("--stages", ma.stages, "Stages to show")->capture_default_str();
    mem->add_option("--format", ma.format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
    mem->add_option("--measured", ma.measured, "A zerorun --json log to set its measured memory beside the prediction");

    ScheduleArgs ea;
    auto* expl = app.add_subcommand("explain", "Why each collective is there, what the config keys do, paper volume vs DeepSpeed");
    add_schedule_inputs(expl, ea, true);

    SweepArgs swa;
    auto* sweep = app.add_subcommand("sweep", "Predict a grid of stages, node counts, topologies and DeepSpeed settings");
    sweep->add_option("--model", swa.spec.model, "Hugging Face config.json or parameter-list JSON")->required();
    sweep->add_option("--ds-config", swa.spec.ds_config, "DeepSpeed config (default: DeepSpeed's defaults, micro batch 1)");
    sweep->add_option("--topology", swa.topologies, "Topology files (repeat or comma-separate)")->required();
    sweep->add_option("--stages", swa.stages, "ZeRO stages")->capture_default_str();
    sweep->add_option("--nodes", swa.nodes, "Node counts (world = nodes x GPUs per node)")->capture_default_str();
    sweep->add_option("--set", swa.sets, "A DeepSpeed key and its values, e.g. zero_optimization.reduce_bucket_size=5e7,5e8");
    sweep->add_option("--steps", swa.spec.steps, "Steps per prediction (the last one is reported)")->capture_default_str();
    sweep->add_option("--seq-len", swa.spec.seq_len, "Sequence length for compute");
    sweep->add_option("-o,--output", swa.output, "CSV file (default: standard output)");
    sweep->add_option("--plot", swa.plot, "SVG plot of step time and memory against ranks");
    sweep->add_option("--jobs", swa.jobs, "Worker processes (default: every core)");
    sweep->add_option("--shard", swa.shard, "i/k: predict the i-th of k contiguous parts (0-based); concatenating the CSVs gives the whole grid");

    ReportArgs ra;
    auto* report = app.add_subcommand("report", "One self-contained HTML report: timeline, ops, memory, explanation, measured diff");
    add_schedule_inputs(report, ra.predict.sched, false);
    report->add_option("--topology", ra.predict.topology, "Topology JSON")->required();
    report->add_option("--nodes", ra.predict.nodes, "Scale the topology to this many nodes");
    report->add_option("--measured", ra.measured, "A measured DeepSpeed comms_logger log (real DeepSpeed or zerorun)");

    ValidateArgs va;
    auto* val = app.add_subcommand("validate", "Diff a predicted log against a measured one (DeepSpeed, zerorun, nccl-tests)");
    val->add_option("predicted", va.predicted, "Predicted log (zerosim predict output, or any supported log)")->required();
    val->add_option("measured", va.measured, "Measured log: DeepSpeed comms_logger output, zerorun log, or nccl-tests output")
        ->required();
    val->add_option("--tolerance", va.tolerance, "Largest median relative time error that passes")->capture_default_str();
    val->add_option("--what", va.what, "ops (structure only), time, or all")
        ->check(CLI::IsMember({"ops", "time", "all"}))
        ->capture_default_str();
    val->add_option("--format", va.format, "text, json, md, or row (one tab-separated line for scripts)")
        ->check(CLI::IsMember({"text", "json", "md", "row"}))
        ->capture_default_str();
    val->add_option("--min-ms", va.min_ms, "Leave ops shorter than this (on both sides) out of the time error");
    val->add_option("--min-bytes", va.min_bytes, "Leave ops smaller than this (e.g. 256K) out of the time error");
    val->add_option("-o,--output", va.output, "Write the report to this file");

    CalibrateArgs ca;
    auto* cal = app.add_subcommand("calibrate", "Fit a topology's latency and bandwidth terms to measured collective tables");
    cal->add_option("--topology", ca.topology, "The topology to calibrate")->required();
    cal->add_option("tables", ca.files, "nccl-tests style tables (nccl-tests, zerorun bench)")->required();
    cal->add_option("--op", ca.op, "The collective the tables measured (default: read from the file)");
    cal->add_option("--world", ca.world, "Ranks in the measurements (default: every GPU of the topology)");
    cal->add_option("--nodes", ca.nodes, "Scale the topology to this many nodes");
    cal->add_option("--column", ca.column,
                    "Which time of each row to fit: out-of-place, in-place, or as-deepspeed (in-place for all_reduce, "
                    "broadcast and reduce, out-of-place for all_gather and reduce_scatter, as DeepSpeed calls them)")
        ->check(CLI::IsMember({"as-deepspeed", "out-of-place", "in-place"}))
        ->capture_default_str();
    cal->add_option("-o,--output", ca.output, "The calibrated topology file to write")->required();

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return 2;
    }
    try {
        if (app.got_subcommand(sched)) return run_schedule(sa);
        if (app.got_subcommand(pred)) return run_predict(pa);
        if (app.got_subcommand(bench)) return run_bench(ba);
        if (app.got_subcommand(mem)) return run_memory(ma);
        if (app.got_subcommand(expl)) return run_explain(ea);
        if (app.got_subcommand(sweep)) return run_sweep_cmd(swa);
        if (app.got_subcommand(report)) return run_report(ra);
        if (app.got_subcommand(val)) return run_validate(va);
        if (app.got_subcommand(cal)) return run_calibrate(ca);
    } catch (const std::bad_alloc&) {
        std::cerr << "zerosim: error: out of memory\n";
        return 1;
    }
    return 1;
}
