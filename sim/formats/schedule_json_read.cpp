// The schedule JSON reader (formats/schedule_json.hpp; the format: docs/schedule-ir.md). Every field
// the writer writes is read back; a value of the wrong type or outside its range is an error naming
// the file and the field (core/json_input.hpp), and the IR read must pass check_schedule.
#include "core/json_input.hpp"
#include "formats/schedule_json.hpp"
#include "schedule/check.hpp"
#include "schedule/mesh.hpp"
#include "schedule_json_names.hpp"

namespace zerosim {

namespace {

// The enumerator of E that `name` calls the field's text, for an enum whose values run from 0 to
// `last` (ir.hpp has no reverse lookup for these yet); else the field's error listing the names.
template <class E, class Name>
E named_value(const JsonField& f, Name name, E last) {
    const std::string text = f.as_string();
    std::string expected;
    for (int i = 0; i <= static_cast<int>(last); ++i) {
        const E e = static_cast<E>(i);
        if (text == name(e)) return e;
        expected += std::string(i ? ", " : "") + "\"" + name(e) + "\"";
    }
    f.fail_here("unknown value \"" + text + "\"; expected one of " + expected);
}

const char* op_kind_json_name(OpKind k) { return is_collective(k) ? op_record_name(k) : "compute"; }

DType read_dtype(const JsonField& f) {
    auto t = dtype_from_name(f.as_string());
    if (!t) f.fail_here("unknown dtype \"" + f.as_string() + "\"");
    return *t;
}

int read_int(const JsonField& f, int64_t lo = INT32_MIN) { return static_cast<int>(f.as_integer_in(lo, INT32_MAX)); }

template <class T>
std::vector<T> read_list(const JsonField& f, int64_t lo = INT64_MIN) {
    f.expect_array();
    std::vector<T> out;
    for (size_t k = 0; k < f.size(); ++k) {
        const int64_t hi = sizeof(T) < sizeof(int64_t) ? INT32_MAX : INT64_MAX;
        out.push_back(static_cast<T>(f.at(k).as_integer_in(lo, hi)));
    }
    return out;
}

// meta.release ("0.14.2"); a version 1 file names it as meta.dialect ("deepspeed-0.14.2"). Where
// both are given they must agree: the dialect is derived from the release.
Release read_release(const JsonField& meta) {
    std::optional<Release> release;
    if (meta.has("release")) {
        auto r = parse_release(meta.at("release").as_string(), "meta.release");
        if (!r) meta.at("release").fail_here(r.error().message);
        release = r.value();
    }
    if (meta.has("dialect")) {
        const JsonField d = meta.at("dialect");
        const std::string text = d.as_string();
        if (text.rfind("deepspeed-", 0) != 0) d.fail_here("expected \"deepspeed-\" and a release, found \"" + text + "\"");
        auto r = parse_release(text.substr(10), "meta.dialect");
        if (!r) d.fail_here(r.error().message);
        if (release && !(r.value() == *release))
            d.fail_here("names release " + r->number() + ", meta.release " + release->number() + ": give one");
        release = r.value();
    }
    if (!release) meta.fail_here("expected \"release\" (the DeepSpeed release whose rules built the schedule)");
    return *release;
}

PartitionLayout read_partition(const JsonField& p) {
    PartitionLayout layout;
    const JsonField kind = p.at("layout");
    auto known = partition_kind_from_name(kind.as_string());
    if (!known) kind.fail_here("unknown value \"" + kind.as_string() + "\"; expected \"replicated\", \"flat_groups\" or \"per_parameter\"");
    layout.kind = *known;
    if (!p.has("groups")) return layout;
    const JsonField groups = p.at("groups");
    groups.expect_array();
    for (size_t g = 0; g < groups.size(); ++g) {
        const JsonField gj = groups.at(g);
        GroupPartition gp;
        gp.order = read_list<int>(gj.at("order"), 0);
        gp.offsets = read_list<int64_t>(gj.at("offsets"), 0);
        gp.partition_size = gj.at("partition_size").as_integer_in(0, INT64_MAX);
        if (gj.has("over")) gp.over = schedule_json::group_kind_of(gj.at("over"), gj.at("over").as_string());
        layout.groups.push_back(std::move(gp));
    }
    return layout;
}

void read_variants(const JsonField& meta, ScheduleMeta& m) {
    if (meta.has("zero_variants")) {
        const JsonField v = meta.at("zero_variants");
        m.variants.hpz = v.at("hpz_partition_size").as_integer_in(1, INT64_MAX);
        m.variants.qwz = v.at("quantized_weights").as_bool();
        m.variants.qgz = v.at("quantized_gradients").as_bool();
        m.variants.mics = v.at("mics_shard_size").as_integer_in(0, INT64_MAX);
        m.variants.gpus_per_node = v.at("gpus_per_node").as_integer_in(0, INT64_MAX);
    }
    if (!meta.has("process_groups")) return;
    const JsonField groups = meta.at("process_groups");
    groups.expect_object();
    for (auto it = groups.raw().begin(); it != groups.raw().end(); ++it) {
        const JsonField gj = groups.at(it.key());
        gj.expect_array();
        ProcessGroup g = schedule_json::process_group_named(groups, it.key());
        for (size_t i = 0; i < gj.size(); ++i) g.members.push_back(read_list<int>(gj.at(i), 0));
        for (size_t i = 0; i < g.members.size(); ++i)
            for (size_t k = 0; k < g.members[i].size(); ++k)
                if (g.members[i][k] >= (m.layout.is_3d() ? m.layout.world : m.world))
                    gj.at(i).at(k).fail_here("expected a rank below the world size");
        m.groups.push_back(std::move(g));
    }
}

// A 3D schedule's layout and rank (schedule/layout.hpp): the mesh's refusals apply as when it was built.
void read_layout(const JsonField& meta, ScheduleMeta& m) {
    auto l = meta.at("layout");
    l.expect_object();
    m.layout.world = l.at("world").as_integer_in(1, INT32_MAX);
    m.layout.pipe = l.at("pipe").as_integer_in(1, INT32_MAX);
    m.layout.tensor = l.at("tensor").as_integer_in(1, INT32_MAX);
    m.layout.sequence = l.at("sequence").as_integer_in(1, INT32_MAX);
    m.layout.expert = l.at("expert").as_integer_in(1, INT32_MAX);
    if (l.has("pipe_engine")) m.layout.pipe_engine = l.at("pipe_engine").as_bool();
    if (auto e = check_parallel_layout(m.layout)) l.fail_here(e->message);
    m.rank = meta.at("rank").as_integer_in(0, m.layout.world - 1);
    m.pipe_stage = meta.at("pipe_stage").as_integer_in(0, m.layout.pipe - 1);
    if (meta.has("pipe_partition")) {
        const std::string how = meta.at("pipe_partition").as_string();
        const bool type = how.rfind("type:", 0) == 0 && how.size() > 5;
        if (how != "parameters" && how != "uniform" && !type)
            meta.at("pipe_partition").fail_here("expected \"parameters\", \"uniform\" or \"type:REGEX\"");
        if (type) m.pipe_partition_type = how.substr(5);
        m.pipe_partition = how == "uniform" ? PipePartition::Uniform : type ? PipePartition::Type : PipePartition::Parameters;
    }
    if (meta.has("param_shards")) m.param_shards = meta.at("param_shards").as_integer_in(1, m.world);
}

ScheduleMeta read_meta(const JsonField& meta) {
    meta.expect_object();
    ScheduleMeta m;
    m.release = read_release(meta);
    m.dialect = "deepspeed-" + m.release.number();
    m.model_name = meta.at("model").as_string();
    if (meta.has("model_file")) m.model_file = meta.at("model_file").as_string();
    if (meta.has("ds_config_file")) m.ds_config_file = meta.at("ds_config_file").as_string();
    m.world = meta.at("world").as_integer_in(1, INT32_MAX);
    m.stage = read_int(meta.at("stage"), 0);
    if (m.stage > 3) meta.at("stage").fail_here("expected a ZeRO stage, 0 to 3");
    m.steps = read_int(meta.at("steps"), 1);
    m.micro_batch = meta.at("micro_batch").as_integer_in(1, INT64_MAX);
    m.grad_accum = meta.at("grad_accum").as_integer_in(1, INT64_MAX);
    m.seq_len = meta.at("seq_len").as_integer_in(0, INT64_MAX);
    m.total_params = meta.at("total_params").as_integer_in(0, INT64_MAX);
    m.num_groups = read_int(meta.at("param_groups"), 1);
    m.model_dtype = read_dtype(meta.at("model_dtype"));
    m.comm_dtype = read_dtype(meta.at("comm_dtype"));
    if (meta.has("overflow_steps")) m.overflow_steps = read_list<int>(meta.at("overflow_steps"), 0);
    if (meta.has("round_robin_gradients")) m.round_robin_gradients = meta.at("round_robin_gradients").as_bool();
    m.partition = read_partition(meta.at("partition"));
    // Version 1 files leave these out: their defaults are a stage-0..2 schedule's.
    if (meta.has("stage3_peak_gathered_elements"))
        m.stage3_peak_gathered_elements = meta.at("stage3_peak_gathered_elements").as_integer_in(0, INT64_MAX);
    if (meta.has("stage3_persistent_elements"))
        m.stage3_persistent_elements = meta.at("stage3_persistent_elements").as_integer_in(0, INT64_MAX);
    if (meta.has("zero_init")) m.zero_init = meta.at("zero_init").as_bool();
    if (meta.has("activation_checkpointing")) m.activation_checkpointing = meta.at("activation_checkpointing").as_bool();
    if (meta.has("offload_optimizer")) m.offload_optimizer = meta.at("offload_optimizer").as_bool();
    if (meta.has("offload_param")) m.offload_param = meta.at("offload_param").as_bool();
    if (meta.has("layout")) read_layout(meta, m);
    read_variants(meta, m);
    return m;
}

std::vector<ScheduleParam> read_params(const JsonField& params) {
    params.expect_array();
    std::vector<ScheduleParam> out;
    for (size_t i = 0; i < params.size(); ++i) {
        const JsonField p = params.at(i);
        ScheduleParam sp;
        sp.name = p.at("name").as_string();
        sp.shape = read_list<int64_t>(p.at("shape"), 0);
        sp.numel = p.at("numel").as_integer_in(0, INT64_MAX);
        sp.group = read_int(p.at("group"), 0);
        out.push_back(std::move(sp));
    }
    return out;
}

// A collective's fields (required on a collective, read where a compute op carries them).
void read_collective_fields(const JsonField& o, Op& op) {
    const bool coll = is_collective(op.kind);
    if (coll || o.has("elements")) op.elements = o.at("elements").as_integer_in(0, INT64_MAX);
    if (coll || o.has("dtype")) op.dtype = read_dtype(o.at("dtype"));
    if (coll || o.has("redop")) op.redop = named_value(o.at("redop"), reduce_op_name, ReduceOp::Max);
    if (o.has("root")) op.root = read_int(o.at("root"), 0);
    if (o.has("peer")) op.peer = o.at("peer").as_integer_in(0, INT32_MAX);
    if ((op.kind == OpKind::Send || op.kind == OpKind::Recv) && op.peer < 0) o.fail_here("a send or recv needs its \"peer\" rank");
    if (coll || o.has("group")) schedule_json::set_group(op, o.at("group"));
    if (o.has("logged")) op.logged = o.at("logged").as_bool();
    if (coll || o.has("caller")) op.caller = o.at("caller").as_string();
    if (o.has("bucket")) op.bucket = read_int(o.at("bucket"), 0);
    // "bytes" is derived (elements x the dtype's size): a file that edits it alone is refused.
    if (o.has("bytes") && o.at("bytes").as_integer() != op.bytes())
        o.at("bytes").fail_here("expected elements x the dtype's size, " + std::to_string(op.bytes()) +
                                "; edit \"elements\" to change an op's size");
}

// A compute segment's fields (required on a compute op, read where a collective carries them).
void read_compute_fields(const JsonField& o, Op& op) {
    const bool comp = !is_collective(op.kind);
    if (comp || o.has("compute")) op.compute = named_value(o.at("compute"), compute_kind_name, ComputeKind::OptimizerStep);
    if (o.has("module")) op.module = read_int(o.at("module"), 0);
    if (o.has("module_name")) op.module_name = o.at("module_name").as_string();
    if (comp || o.has("flops")) op.flops = o.at("flops").as_number_in(0.0, 1e300);
    if (comp || o.has("mem_bytes")) op.mem_bytes = o.at("mem_bytes").as_integer_in(0, INT64_MAX);
}

Op read_op(const JsonField& o, size_t index) {
    Op op;
    if (o.at("id").as_integer() != static_cast<int64_t>(index))
        o.at("id").fail_here("expected " + std::to_string(index) + ": ops are listed in id order from 0");
    op.kind = named_value(o.at("kind"), op_kind_json_name, OpKind::Recv);
    op.step = read_int(o.at("step"), -1);
    op.micro = read_int(o.at("micro"), -1);
    op.phase = named_value(o.at("phase"), phase_name, Phase::Step);
    op.stream = named_value(o.at("stream"), stream_name, Stream::Fetch);
    schedule_json::set_rule(op, o.at("rule"));
    const JsonField payload = o.at("payload");
    auto kind = payload_from_name(payload.as_string());
    if (!kind) payload.fail_here("unknown payload \"" + payload.as_string() + "\"; expected one of docs/schedule-ir.md \"Payloads\"");
    op.payload = *kind;
    read_compute_fields(o, op);
    read_collective_fields(o, op);
    if (o.has("param_group")) op.param_group = read_int(o.at("param_group"), 0);
    op.params = read_list<int>(o.at("params"), 0);
    if (o.has("segments")) {
        const JsonField segs = o.at("segments");
        segs.expect_array();
        for (size_t k = 0; k < segs.size(); ++k) {
            const JsonField sg = segs.at(k);
            sg.expect_array();
            if (sg.size() != 3) sg.fail_here("expected [parameter, offset, numel]");
            op.segments.push_back({read_int(sg.at(0), 0), sg.at(1).as_integer_in(0, INT64_MAX),
                                   sg.at(2).as_integer_in(0, INT64_MAX)});
        }
    }
    op.deps = read_list<int64_t>(o.at("deps"), 0);
    return op;
}

// One host event; `ops` is the number of ops (an event runs before an op, or after the last one).
HostEvent read_host_event(const JsonField& h, int64_t ops) {
    HostEvent e;
    e.kind = named_value(h.at("kind"), host_kind_name, HostKind::ReduceSync);
    e.step = read_int(h.at("step"), -1);
    e.micro = read_int(h.at("micro"), -1);
    e.module = read_int(h.at("module"), -1);
    e.first_op = h.at("first_op").as_integer_in(0, ops);
    if (h.has("waits")) {
        const JsonField w = h.at("waits");
        e.waits = read_list<int64_t>(w, 0);
        for (size_t k = 0; k < e.waits.size(); ++k)
            if (e.waits[k] >= ops) w.at(k).fail_here("expected an op id below " + std::to_string(ops));
    }
    if (h.has("fetch_events")) e.fetch_events = read_int(h.at("fetch_events"), 0);
    if (h.has("released_elements")) e.released_elements = h.at("released_elements").as_integer_in(0, INT64_MAX);
    return e;
}

std::optional<ScheduleSources> read_sources(const JsonField& root) {
    if (!root.has("inputs")) return std::nullopt;
    const JsonField in = root.at("inputs");
    in.expect_object();
    in.at("ds_config").expect_object();
    in.at("model").expect_object();
    return ScheduleSources{in.at("ds_config").raw(), in.at("model").raw()};
}

SavedSchedule read_document(const JsonField& root) {
    root.expect_object();
    if (root.at("format").as_string() != "zerosim-schedule") root.at("format").fail_here("expected \"zerosim-schedule\"");
    if (root.has("version")) root.at("version").as_integer_in(1, 2);
    SavedSchedule saved;
    Schedule& s = saved.schedule;
    s.meta = read_meta(root.at("meta"));
    saved.sources = read_sources(root);
    s.params = read_params(root.at("parameters"));
    const JsonField ops = root.at("ops");
    ops.expect_array();
    for (size_t i = 0; i < ops.size(); ++i) s.add(read_op(ops.at(i), i));
    if (root.has("host")) {   // version 1 files have none
        const JsonField host = root.at("host");
        host.expect_array();
        for (size_t i = 0; i < host.size(); ++i)
            s.host.push_back(read_host_event(host.at(i), static_cast<int64_t>(s.ops.size())));
    }
    return saved;
}

}  // namespace

Result<SavedSchedule> read_saved_schedule(const std::string& path) {
    auto text = read_text_file(path, "schedule file");
    if (!text) return text.error();
    return parse_saved_schedule(text.value(), path);
}

Result<SavedSchedule> parse_saved_schedule(const std::string& text, const std::string& name) {
    auto doc = parse_json_text(text, name);
    if (!doc) return doc.error();
    try {
        SavedSchedule saved = read_document(JsonField(doc.value(), name, ""));
        // What the file says must hold together before anyone runs it.
        if (auto e = check_schedule(saved.schedule, name)) return *e;
        return saved;
    } catch (const InputFailure& f) {
        return f.error;
    }
}

Result<Schedule> read_schedule_json(const std::string& path) {
    auto saved = read_saved_schedule(path);
    if (!saved) return saved.error();
    return std::move(saved.value().schedule);
}

Result<Schedule> parse_schedule_json(const std::string& text, const std::string& name) {
    auto saved = parse_saved_schedule(text, name);
    if (!saved) return saved.error();
    return std::move(saved.value().schedule);
}

}  // namespace zerosim
