#include "formats/schedule_outputs.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/json_input.hpp"
#include "schedule/check.hpp"
#include "schedule/release_rules.hpp"

namespace zerosim {

LoggedOp logged_op(const Schedule& s, const Op& op, double time_ms, double end_s) {
    LoggedOp l;
    l.record = op_record_name(op.kind);
    l.caller = op.caller;
    l.bytes = op.bytes();
    l.size_text = ds_size_string(l.bytes);
    l.line = static_cast<int>(op.id);
    l.phase = phase_label(op, s.meta.grad_accum);
    l.time_ms = time_ms;
    Bandwidth bw = ds_bandwidth(l.record, l.bytes, l.time_ms, s.meta.world);
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

void write_schedule_deepspeed(std::ostream& out, const Schedule& s, const DeepSpeedLogOptions& opt) {
    const auto& m = s.meta;
    if (opt.header)
        out << "# zerosim schedule (" << m.dialect << "): ZeRO stage " << m.stage << ", world " << m.world << ", "
            << m.steps << " step(s), model " << m.model_name << "; times and bandwidths are not simulated here (0.00)\n";
    std::vector<LoggedOp> ops = logged_ops(s);
    const int line = log_dist_line(m.release);
    for (const auto& l : ops) write_ds_verbose_line(out, l, line);
    if (opt.log_summary) {
        // log_summary() runs a barrier that the logger records before it prints the table, and the
        // table's own barrier afterwards.
        LoggedOp barrier;
        barrier.record = "log_summary_barrier";
        barrier.caller = "log_summary";
        write_ds_verbose_line(out, barrier, line);
        ops.push_back(barrier);
        write_ds_summary(out, ops);
        write_ds_verbose_line(out, barrier, line);
    }
}

void write_schedule_table(std::ostream& out, const Schedule& s, const TableOptions& opt) {
    char line[512];
    std::snprintf(line, sizeof line, "%-5s %-5s %-6s %-8s %-23s %14s %-10s %-5s %-34s %s\n", "#", "step", "micro",
                  "phase", "op", "bytes", "size", "dtype", "caller", "rule");
    out << line;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind) && !opt.compute) continue;
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
    // Totals per phase, for a quick read of volume.
    std::map<std::string, std::pair<int64_t, int64_t>> totals;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind)) continue;
        std::string key = op.step < 0 ? "init" : "steps";
        totals[key].first += 1;
        totals[key].second += op.bytes();
    }
    for (const auto& [k, v] : totals)
        out << "# " << k << ": " << v.first << " collectives, " << v.second << " bytes (" << ds_size_string(v.second)
            << ") as logged\n";
}

namespace {

Json op_to_json(const Op& op) {
    Json j;
    j["id"] = op.id;
    j["kind"] = is_collective(op.kind) ? op_record_name(op.kind) : "compute";
    j["step"] = op.step;
    j["micro"] = op.micro;
    j["phase"] = phase_name(op.phase);
    j["stream"] = stream_name(op.stream);
    j["payload"] = payload_name(op.payload);
    if (is_collective(op.kind)) {
        j["elements"] = op.elements;
        j["bytes"] = op.bytes();
        j["dtype"] = dtype_name(op.dtype);
        j["redop"] = reduce_op_name(op.redop);
        if (op.root >= 0) j["root"] = op.root;
        j["group"] = group_name(op.group);
        if (!op.logged) j["logged"] = false;
        j["caller"] = op.caller;
        if (op.bucket >= 0) j["bucket"] = op.bucket;
    } else {
        j["compute"] = compute_kind_name(op.compute);
        if (op.module >= 0) {
            j["module"] = op.module;
            j["module_name"] = op.module_name;
        }
        if (op.compute == ComputeKind::OptimizerStep) j["elements"] = op.elements;
        j["flops"] = op.flops;
        j["mem_bytes"] = op.mem_bytes;
    }
    if (op.param_group >= 0) j["param_group"] = op.param_group;
    j["rule"] = rule_name(op.rule);
    std::string keys = rule_info(op.rule).config_keys;
    Json ks = Json::array();
    std::stringstream ss(keys);
    std::string k;
    while (std::getline(ss, k, ','))
        if (!k.empty()) ks.push_back(k);
    j["config_keys"] = ks;
    j["params"] = op.params;
    if (!op.segments.empty()) {
        Json segs = Json::array();
        for (const auto& sg : op.segments) segs.push_back(Json::array({sg.param, sg.offset, sg.numel}));
        j["segments"] = std::move(segs);
    }
    j["deps"] = op.deps;
    return j;
}

}  // namespace

void write_schedule_json(std::ostream& out, const Schedule& s) {
    const auto& m = s.meta;
    Json j;
    j["format"] = "zerosim-schedule";
    j["version"] = 1;
    Json meta;
    meta["dialect"] = m.dialect;
    meta["model"] = m.model_name;
    meta["model_file"] = m.model_file;
    meta["ds_config_file"] = m.ds_config_file;
    meta["world"] = m.world;
    meta["stage"] = m.stage;
    meta["steps"] = m.steps;
    meta["micro_batch"] = m.micro_batch;
    meta["grad_accum"] = m.grad_accum;
    meta["seq_len"] = m.seq_len;
    meta["total_params"] = m.total_params;
    meta["param_groups"] = m.num_groups;
    meta["model_dtype"] = dtype_name(m.model_dtype);
    meta["comm_dtype"] = dtype_name(m.comm_dtype);
    meta["overflow_steps"] = m.overflow_steps;
    meta["round_robin_gradients"] = m.round_robin_gradients;
    Json partition;
    partition["layout"] = partition_kind_name(m.partition.kind);
    if (!m.partition.groups.empty()) {
        Json groups = Json::array();
        for (const auto& g : m.partition.groups)
            groups.push_back(Json{{"order", g.order}, {"offsets", g.offsets}, {"partition_size", g.partition_size}});
        partition["groups"] = std::move(groups);
    }
    meta["partition"] = std::move(partition);
    meta["ranks"] = "every data-parallel rank runs these ops in this order";
    if (m.variants.any() || m.variants.gpus_per_node > 0) {
        const ZeroVariants& v = m.variants;
        meta["zero_variants"] = Json{{"hpz_partition_size", v.hpz}, {"quantized_weights", v.qwz},
                                     {"quantized_gradients", v.qgz}, {"mics_shard_size", v.mics},
                                     {"gpus_per_node", v.gpus_per_node}};
    }
    if (!m.groups.empty()) {
        Json groups = Json::object();
        for (const auto& g : m.groups) groups[group_name(g.kind)] = g.members;
        meta["process_groups"] = std::move(groups);
    }
    j["meta"] = meta;
    Json params = Json::array();
    for (const auto& p : s.params)
        params.push_back(Json{{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"group", p.group}});
    j["parameters"] = std::move(params);
    Json ops = Json::array();
    for (const auto& op : s.ops) ops.push_back(op_to_json(op));
    j["ops"] = std::move(ops);
    out << j.dump(1) << '\n';
}

Result<Schedule> read_schedule_json(const std::string& path) {
    auto text = read_text_file(path, "file");
    if (!text) return text.error();
    return parse_schedule_json(text.value(), path);
}

Result<Schedule> parse_schedule_json(const std::string& text, const std::string& path) {
    auto doc = parse_json_text(text, path);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), path, "");
        root.expect_object();
        if (root.at("format").as_string() != "zerosim-schedule")
            root.at("format").fail_here("expected \"zerosim-schedule\"");
        Schedule s;
        auto meta = root.at("meta");
        s.meta.dialect = meta.at("dialect").as_string();
        // "deepspeed-0.17.6": the release the schedule was built for (v0.14.2 if it names none known).
        if (s.meta.dialect.rfind("deepspeed-", 0) == 0)
            if (auto r = parse_release(s.meta.dialect.substr(10), "meta.dialect")) s.meta.release = r.value();
        s.meta.model_name = meta.at("model").as_string();
        s.meta.world = meta.at("world").as_integer();
        s.meta.stage = static_cast<int>(meta.at("stage").as_integer());
        s.meta.steps = static_cast<int>(meta.at("steps").as_integer());
        s.meta.micro_batch = meta.at("micro_batch").as_integer();
        s.meta.grad_accum = meta.at("grad_accum").as_integer();
        s.meta.seq_len = meta.at("seq_len").as_integer();
        s.meta.total_params = meta.at("total_params").as_integer();
        s.meta.num_groups = static_cast<int>(meta.at("param_groups").as_integer());
        auto dt = [](const JsonField& f) {
            auto t = dtype_from_name(f.as_string());
            if (!t) f.fail_here("unknown dtype \"" + f.as_string() + "\"");
            return *t;
        };
        s.meta.model_dtype = dt(meta.at("model_dtype"));
        s.meta.comm_dtype = dt(meta.at("comm_dtype"));
        if (meta.has("round_robin_gradients")) s.meta.round_robin_gradients = meta.at("round_robin_gradients").as_bool();
        auto partition = meta.at("partition");
        auto layout = partition_kind_from_name(partition.at("layout").as_string());
        if (!layout) partition.at("layout").fail_here("unknown value \"" + partition.at("layout").as_string() + "\"");
        s.meta.partition.kind = *layout;
        if (partition.has("groups")) {
            auto groups = partition.at("groups");
            groups.expect_array();
            for (size_t g = 0; g < groups.size(); ++g) {
                auto gj = groups.at(g);
                GroupPartition gp;
                auto order = gj.at("order"), offsets = gj.at("offsets");
                for (size_t k = 0; k < order.size(); ++k) gp.order.push_back(static_cast<int>(order.at(k).as_integer()));
                for (size_t k = 0; k < offsets.size(); ++k) gp.offsets.push_back(offsets.at(k).as_integer());
                gp.partition_size = gj.at("partition_size").as_integer();
                s.meta.partition.groups.push_back(std::move(gp));
            }
        }
        if (meta.has("zero_variants")) {
            auto v = meta.at("zero_variants");
            s.meta.variants.hpz = v.at("hpz_partition_size").as_integer();
            s.meta.variants.qwz = v.at("quantized_weights").as_bool();
            s.meta.variants.qgz = v.at("quantized_gradients").as_bool();
            s.meta.variants.mics = v.at("mics_shard_size").as_integer();
            s.meta.variants.gpus_per_node = v.at("gpus_per_node").as_integer();
        }
        if (meta.has("process_groups")) {
            auto groups = meta.at("process_groups");
            for (auto it = groups.raw().begin(); it != groups.raw().end(); ++it) {
                auto gj = groups.at(it.key());
                auto kind = group_from_name(it.key());
                if (!kind) gj.fail_here("unknown process group \"" + it.key() + "\"");
                ProcessGroup g{*kind, {}};
                for (size_t i = 0; i < gj.size(); ++i) {
                    std::vector<int> ranks;
                    auto rj = gj.at(i);
                    for (size_t k = 0; k < rj.size(); ++k) {
                        int64_t r = rj.at(k).as_integer();
                        if (r < 0 || r >= s.meta.world) rj.at(k).fail_here("expected a rank below the world size");
                        ranks.push_back(static_cast<int>(r));
                    }
                    g.members.push_back(std::move(ranks));
                }
                s.meta.groups.push_back(std::move(g));
            }
        }
        auto params = root.at("parameters");
        params.expect_array();
        for (size_t i = 0; i < params.size(); ++i) {
            auto p = params.at(i);
            ScheduleParam sp;
            sp.name = p.at("name").as_string();
            auto shape = p.at("shape");
            for (size_t k = 0; k < shape.size(); ++k) sp.shape.push_back(shape.at(k).as_integer());
            sp.numel = p.at("numel").as_integer();
            sp.group = static_cast<int>(p.at("group").as_integer());
            s.params.push_back(std::move(sp));
        }
        auto ops = root.at("ops");
        ops.expect_array();
        static const std::map<std::string, OpKind> kinds = {
            {"all_reduce", OpKind::AllReduce}, {"all_gather_into_tensor", OpKind::AllGather},
            {"reduce_scatter_tensor", OpKind::ReduceScatter}, {"broadcast", OpKind::Broadcast},
            {"reduce", OpKind::Reduce}, {"barrier", OpKind::Barrier}, {"compute", OpKind::Compute},
            {"all_to_all_single", OpKind::AllToAll}};
        static const std::map<std::string, Phase> phases = {
            {"init", Phase::Init}, {"forward", Phase::Forward}, {"backward", Phase::Backward}, {"step", Phase::Step}};
        static const std::map<std::string, Stream> streams = {
            {"compute", Stream::Compute}, {"comm", Stream::Comm}, {"reduce", Stream::Reduce}, {"fetch", Stream::Fetch}};
        static const std::map<std::string, ComputeKind> computes = {{"forward", ComputeKind::Forward},
                                                                    {"backward", ComputeKind::Backward},
                                                                    {"optimizer_step", ComputeKind::OptimizerStep}};
        static const std::map<std::string, ReduceOp> redops = {
            {"none", ReduceOp::None}, {"sum", ReduceOp::Sum}, {"max", ReduceOp::Max}};
        auto pick = [](const auto& table, const JsonField& f) {
            auto it = table.find(f.as_string());
            if (it == table.end()) f.fail_here("unknown value \"" + f.as_string() + "\"");
            return it->second;
        };
        for (size_t i = 0; i < ops.size(); ++i) {
            auto o = ops.at(i);
            Op op;
            op.kind = pick(kinds, o.at("kind"));
            op.step = static_cast<int>(o.at("step").as_integer());
            op.micro = static_cast<int>(o.at("micro").as_integer());
            op.phase = pick(phases, o.at("phase"));
            op.stream = pick(streams, o.at("stream"));
            auto rule = rule_from_name(o.at("rule").as_string());
            if (!rule) o.at("rule").fail_here("unknown rule \"" + o.at("rule").as_string() + "\"");
            op.rule = *rule;
            auto payload = payload_from_name(o.at("payload").as_string());
            if (!payload) o.at("payload").fail_here("unknown value \"" + o.at("payload").as_string() + "\"");
            op.payload = *payload;
            if (is_collective(op.kind)) {
                op.elements = o.at("elements").as_integer();
                op.dtype = dt(o.at("dtype"));
                op.redop = pick(redops, o.at("redop"));
                if (o.has("root")) op.root = static_cast<int>(o.at("root").as_integer());
                auto group = group_from_name(o.at("group").as_string());
                if (!group) o.at("group").fail_here("unknown process group \"" + o.at("group").as_string() + "\"");
                op.group = *group;
                if (o.has("logged")) op.logged = o.at("logged").as_bool();
                op.caller = o.at("caller").as_string();
                if (o.has("bucket")) op.bucket = static_cast<int>(o.at("bucket").as_integer());
            } else {
                op.compute = pick(computes, o.at("compute"));
                if (o.has("module")) {
                    op.module = static_cast<int>(o.at("module").as_integer());
                    op.module_name = o.at("module_name").as_string();
                }
                if (o.has("elements")) op.elements = o.at("elements").as_integer();
                op.flops = o.at("flops").as_number();
                op.mem_bytes = o.at("mem_bytes").as_integer();
            }
            if (o.has("param_group")) op.param_group = static_cast<int>(o.at("param_group").as_integer());
            auto ps = o.at("params");
            for (size_t k = 0; k < ps.size(); ++k) op.params.push_back(static_cast<int>(ps.at(k).as_integer()));
            if (o.has("segments")) {
                auto segs = o.at("segments");
                for (size_t k = 0; k < segs.size(); ++k) {
                    auto sg = segs.at(k);
                    op.segments.push_back({static_cast<int>(sg.at(0).as_integer()), sg.at(1).as_integer(), sg.at(2).as_integer()});
                }
            }
            auto ds = o.at("deps");
            for (size_t k = 0; k < ds.size(); ++k) op.deps.push_back(ds.at(k).as_integer());
            s.add(std::move(op));
        }
        // What the file says must hold together before anyone runs it.
        if (auto e = check_schedule(s, path)) return *e;
        return s;
    } catch (const InputFailure& f) {
        return f.error;
    }
}

}  // namespace zerosim
