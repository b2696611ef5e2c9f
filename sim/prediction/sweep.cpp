#include "prediction/sweep.hpp"

#include <tuple>
#include "prediction/gathered_budget.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "core/number_list.hpp"
#include "inputs/ds_config.hpp"
#include "timing/engine.hpp"
#include "analysis/explain.hpp"
#include "analysis/fit.hpp"
#include "schedule/what_if.hpp"
#include "prediction/what_if_compare.hpp"
#include "prediction/sweep_network.hpp"
#include "analysis/memory.hpp"
#include "inputs/model.hpp"
#include "inputs/neox_config.hpp"
#include "schedule/schedule.hpp"
#include "timing/topology.hpp"

namespace zerosim {

namespace {

// The DeepSpeed keys a sweep may set: those zerosim reads.
const std::vector<std::string>& settable_keys() {
    static const std::vector<std::string> keys = {
        "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping",
        "communication_data_type", "fp16.enabled", "bf16.enabled", "bf16.check_grad_overflow", "data_types.grad_accum_dtype",
        "zero_optimization.stage", "zero_optimization.contiguous_gradients", "zero_optimization.reduce_scatter",
        "zero_optimization.reduce_bucket_size", "zero_optimization.use_multi_rank_bucket_allreduce",
        "zero_optimization.allgather_partitions", "zero_optimization.allgather_bucket_size",
        "zero_optimization.overlap_comm", "zero_optimization.round_robin_gradients", "zero_optimization.sub_group_size",
        "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold",
        "zero_optimization.stage3_model_persistence_threshold", "zero_optimization.stage3_max_live_parameters",
        "zero_optimization.stage3_max_reuse_distance",
        // ZeRO++ and MiCS (stage 3; issue 17).
        "zero_optimization.zero_hpz_partition_size", "zero_optimization.zero_quantized_weights",
        "zero_optimization.zero_quantized_gradients", "zero_optimization.mics_shard_size"};
    return keys;
}

// A command-line value as JSON: true/false, a number, else a string.
Json value_of(const std::string& v) {
    if (v == "true") return true;
    if (v == "false") return false;
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (end && *end == '\0' && !v.empty()) {
        if (d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
        return d;
    }
    return v;
}

void set_path(Json& doc, const std::string& key, const Json& value) {
    Json* cur = &doc;
    std::stringstream ss(key);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(ss, part, '.')) parts.push_back(part);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
        if (!cur->contains(parts[i]) || !(*cur)[parts[i]].is_object()) (*cur)[parts[i]] = Json::object();
        cur = &(*cur)[parts[i]];
    }
    (*cur)[parts.back()] = value;
}

}  // namespace

Result<SweepSetting> parse_sweep_setting(const std::string& text) {
    auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        return Error{"", "--set", "expected key=value[,value...], found '" + text + "'"};
    SweepSetting s;
    s.key = text.substr(0, eq);
    const auto& keys = settable_keys();
    if (std::find(keys.begin(), keys.end(), s.key) == keys.end() && !is_network_key(s.key)) {
        std::vector<std::string> known = keys;   // the topology's network keys, too (sweep_network.hpp)
        known.insert(known.end(), network_keys().begin(), network_keys().end());
        std::string best = closest_key(s.key, known);
        return Error{"", "--set", "unknown DeepSpeed key '" + s.key + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?")};
    }
    std::stringstream ss(text.substr(eq + 1));
    std::string v;
    while (std::getline(ss, v, ','))
        if (!v.empty()) s.values.push_back(v);
    if (s.values.empty()) return Error{"", "--set", "no values for '" + s.key + "'"};
    if (is_network_key(s.key))
        for (const auto& value : s.values)
            if (auto e = check_network_value(s.key, value)) return *e;
    return s;
}

Status apply_sweep_flags(const SweepFlags& f, SweepSpec& spec) {
    for (const auto& t : f.topologies) {
        std::stringstream ss(t);
        std::string one;
        while (std::getline(ss, one, ','))
            if (!one.empty()) spec.topologies.push_back(one);
    }
    auto stages = parse_stage_list(f.stages);
    if (!stages) return stages.error();
    spec.stages = stages.value();
    auto nodes = parse_int_list(f.nodes, "--nodes", "node counts");
    if (!nodes) return Error{"", "--nodes", "expected node counts such as 1,2,4"};
    for (int n : nodes.value()) {
        if (n < 1) return Error{"", "--nodes", "node counts must be at least 1"};
        spec.nodes.push_back(n);
    }
    for (const auto& text : f.sets) {
        auto set = parse_sweep_setting(text);
        if (!set) return set.error();
        // The stage is the grid's own axis: a --set of it would predict one stage under another's label.
        if (set->key == "zero_optimization.stage")
            return Error{"", "--set", "zero_optimization.stage is the sweep's --stages axis (each row's stage column); give "
                                      "--stages " + text.substr(text.find('=') + 1) + " instead"};
        for (const auto& earlier : spec.settings)
            if (earlier.key == set->key)
                return Error{"", "--set", "'" + set->key + "' given twice; give its values once, comma-separated (" + set->key +
                                              "=a,b)"};
        spec.settings.push_back(set.value());
    }
    for (auto [text, flag, list] : {std::tuple{&f.pp, "--pp", &spec.pp}, std::tuple{&f.tp, "--tp", &spec.tp},
                                    std::tuple{&f.sp, "--sp", &spec.sp}, std::tuple{&f.ep, "--ep", &spec.ep}}) {
        auto sizes = parse_size_list(*text, flag);
        if (!sizes) return sizes.error();
        *list = std::move(sizes).value();
    }
    if (!f.shard.empty()) {
        auto slash = f.shard.find('/');
        try {
            spec.shard = std::stoi(f.shard.substr(0, slash));
            spec.shards = std::stoi(f.shard.substr(slash + 1));
        } catch (const std::exception&) {
            spec.shards = 0;
        }
        if (slash == std::string::npos || spec.shards < 1 || spec.shard < 0 || spec.shard >= spec.shards)
            return Error{"", "--shard", "expected i/k with 0 <= i < k, found '" + f.shard + "'"};
    }
    return std::nullopt;
}

std::function<void(size_t, size_t)> sweep_progress(std::FILE* out, bool tty) {
    auto t0 = std::chrono::steady_clock::now();
    auto last_pct = std::make_shared<size_t>(0);
    auto last_line_s = std::make_shared<double>(0.0);
    return [=](size_t done, size_t total) {
        double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double left = done > 0 ? el / static_cast<double>(done) * static_cast<double>(total - done) : 0;
        size_t pct = done * 100 / total;
        // Off a terminal: every 10%, and at least every kSweepProgressS seconds of a long sweep.
        if (!tty && pct < *last_pct + 10 && done != total && el - *last_line_s < kSweepProgressS) return;
        *last_pct = pct;
        *last_line_s = el;
        int bar = static_cast<int>(done * 30 / total);
        std::fprintf(out, "%s[%s%s] %zu/%zu points, %.1f s elapsed, about %.1f s left%s", tty ? "\r" : "",
                     std::string(static_cast<size_t>(bar), '#').c_str(), std::string(static_cast<size_t>(30 - bar), ' ').c_str(),
                     done, total, el, left, tty && done != total ? "" : "\n");
    };
}

std::vector<SweepPoint> sweep_points(const SweepSpec& spec) {
    std::vector<SweepPoint> out;
    std::vector<std::vector<std::string>> combos = {{}};
    for (const auto& s : spec.settings) {
        std::vector<std::vector<std::string>> next;
        for (const auto& c : combos)
            for (const auto& v : s.values) {
                auto d = c;
                d.push_back(v);
                next.push_back(std::move(d));
            }
        combos = std::move(next);
    }
    for (const auto& t : spec.topologies)
        for (int st : spec.stages)
            for (const auto& c : combos)
                for (int64_t n : spec.nodes)
                    for (int64_t pp : spec.pp)
                        for (int64_t tp : spec.tp)
                            for (int64_t sp : spec.sp)
                                for (int64_t ep : spec.ep) {
                                    SweepPoint p;
                                    p.index = out.size();
                                    p.topology = t;
                                    p.nodes = n;
                                    p.stage = st;
                                    p.values = c;
                                    p.pp = pp;
                                    p.tp = tp;
                                    p.sp = sp;
                                    p.ep = ep;
                                    out.push_back(std::move(p));
                                }
    return out;
}

std::vector<SweepPoint> runnable_layouts(const std::vector<SweepPoint>& points, const SweepInputs& in,
                                         std::map<std::string, size_t>& dropped, bool pipe_engine) {
    std::vector<SweepPoint> out;
    for (const SweepPoint& p : points) {
        const auto t = in.topologies.find(p.topology);
        const int64_t world = t == in.topologies.end() ? 0 : p.nodes * t->second.gpus_per_node;
        const int64_t cut = p.pp * p.tp * p.sp;
        const char* why = nullptr;
        if (world > 0 && world % cut != 0)
            why = "pp x tp x sp does not divide the world";
        else if (world > 0 && (world / cut) % p.ep != 0)
            why = "ep does not divide the data-parallel ranks";
        else if ((p.pp > 1 || pipe_engine) && p.stage > 1)
            why = "a pipeline runs ZeRO stage 0 or 1 only (DeepSpeed's PipelineEngine asserts it)";
        if (why) {
            ++dropped[why];
            continue;
        }
        out.push_back(p);
        out.back().index = out.size() - 1;
    }
    return out;
}

std::vector<SweepPoint> shard_points(const std::vector<SweepPoint>& all, int shard, int shards) {
    size_t n = all.size(), lo = n * static_cast<size_t>(shard) / static_cast<size_t>(shards),
           hi = n * static_cast<size_t>(shard + 1) / static_cast<size_t>(shards);
    return std::vector<SweepPoint>(all.begin() + static_cast<long>(lo), all.begin() + static_cast<long>(hi));
}

Result<SweepInputs> load_sweep_inputs(const SweepSpec& spec) {
    SweepInputs in;
    if (!spec.neox_config.empty()) {
        auto n = load_neox_config(spec.neox_config, spec.vocab_size, spec.release);
        if (!n) return n.error();
        in.model = std::move(n->model);
        in.ds_config = std::move(n->ds_config_doc);
        in.neox_pipe = n->pipe;
        in.neox_tensor = n->tensor;
        in.neox_partition = n->partition_method;
    } else {
        auto model = load_model(spec.model);
        if (!model) return model.error();
        in.model = std::move(model).value();
    }
    if (!spec.ds_config.empty()) {
        auto d = read_ds_config_document(spec.ds_config);
        if (!d) return d.error();
        in.ds_config = std::move(d).value();
    }
    for (const auto& path : spec.topologies) {
        auto t = load_topology(path);
        if (!t) return t.error();
        in.topologies[path] = std::move(t).value();
    }
    return in;
}

Status check_sweep_values(const SweepSpec& spec, const SweepInputs& in) {
    Json base = in.ds_config;
    if (!base.contains("train_micro_batch_size_per_gpu") && !base.contains("train_batch_size"))
        base["train_micro_batch_size_per_gpu"] = 1;
    const std::string source = spec.config_source();
    for (const auto& set : spec.settings) {
        if (is_network_key(set.key)) continue;   // parse_sweep_setting checked them
        for (const auto& v : set.values) {
            Json doc = base;
            set_path(doc, set.key, value_of(v));
            // Good at one of the grid's stages is good (ZeRO++ keys are read at stage 3 only).
            Status last;
            for (int st : spec.stages) {
                set_path(doc, "zero_optimization.stage", static_cast<int64_t>(st));
                auto parsed = parse_ds_config(source, doc.dump(), spec.release);
                last = parsed ? Status{} : Status{parsed.error()};
                if (!last) break;
            }
            // Only the value's own errors: another key's belong to the config, or to one point.
            if (last && last->field.rfind(set.key, 0) == 0)
                return Error{"", "--set", set.key + "=" + v + ": " + last->message};
        }
    }
    return std::nullopt;
}

namespace {

// A config that fixes tensor or Ulysses parallelism (tensor_parallel.autotp_size, sequence_parallel_size)
// gives the point that size when the sweep does not vary it, and a point of another size is an error
// naming the key (zerosim predict's rule for the flag against the key).
Status layout_from_config(const SweepSpec& spec, const DsConfig& cfg, SweepPoint& p) {
    for (auto [key, name, size, swept] :
         {std::tuple{cfg.autotp_size, "tensor_parallel.autotp_size", &p.tp, spec.tp != std::vector<int64_t>{1}},
          std::tuple{cfg.sequence_parallel_size, "sequence_parallel_size", &p.sp, spec.sp != std::vector<int64_t>{1}}}) {
        if (key <= 0 || *size == key) continue;
        if (swept) return Error{cfg.source, name, "says " + std::to_string(key) + ", this point's size is " + std::to_string(*size)};
        *size = key;
    }
    return std::nullopt;
}

}  // namespace

SweepResult predict_point(const SweepSpec& spec, const SweepInputs& in, const SweepPoint& p) {
    SweepResult r;
    r.point = p;
    auto fail = [&](const Error& e) {
        r.error = e.what();
        return r;
    };
    Json doc = in.ds_config;
    if (!doc.contains("train_micro_batch_size_per_gpu") && !doc.contains("train_batch_size"))
        doc["train_micro_batch_size_per_gpu"] = 1;
    bool stage_set = false;   // a --set of the stage itself wins over the grid's stage
    for (size_t i = 0; i < spec.settings.size(); ++i) {
        if (is_network_key(spec.settings[i].key)) continue;   // the topology's, below
        set_path(doc, spec.settings[i].key, value_of(p.values[i]));
        stage_set = stage_set || spec.settings[i].key == "zero_optimization.stage";
    }
    // The grid's stage is written before parsing, so keys read at stage 3 only (ZeRO++ hpZ/qwZ/qgZ,
    // MiCS: ds_config_keys.cpp refuses them below stage 3) are checked at the point's own stage.
    if (!stage_set) set_path(doc, "zero_optimization.stage", static_cast<int64_t>(p.stage));
    auto parsed = parse_ds_config(spec.config_source(), doc.dump(), spec.release);
    if (!parsed) return fail(parsed.error());
    const DsConfig cfg = stage_set ? parsed.value() : parsed->with_stage(p.stage);
    const Model& model = in.model;
    auto scaled = scale_to_nodes(in.topologies.at(p.topology), p.nodes);  // --nodes scales the node design
    if (!scaled) return fail(scaled.error());
    for (size_t i = 0; i < spec.settings.size(); ++i)
        if (is_network_key(spec.settings[i].key)) apply_network_value(scaled.value(), spec.settings[i].key, p.values[i]);
    const Topology& topo = scaled.value();
    r.world = topo.total_gpus();
    ScheduleOptions o;
    o.world = r.world;
    o.steps = spec.steps;
    o.seq_len = spec.seq_len;
    o.zero_init = spec.zero_init && cfg.zero.stage == 3;  // zero.Init partitions only under stage 3
    o.activation_checkpointing = spec.activation_checkpointing;
    o.gpus_per_node = topo.gpus_per_node;                 // qgZ's node groups (device_count())
    if (auto e = layout_from_config(spec, cfg, r.point)) return fail(*e);
    if (r.point.is_3d() || spec.pipe_engine) {   // a GPT-NeoX pipeline runs DeepSpeed's engine at one stage too
        predict_layout_point(spec, model, cfg, topo, r.point, r);
        return r;
    }
    auto s = build_schedule(model, cfg, o);
    if (!s) return fail(s.error());
    if (!spec.what_if.empty() && what_if_applies(spec.what_if, cfg.zero.stage))
        if (auto changed = apply_what_if(spec.what_if, s.value()); !changed) return fail(changed.error());
    auto pred = simulate_point(s.value(), topo, gathered_parameter_budget(model, cfg, s.value(), topo), spec.fabric);
    if (!pred) return fail(pred.error());
    const auto& last = pred->steps.back();
    r.step_ms = last.step_s() * 1e3;
    r.compute_ms = last.compute_s * 1e3;
    r.comm_ms = last.comm_s * 1e3;
    r.exposed_ms = last.exposed_comm_s * 1e3;
    r.wire_bytes = wire_bytes_per_rank(s.value(), spec.steps - 1);
    const FitEstimate fit = point_fit(model, cfg, s.value(), topo, spec.activation_checkpointing);
    r.memory_bytes = fit.model_states;
    r.activation_bytes = fit.activations;
    r.gpu_memory_bytes = fit.gpu_bytes;
    r.fits = fit.verdict();
    return r;
}

namespace {

std::string encode(const SweepResult& r) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%zu\t%lld\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%lld\t%lld\t%lld\t%s\t%.17g\t", r.point.index,
                  static_cast<long long>(r.world), r.step_ms, r.compute_ms, r.comm_ms, r.exposed_ms, r.wire_bytes,
                  static_cast<long long>(r.memory_bytes), static_cast<long long>(r.activation_bytes),
                  static_cast<long long>(r.gpu_memory_bytes), r.fits.empty() ? "-" : r.fits.c_str(), r.bubble_ms);
    std::string line = buf;
    for (int64_t b : r.dimension_bytes) line += std::to_string(b) + "\t";
    std::string err = r.error;
    std::replace(err.begin(), err.end(), '\n', ' ');
    return line + err + "\n";
}

bool decode(std::string line, SweepResult& r) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::istringstream in(line);
    std::string field;
    std::vector<std::string> f;
    while (std::getline(in, field, '\t')) f.push_back(field);
    if (f.size() < 17) return false;
    r.point.index = std::stoul(f[0]);
    r.world = std::stoll(f[1]);
    r.step_ms = std::stod(f[2]);
    r.compute_ms = std::stod(f[3]);
    r.comm_ms = std::stod(f[4]);
    r.exposed_ms = std::stod(f[5]);
    r.wire_bytes = std::stod(f[6]);
    r.memory_bytes = std::stoll(f[7]);
    r.activation_bytes = std::stoll(f[8]);
    r.gpu_memory_bytes = std::stoll(f[9]);
    r.fits = f[10] == "-" ? "" : f[10];
    r.bubble_ms = std::stod(f[11]);
    for (size_t d = 0; d < 5; ++d) r.dimension_bytes[d] = std::stoll(f[12 + d]);
    r.error = f.size() > 17 ? f[17] : "";
    return true;
}

}  // namespace

namespace {

// One worker process and the pipe it writes its finished points to.
struct SweepWorker {
    pid_t pid = -1;
    int fd = -1;
    std::string pending;   // a line not yet whole
    int status = -1;       // waitpid's, once reaped
};

// A worker that was stopped (SIGSTOP, a debugger: it would be waited for forever) or ended badly
// (killed, or an exit other than 0); empty while it runs or once it ended well. `ended`: its pipe
// is closed, so wait for it.
std::string sweep_worker_fault(SweepWorker& w, bool ended) {
    int st = 0;
    if (w.status == -1) {
        pid_t r = waitpid(w.pid, &st, ended ? 0 : WNOHANG | WUNTRACED);
        if (r == w.pid && WIFSTOPPED(st)) return "was stopped (signal " + std::to_string(WSTOPSIG(st)) + ")";
        if (r == w.pid) w.status = st;
    }
    if (w.status != -1 && WIFSIGNALED(w.status)) return "was killed (signal " + std::to_string(WTERMSIG(w.status)) + ")";
    if (w.status != -1 && WIFEXITED(w.status) && WEXITSTATUS(w.status) != 0)
        return "exited with status " + std::to_string(WEXITSTATUS(w.status));
    return "";
}

// Ends every worker still running (after a fault) and reaps them all.
void end_sweep_workers(std::vector<SweepWorker>& workers) {
    for (auto& w : workers) {
        if (w.status == -1) {
            kill(w.pid, SIGKILL);
            waitpid(w.pid, &w.status, 0);
        }
        if (w.fd >= 0) close(w.fd);
        w.fd = -1;
    }
}

// Starts `jobs` workers, worker w predicting points w, w + jobs, ...
Status start_sweep_workers(const SweepSpec& spec, const SweepInputs& inputs, const std::vector<SweepPoint>& points, int jobs,
                           std::vector<SweepWorker>& workers) {
    for (int w = 0; w < jobs; ++w) {
        int fds[2];
        if (pipe(fds) != 0) return Error{"", "", "cannot create a pipe for the sweep workers"};
        std::fflush(nullptr);
        const pid_t sweep_pid = getpid();
        pid_t pid = fork();
        if (pid < 0) return Error{"", "", "cannot start sweep worker processes"};
        if (pid == 0) {
            // A worker dies quietly with the sweep: Ctrl-C reaches the whole process group and the
            // sweep alone reports it (core/output.hpp install_interrupt_report); a sweep that ends
            // any other way (SIGKILL) takes its workers with it instead of leaving them computing.
            for (int sig : {SIGINT, SIGTERM})
                if (signal(sig, SIG_DFL) == SIG_IGN) signal(sig, SIG_IGN);   // ignored stays ignored (a background sweep)
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != sweep_pid) _exit(1);   // the sweep had already gone before prctl
            close(fds[0]);
            FILE* out = fdopen(fds[1], "w");
            for (size_t i = static_cast<size_t>(w); i < points.size(); i += static_cast<size_t>(jobs)) {
                std::string line = encode(predict_point(spec, inputs, points[i]));
                std::fputs(line.c_str(), out);
                std::fflush(out);
            }
            std::fclose(out);
            _exit(0);
        }
        close(fds[1]);
        workers.push_back({pid, fds[0], "", -1});
    }
    return std::nullopt;
}

// Reads what worker w has written; its whole lines are finished points. False at the end of its pipe.
bool read_sweep_worker(SweepWorker& w, const std::function<void(const std::string&)>& line) {
    char buf[65536];
    ssize_t n = read(w.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    w.pending.append(buf, static_cast<size_t>(n));
    size_t from = 0;
    for (size_t nl; (nl = w.pending.find('\n', from)) != std::string::npos; from = nl + 1) line(w.pending.substr(from, nl + 1 - from));
    w.pending.erase(0, from);
    return true;
}

}  // namespace

Result<std::vector<SweepResult>> run_sweep(const SweepSpec& spec, const SweepInputs& inputs, const std::vector<SweepPoint>& points,
                                           const std::function<void(size_t, size_t)>& progress) {
    if (points.empty()) return Error{"", "--stages/--nodes/--topology", "the grid is empty: nothing to predict"};
    const int jobs = std::max(1, std::min<int>(spec.jobs, static_cast<int>(points.size())));
    std::vector<SweepWorker> workers;
    if (auto e = start_sweep_workers(spec, inputs, points, jobs, workers)) {
        end_sweep_workers(workers);
        return *e;
    }
    std::map<size_t, SweepResult> by_index;
    for (const auto& p : points) by_index[p.index].point = p;
    size_t done = 0;
    auto take = [&](const std::string& text) {
        SweepResult r;
        if (!decode(text, r) || !by_index.count(r.point.index)) return;
        r.point = by_index[r.point.index].point;
        by_index[r.point.index] = r;
        if (progress) progress(++done, points.size());
    };
    // poll(), never a blocking read of one worker: every second each worker is asked whether it
    // was stopped or died, so a stopped worker ends the sweep instead of being waited for forever.
    std::string fault;
    size_t fault_worker = 0;
    for (size_t open = workers.size(); open > 0 && fault.empty();) {
        std::vector<pollfd> fds;
        std::vector<size_t> which;
        for (size_t w = 0; w < workers.size(); ++w)
            if (workers[w].fd >= 0) fds.push_back({workers[w].fd, POLLIN, 0}), which.push_back(w);
        if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) fault = "could not be read";
        for (size_t k = 0; k < fds.size() && fault.empty(); ++k) {
            SweepWorker& w = workers[which[k]];
            bool ended = (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) && !read_sweep_worker(w, take);
            if (ended) close(w.fd), w.fd = -1, --open;
            if ((fault = sweep_worker_fault(w, ended)).size()) fault_worker = which[k];
        }
    }
    end_sweep_workers(workers);
    const std::string tally = std::to_string(done) + " of " + std::to_string(points.size()) + " points done";
    if (!fault.empty())
        return Error{"", "", "sweep worker " + std::to_string(fault_worker) + " (pid " + std::to_string(workers[fault_worker].pid) +
                                 ") " + fault + ": " + tally + "; the sweep is abandoned"};
    if (done != points.size()) return Error{"", "", "the sweep workers ended early: " + tally};
    std::vector<SweepResult> out;
    for (auto& [i, r] : by_index) out.push_back(std::move(r));
    return out;
}

void write_sweep_csv(std::ostream& out, const SweepSpec& spec, const std::vector<SweepResult>& rows, bool header) {
    if (header) {
        out << "topology,nodes,world,stage";
        if (spec.has_layouts()) out << ",pp,tp,sp,ep";   // a layout sweep's columns (and its bubble below)
        for (const auto& s : spec.settings) out << ',' << s.key;
        out << ",step_ms,compute_ms,comm_ms,exposed_comm_ms,";
        if (spec.has_layouts()) out << "bubble_ms,pipe_bytes,tensor_bytes,sequence_bytes,expert_bytes,zero_bytes,";
        out << "wire_bytes_per_rank,memory_bytes_per_rank,activation_bytes_per_rank,gpu_memory_bytes,fits,error\n";
    }
    char buf[256];
    for (const auto& r : rows) {
        std::string topo = r.point.topology.substr(r.point.topology.find_last_of('/') + 1);
        out << topo << ',' << r.point.nodes << ',' << r.world << ',' << r.point.stage;
        if (spec.has_layouts()) out << ',' << r.point.pp << ',' << r.point.tp << ',' << r.point.sp << ',' << r.point.ep;
        for (const auto& v : r.point.values) out << ',' << v;
        std::snprintf(buf, sizeof buf, ",%.6f,%.6f,%.6f,%.6f", r.step_ms, r.compute_ms, r.comm_ms, r.exposed_ms);
        out << buf;
        if (spec.has_layouts()) {
            std::snprintf(buf, sizeof buf, ",%.6f", r.bubble_ms);
            out << buf;
            for (int64_t b : r.dimension_bytes) out << ',' << b;
        }
        std::snprintf(buf, sizeof buf, ",%.0f,%lld,%lld,%lld,%s,", r.wire_bytes, static_cast<long long>(r.memory_bytes),
                      static_cast<long long>(r.activation_bytes), static_cast<long long>(r.gpu_memory_bytes), r.fits.c_str());
        std::string err = r.error;
        std::replace(err.begin(), err.end(), ',', ';');
        out << buf << err << '\n';
    }
}

// write_sweep_svg: sweep_plot.cpp.

}  // namespace zerosim
