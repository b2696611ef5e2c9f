// The schedule JSON writer (formats/schedule_json.hpp; the format: docs/schedule-ir.md).
#include <sstream>

#include "formats/schedule_json.hpp"
#include "schedule_json_names.hpp"

namespace zerosim {

namespace {

using schedule_json::group_name;
using schedule_json::on_world_group;
using schedule_json::rule_config_keys;
using schedule_json::rule_name;

// What a collective is: its size, dtype, reduction, group and caller. A compute op carries these
// only where they differ from an Op's defaults, so that every field survives the file.
void write_collective_fields(Json& j, const Op& op) {
    const bool coll = is_collective(op.kind);
    const Op none;
    if (coll) j["elements"] = op.elements;
    if (coll) j["bytes"] = op.bytes();
    if (coll || op.dtype != none.dtype) j["dtype"] = dtype_name(op.dtype);
    if (coll || op.redop != none.redop) j["redop"] = reduce_op_name(op.redop);
    if (op.root >= 0) j["root"] = op.root;
    if (op.peer >= 0) j["peer"] = op.peer;
    if (coll || !on_world_group(op)) j["group"] = group_name(op);
    if (!op.logged) j["logged"] = false;
    if (coll || !op.caller.empty()) j["caller"] = op.caller;
    if (op.bucket >= 0) j["bucket"] = op.bucket;
}

// What a compute segment is: its kind, module, FLOPs and bytes; on a collective only where set.
void write_compute_fields(Json& j, const Op& op) {
    const bool comp = !is_collective(op.kind);
    if (comp || op.compute != ComputeKind::None) j["compute"] = compute_kind_name(op.compute);
    if (op.module >= 0) j["module"] = op.module;
    if (op.module >= 0 || !op.module_name.empty()) j["module_name"] = op.module_name;
    if (comp && (op.elements != 0 || op.compute == ComputeKind::OptimizerStep)) j["elements"] = op.elements;
    if (comp || op.flops != 0.0) j["flops"] = op.flops;
    if (comp || op.mem_bytes != 0) j["mem_bytes"] = op.mem_bytes;
}

Json op_json(const Op& op) {
    Json j;
    j["id"] = op.id;
    j["kind"] = is_collective(op.kind) ? op_record_name(op.kind) : "compute";
    j["step"] = op.step;
    j["micro"] = op.micro;
    j["phase"] = phase_name(op.phase);
    j["stream"] = stream_name(op.stream);
    j["payload"] = payload_name(op.payload);
    // Collectives first, as version 1 wrote them; a collective's compute fields after.
    if (is_collective(op.kind)) {
        write_collective_fields(j, op);
        write_compute_fields(j, op);
    } else {
        write_compute_fields(j, op);
        write_collective_fields(j, op);
    }
    if (op.param_group >= 0) j["param_group"] = op.param_group;
    j["rule"] = rule_name(op);
    Json keys = Json::array();   // for people reading the file; derived from the rule, not read back
    std::stringstream list(rule_config_keys(op));
    std::string k;
    while (std::getline(list, k, ','))
        if (!k.empty()) keys.push_back(k);
    j["config_keys"] = std::move(keys);
    j["params"] = op.params;
    if (!op.segments.empty()) {
        Json segs = Json::array();
        for (const auto& sg : op.segments) segs.push_back(Json::array({sg.param, sg.offset, sg.numel}));
        j["segments"] = std::move(segs);
    }
    j["deps"] = op.deps;
    return j;
}

Json host_event_json(const HostEvent& e) {
    Json j;
    j["kind"] = host_kind_name(e.kind);
    j["step"] = e.step;
    j["micro"] = e.micro;
    j["module"] = e.module;
    j["first_op"] = e.first_op;
    if (!e.waits.empty()) j["waits"] = e.waits;
    if (e.fetch_events != 0) j["fetch_events"] = e.fetch_events;
    if (e.released_elements != 0) j["released_elements"] = e.released_elements;
    return j;
}

Json partition_json(const PartitionLayout& p) {
    Json j;
    j["layout"] = partition_kind_name(p.kind);
    if (!p.groups.empty()) {
        Json groups = Json::array();
        for (const auto& g : p.groups) {
            groups.push_back(Json{{"order", g.order}, {"offsets", g.offsets}, {"partition_size", g.partition_size}});
            if (g.over != GroupKind::Dp) groups.back()["over"] = ::zerosim::group_name(g.over);   // MoE experts' groups
        }
        j["groups"] = std::move(groups);
    }
    return j;
}

// The ZeRO++/MiCS settings and their process groups, where the schedule has them.
void write_variants(Json& meta, const ScheduleMeta& m) {
    if (m.variants.any() || m.variants.gpus_per_node > 0) {
        const ZeroVariants& v = m.variants;
        meta["zero_variants"] = Json{{"hpz_partition_size", v.hpz}, {"quantized_weights", v.qwz},
                                     {"quantized_gradients", v.qgz}, {"mics_shard_size", v.mics},
                                     {"gpus_per_node", v.gpus_per_node}};
    }
    if (!m.groups.empty()) {
        Json groups = Json::object();   // ordered_json: the groups in meta.groups' order
        for (const auto& g : m.groups) groups[schedule_json::process_group_name(g)] = g.members;
        meta["process_groups"] = std::move(groups);
    }
}

Json meta_json(const ScheduleMeta& m) {
    Json meta;
    meta["release"] = m.release.number();   // meta.dialect is "deepspeed-" + this: not written
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
    meta["partition"] = partition_json(m.partition);
    meta["stage3_peak_gathered_elements"] = m.stage3_peak_gathered_elements;
    meta["stage3_persistent_elements"] = m.stage3_persistent_elements;
    meta["zero_init"] = m.zero_init;
    if (m.activation_checkpointing) meta["activation_checkpointing"] = true;
    meta["offload_optimizer"] = m.offload_optimizer;
    meta["offload_param"] = m.offload_param;
    if (m.layout.is_3d()) {
        const ParallelLayout& L = m.layout;
        meta["layout"] = Json{{"world", L.world}, {"pipe", L.pipe}, {"tensor", L.tensor}, {"sequence", L.sequence}, {"expert", L.expert}};
        if (L.pipe_engine) meta["layout"]["pipe_engine"] = true;
        meta["rank"] = m.rank;
        meta["pipe_stage"] = m.pipe_stage;
        meta["pipe_partition"] = m.pipe_partition == PipePartition::Uniform ? std::string("uniform")
                                 : m.pipe_partition == PipePartition::Type ? "type:" + m.pipe_partition_type
                                                                            : std::string("parameters");
        if (m.param_shards > 0) meta["param_shards"] = m.param_shards;
        meta["ranks"] = "the ops of rank " + std::to_string(m.rank) + " in this order (each rank of a 3D layout runs its own)";
    } else {
        meta["ranks"] = "every data-parallel rank runs these ops in this order";
    }
    write_variants(meta, m);
    return meta;
}

}  // namespace

namespace {

// A JSON array written element by element exactly as the whole document's dump(1) writes it at
// depth one: "[]" when empty, else each element on its own lines two spaces in. An element's own
// lines after its first are indented relative to it, so its dump(1) moves in by two spaces at each
// newline (JSON strings hold no raw newline).
class ArrayWriter {
  public:
    explicit ArrayWriter(std::ostream& out) : out_(out) {}
    void add(const Json& element) {
        out_ << (first_ ? "[\n  " : ",\n  ");
        first_ = false;
        text_ = element.dump(1);
        size_t from = 0;
        for (size_t nl = text_.find('\n'); nl != std::string::npos; nl = text_.find('\n', from)) {
            out_.write(text_.data() + from, static_cast<std::streamsize>(nl + 1 - from));
            out_ << "  ";
            from = nl + 1;
        }
        out_.write(text_.data() + from, static_cast<std::streamsize>(text_.size() - from));
    }
    void close() { out_ << (first_ ? "[]" : "\n ]"); }

  private:
    std::ostream& out_;
    bool first_ = true;
    std::string text_;
};

}  // namespace

void write_schedule_json(std::ostream& out, const Schedule& s, const ScheduleSources* sources) {
    write_schedule_json(out, ScheduleStream::of(s), sources);
}

void write_schedule_json(std::ostream& out, const ScheduleStream& s, const ScheduleSources* sources) {
    Json j;
    j["format"] = "zerosim-schedule";
    j["version"] = 2;
    j["meta"] = meta_json(s.meta());
    if (sources) j["inputs"] = Json{{"ds_config", sources->ds_config}, {"model", sources->model}};
    Json params = Json::array();
    for (const auto& p : s.params())
        params.push_back(Json{{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"group", p.group}});
    j["parameters"] = std::move(params);
    // The document up to its last two arrays, then those written op by op and event by event.
    j["ops"] = Json::array();
    j["host"] = Json::array();
    std::string head = j.dump(1);
    const std::string tail = ",\n \"ops\": [],\n \"host\": []\n}";
    head.resize(head.size() - tail.size());
    out << head << ",\n \"ops\": ";
    ArrayWriter ops(out);
    s.each_op([&](const Op& op) { ops.add(op_json(op)); });
    ops.close();
    out << ",\n \"host\": ";
    ArrayWriter host(out);
    s.each_host_event([&](const HostEvent& e) { host.add(host_event_json(e)); });
    host.close();
    out << "\n}\n";
}

}  // namespace zerosim
