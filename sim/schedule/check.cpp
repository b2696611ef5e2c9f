#include "schedule/check.hpp"

#include <algorithm>

#include "schedule/partition.hpp"

namespace zerosim {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The partition layout against the parameter list: a FlatGroups group lists its group's
// parameters, each once, end to end, and is cut as flat_partition_size says.
Status check_layout(const Schedule& s, const std::string& file) {
    const auto& L = s.meta.partition;
    const int64_t P = static_cast<int64_t>(s.params.size());
    if (L.kind != PartitionKind::FlatGroups) {
        if (!L.groups.empty())
            return Error{file, "meta.partition.groups", std::string("a ") + partition_kind_name(L.kind) +
                                                            " layout has no flattened groups"};
        return std::nullopt;
    }
    if (static_cast<int64_t>(L.groups.size()) != s.meta.num_groups)
        return Error{file, "meta.partition.groups",
                     "lists " + str(static_cast<int64_t>(L.groups.size())) + " groups; the schedule has " +
                         str(s.meta.num_groups)};
    std::vector<int> seen(static_cast<size_t>(P), 0);
    for (size_t g = 0; g < L.groups.size(); ++g) {
        const GroupPartition& G = L.groups[g];
        const std::string field = "meta.partition.groups[" + str(static_cast<int64_t>(g)) + "]";
        if (G.offsets.size() != G.order.size())
            return Error{file, field + ".offsets", "expected one offset per parameter of the order"};
        int64_t end = 0;
        for (size_t i = 0; i < G.order.size(); ++i) {
            int p = G.order[i];
            if (p < 0 || p >= P || s.params[p].group != static_cast<int>(g) || seen[p]++)
                return Error{file, field + ".order", "parameter " + str(p) + " is not a parameter of group " +
                                                         str(static_cast<int64_t>(g)) + " listed once"};
            if (G.offsets[i] != end)
                return Error{file, field + ".offsets",
                             s.params[p].name + " starts at " + str(G.offsets[i]) + ", not where the one before ends (" +
                                 str(end) + ")"};
            end += s.params[p].numel;
        }
        for (int64_t p = 0; p < P; ++p)
            if (s.params[p].group == static_cast<int>(g) && !seen[p])
                return Error{file, field + ".order", "misses " + s.params[p].name};
        const int64_t ranks = s.meta.group_size(G.over);
        if (ranks < 1) return Error{file, field + ".over", std::string("no process group ") + group_name(G.over) + " in meta"};
        int64_t want = flat_partition_size(end, ranks);
        if (G.partition_size != want)
            return Error{file, field + ".partition_size",
                         str(G.partition_size) + " elements per rank; " + str(end) + " elements over " + str(ranks) +
                             " ranks are cut into " + str(want)};
    }
    return std::nullopt;
}

// Where parameter p starts in its group's flat buffer (FlatGroups).
int64_t flat_offset(const Schedule& s, int p) {
    const GroupPartition& G = s.meta.partition.groups[s.params[p].group];
    auto it = std::find(G.order.begin(), G.order.end(), p);
    return G.offsets[it - G.order.begin()];
}

const char* kind_name(OpKind k) { return op_record_name(k); }

// The op kinds a payload travels in.
bool payload_fits(Payload p, OpKind k) {
    switch (p) {
        case Payload::Compute: return k == OpKind::Compute;
        case Payload::Barrier: return k == OpKind::Barrier;
        case Payload::GradientBucket:
        case Payload::GradientSlices: return k == OpKind::AllReduce || k == OpKind::Reduce;
        case Payload::GradientShards: return k == OpKind::ReduceScatter;
        case Payload::ParameterShards:
        case Payload::ParameterPartitions: return k == OpKind::AllGather;
        case Payload::ParameterBroadcast:
        case Payload::TraceCheck: return k == OpKind::Broadcast;
        case Payload::OverflowFlag:
        case Payload::GradientNorm:
        case Payload::GradientPartitions: return k == OpKind::AllReduce;
        case Payload::QuantizedShards: return k == OpKind::AllGather;
        case Payload::QuantScales: return k == OpKind::AllGather || k == OpKind::AllToAll;
        case Payload::QuantizedGradient: return k == OpKind::AllToAll;
        case Payload::Activations:
            return k == OpKind::AllReduce || k == OpKind::AllToAll || k == OpKind::AllGather || k == OpKind::ReduceScatter ||
                   k == OpKind::Send || k == OpKind::Recv;
        case Payload::Scalars:
            return k == OpKind::AllReduce || k == OpKind::Broadcast || k == OpKind::Send || k == OpKind::Recv;
    }
    return false;
}

class OpChecker {
  public:
    OpChecker(const Schedule& s, const std::string& file) : s_(s), file_(file) {}

    Status check(size_t k) {
        const Op& op = s_.ops[k];
        const int64_t P = static_cast<int64_t>(s_.params.size());
        if (op.id != static_cast<int64_t>(k)) return err(k, "id " + str(op.id) + " is not its position");
        for (int p : op.params)
            if (p < 0 || p >= P) return err(k, "parameter index " + str(p) + " is outside the parameter list");
        for (const auto& sg : op.segments) {
            if (sg.param < 0 || sg.param >= P) return err(k, "segment parameter " + str(sg.param) + " is unknown");
            if (sg.offset < 0 || sg.numel < 0 || sg.offset + sg.numel > s_.params[sg.param].numel)
                return err(k, "segment [" + str(sg.offset) + ", +" + str(sg.numel) + ") lies outside " +
                                  s_.params[sg.param].name);
        }
        for (int64_t d : op.deps)
            if (d < 0 || d >= static_cast<int64_t>(k))
                return err(k, "dependency " + str(d) + " (deps) is not an earlier op");
        if (!payload_fits(op.payload, op.kind))
            return err(k, std::string("payload ") + payload_name(op.payload) + " cannot travel in " + kind_name(op.kind));
        if (op.payload != rule_info(op.rule).payload)   // every rule has one payload (ir.cpp's rule table)
            return err(k, std::string("payload ") + payload_name(op.payload) + " is not rule " + rule_name(op.rule) +
                              "'s (" + payload_name(rule_info(op.rule).payload) + ")");
        if (op.kind == OpKind::Compute) return op.compute == ComputeKind::OptimizerStep ? optimizer_step(k) : std::nullopt;
        if (op.elements < 0) return err(k, "negative elements");
        if (s_.meta.group_size(op.group) < 1) return err(k, std::string("group \"") + group_name(op.group) + "\" is not in meta.groups");
        if ((op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce) &&
            (op.root < 0 || op.root >= s_.meta.group_size(op.group)))
            return err(k, "root " + str(op.root) + " is not a rank of its group of " + str(s_.meta.group_size(op.group)));
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
            const int64_t W = s_.meta.layout.world;
            if (op.peer < 0 || op.peer >= W || op.peer == s_.meta.rank)
                return err(k, "peer " + str(op.peer) + " is not another rank of the world of " + str(W));
        }
        return payload(k);
    }

  private:
    const Schedule& s_;
    const std::string& file_;

    Status err(size_t k, const std::string& m) const { return Error{file_, "ops[" + str(static_cast<int64_t>(k)) + "]", m}; }
    PartitionKind layout() const { return s_.meta.partition.kind; }
    int64_t whole(const Op& op) const {
        int64_t n = 0;
        for (int p : op.params) n += s_.params[p].numel;
        return n;
    }
    // Stage 3 shards: ceil(numel / shard count) (the world, or the MiCS shard size); on the hpZ
    // group the secondary shards, that padded to the world and cut in hpZ-group-size pieces.
    int64_t shards(const Op& op, int64_t cut = 0) const {
        if (cut == 0) cut = s_.meta.shard_count();
        const bool secondary = op.group == GroupKind::Hpz && s_.meta.group_size(GroupKind::Hpz) > 0;
        int64_t n = 0;
        for (int p : op.params) {
            int64_t part = stage3_partition_numel(s_.params[p].numel, cut);
            n += secondary ? part * s_.meta.world / s_.meta.group_size(GroupKind::Hpz) : part;
        }
        return n;
    }
    Status needs_layout(size_t k, PartitionKind want) const {
        if (layout() == want) return std::nullopt;
        return err(k, std::string("payload ") + payload_name(s_.ops[k].payload) + " needs a " + partition_kind_name(want) +
                          " partition layout; the schedule's is " + partition_kind_name(layout()));
    }
    Status needs_params(size_t k) const {
        if (!s_.ops[k].params.empty()) return std::nullopt;
        return err(k, std::string("payload ") + payload_name(s_.ops[k].payload) + " names no params");
    }
    Status model_dtype(size_t k, const char* what) const {
        if (s_.ops[k].dtype == s_.meta.model_dtype) return std::nullopt;
        return err(k, std::string(what) + " parameters in another dtype");
    }
    Status group_of(size_t k) const {
        const int g = s_.ops[k].param_group;
        if (g >= 0 && g < s_.meta.num_groups) return std::nullopt;
        return err(k, "param_group " + str(g) + " is not a parameter group");
    }

    Status payload(size_t k) const {
        const Op& op = s_.ops[k];
        const std::string n = str(op.elements);
        switch (op.payload) {
            case Payload::GradientBucket:
                if (auto e = needs_params(k)) return e;
                if (!op.segments.empty()) return err(k, "payload gradient_bucket carries whole parameters, not segments");
                if (whole(op) != op.elements) return err(k, "parameters hold " + str(whole(op)) + " elements; the op sends " + n);
                return reduce_owner(k);
            case Payload::GradientSlices: {
                int64_t total = 0;
                for (const auto& sg : op.segments) total += sg.numel;
                if (total > op.elements)
                    return err(k, "segments hold " + str(total) + " elements, more than the op's " + n);
                return reduce_owner(k);
            }
            case Payload::GradientShards:
                if (auto e = needs_params(k)) return e;
                if (auto e = needs_layout(k, PartitionKind::PerParameter)) return e;
                // Each gradient padded to a multiple of the group it is scattered over (that group is
                // the parameters' shard group, except under Ulysses: docs/zero-comm.md §9c).
                if (const int64_t g = s_.meta.group_size(op.group); g * shards(op, g) != op.elements)
                    return err(k, "padded parameters hold " + str(g * shards(op, g)) + " elements; the op sends " + n);
                return std::nullopt;
            case Payload::ParameterShards:
                if (auto e = needs_params(k)) return e;
                if (auto e = needs_layout(k, PartitionKind::PerParameter)) return e;
                if (shards(op) != op.elements) return err(k, "shards hold " + str(shards(op)) + " elements; the op sends " + n);
                return model_dtype(k, "gathers");
            case Payload::QuantizedShards:
                if (auto e = needs_params(k)) return e;
                if (shards(op) != op.elements) return err(k, "shards hold " + str(shards(op)) + " elements; the op sends " + n);
                return std::nullopt;
            case Payload::ParameterPartitions: {
                if (auto e = needs_layout(k, PartitionKind::FlatGroups)) return e;
                if (auto e = group_of(k)) return e;
                int64_t ps = s_.meta.partition.groups[op.param_group].partition_size;
                if (ps != op.elements)
                    return err(k, "group " + str(op.param_group) + "'s partition has " + str(ps) + " elements; the op sends " + n);
                return model_dtype(k, "gathers");
            }
            case Payload::ParameterBroadcast:
                if (auto e = needs_params(k)) return e;
                if (whole(op) != op.elements) return err(k, "parameters hold " + str(whole(op)) + " elements; the op sends " + n);
                return model_dtype(k, "broadcasts");
            default:
                return std::nullopt;
        }
    }

    // A reduce leaves the result on its root only: every gradient element it carries must be one
    // the root owns (stage_1_and_2.py average_tensor sends each slice to its partition's owner).
    Status reduce_owner(size_t k) const {
        const Op& op = s_.ops[k];
        if (op.kind != OpKind::Reduce || s_.meta.world == 1) return std::nullopt;
        if (auto e = needs_layout(k, PartitionKind::FlatGroups)) return e;
        std::vector<Segment> segs = op.segments;
        if (segs.empty())
            for (int p : op.params) segs.push_back({p, 0, s_.params[p].numel});
        for (const auto& sg : segs) {
            int64_t ps = s_.meta.partition.groups[s_.params[sg.param].group].partition_size;
            int64_t lo = flat_offset(s_, sg.param) + sg.offset;
            if (sg.numel > 0 && (lo < op.root * ps || lo + sg.numel > (op.root + 1) * ps))
                return err(k, "segment [" + str(sg.offset) + ", +" + str(sg.numel) + ") of " + s_.params[sg.param].name +
                                  " is not in the partition of rank " + str(op.root) + ", the reduce's root");
        }
        return std::nullopt;
    }

    // An optimizer step updates this rank's partition of what the layout says it owns.
    Status optimizer_step(size_t k) const {
        const Op& op = s_.ops[k];
        const std::string n = str(op.elements);
        switch (layout()) {
            case PartitionKind::Replicated: {
                int64_t total = 0;
                for (const auto& p : s_.params) total += p.numel;
                if (op.param_group >= 0) return err(k, "a per-group optimizer step in a replicated layout");
                if (total != op.elements) return err(k, "covers " + n + " elements; the model has " + str(total));
                return std::nullopt;
            }
            case PartitionKind::FlatGroups: {
                if (auto e = group_of(k)) return e;
                int64_t ps = s_.meta.partition.groups[op.param_group].partition_size;
                if (ps != op.elements)
                    return err(k, "covers " + n + " elements; group " + str(op.param_group) + "'s partition has " + str(ps));
                return std::nullopt;
            }
            case PartitionKind::PerParameter: {
                if (auto e = group_of(k)) return e;
                if (auto e = needs_params(k)) return e;
                for (int p : op.params)
                    if (s_.params[p].group != op.param_group)
                        return err(k, s_.params[p].name + " is not in param_group " + str(op.param_group));
                if (shards(op) != op.elements) return err(k, "covers " + n + " elements; the shards of its params hold " + str(shards(op)));
                return std::nullopt;
            }
        }
        return std::nullopt;
    }
};

}  // namespace

namespace {

// The ZeRO stages a rule's ops occur at, as a mask of 1 << stage (the rule table's families,
// ir.cpp: stage0.*, stage12.*, stage3.* and the stage-3 variants qwz/qgz/mics and the FSDP
// what-ifs); every other rule (engine start, bf16, fp16, the parallel layers, compute) at any.
unsigned rule_stages(RuleId r) {
    switch (r) {
        case RuleId::Stage0BucketAllreduce:
        case RuleId::Stage0ClipGradNorm: return 1u << 0;
        case RuleId::Stage12FlushAllreducePredivide:
        case RuleId::Stage12FlushAllreducePerDtype:
        case RuleId::Stage12FlushMultiRankAllreduce:
        case RuleId::Stage12FlushReducePerRank:
        case RuleId::Stage12StepGradNorm:
        case RuleId::Stage12StepAllgatherPartitions: return 1u << 1 | 1u << 2;
        case RuleId::Stage3InitZeroInitParam: case RuleId::Stage3InitBarrier: case RuleId::Stage3InitAllgatherParams:
        case RuleId::Stage3Fetch: case RuleId::Stage3Prefetch: case RuleId::Stage3TraceCheck: case RuleId::Stage3TraceStart:
        case RuleId::Stage3TraceCheckLength: case RuleId::Stage3FlushReduceScatter: case RuleId::Stage3FlushAllreduce:
        case RuleId::Stage3StepGradNorm: case RuleId::Stage3StepGradNormCpuOffload: case RuleId::Stage3StepPersistentRegather:
        case RuleId::QwzFetch: case RuleId::QwzPrefetch: case RuleId::QwzFetchScales: case RuleId::QgzIntraAllToAll:
        case RuleId::QgzIntraScales: case RuleId::QgzInterAllToAll: case RuleId::QgzInterScales:
        case RuleId::QgzFallbackReduceScatter: case RuleId::MicsAllreduceShardGrads: case RuleId::WhatifFsdpUnshard:
        case RuleId::WhatifFsdpReduceScatter: case RuleId::WhatifHsdpAllreduce: return 1u << 3;
        default: return 0xFu;
    }
}

// meta.stage against the ops: a schedule whose stage says 2 and whose ops are stage 3's would be
// run (zerorun's state layout follows meta.stage) and recorded as the wrong stage.
Status check_stage_of_ops(const Schedule& s, const std::string& file) {
    if (s.meta.stage < 0 || s.meta.stage > 3) return Error{file, "meta.stage", "expected a ZeRO stage, 0 to 3"};
    for (size_t k = 0; k < s.ops.size(); ++k) {
        const unsigned fits = rule_stages(s.ops[k].rule);
        if (fits & (1u << s.meta.stage)) continue;
        int other = 0;
        while (!(fits & (1u << other))) ++other;
        return Error{file, "meta.stage", "says stage " + str(s.meta.stage) + ", but op " + str(static_cast<int64_t>(k)) + " (" +
                                             rule_name(s.ops[k].rule) + ") is a stage-" + (other == 1 ? std::string("1/2") : str(other)) +
                                             " op: the schedule's stage and its ops disagree"};
    }
    return std::nullopt;
}

}  // namespace

Status check_schedule(const Schedule& s, const std::string& file) {
    if (s.meta.world < 1) return Error{file, "meta.world", "expected at least 1 rank"};
    if (s.meta.num_groups < 1) return Error{file, "meta.param_groups", "expected at least 1 parameter group"};
    for (size_t i = 0; i < s.params.size(); ++i)
        if (s.params[i].numel < 0 || s.params[i].group < 0 || s.params[i].group >= s.meta.num_groups)
            return Error{file, "parameters[" + str(static_cast<int64_t>(i)) + "]",
                         "needs numel >= 0 and a group below " + str(s.meta.num_groups)};
    if (auto e = check_layout(s, file)) return e;
    OpChecker ops(s, file);
    for (size_t k = 0; k < s.ops.size(); ++k)
        if (auto e = ops.check(k)) return e;
    if (auto e = check_stage_of_ops(s, file)) return e;   // each op sound, then the stage they make
    // Stage 3's host events: in host order, each before an op the host then issues, and a
    // throttle wait only on an op the host issued before it.
    int64_t prev = 0;
    for (size_t h = 0; h < s.host.size(); ++h) {
        const HostEvent& e = s.host[h];
        const std::string field = "host[" + str(static_cast<int64_t>(h)) + "]";
        if (e.first_op < prev || e.first_op > static_cast<int64_t>(s.ops.size()))
            return Error{file, field + ".first_op", "expected host order: from " + str(prev) + " to the op count"};
        prev = e.first_op;
        // The fetch throttle (O7) waits on gathers; the reduce throttle and the epilogue (O8) on
        // a backward gradient reduction.
        const bool on_reduce = e.kind == HostKind::GradientFlush || e.kind == HostKind::ReduceSync;
        for (int64_t w : e.waits) {
            const Op* op = w >= 0 && w < e.first_op ? &s.ops[static_cast<size_t>(w)] : nullptr;
            if (!op || (!on_reduce && op->stream != Stream::Fetch))
                return Error{file, field + ".waits", "op " + str(w) + " is not a gather issued before the event"};
            if (on_reduce && !(is_collective(op->kind) && op->phase == Phase::Backward))
                return Error{file, field + ".waits", "op " + str(w) + " is not a gradient reduction issued before the event"};
        }
    }
    return std::nullopt;
}

}  // namespace zerosim
