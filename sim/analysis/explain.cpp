#include "analysis/explain.hpp"

#include "core/sizes.hpp"
#include "analysis/zero_variants.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "formats/comms_log.hpp"
#include "schedule/release_rules.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

// Bytes each rank sends (and receives) for one op on a ring over its process group of `ranks`
// (ZeRO++ / MiCS sub-groups; GroupKind::Dp is the world): the ZeRO paper's convention.
double op_wire_bytes(const Op& op, int64_t ranks) {
    double n = static_cast<double>(std::max<int64_t>(ranks, 1)), f = n > 1 ? (n - 1) / n : 0.0, S = static_cast<double>(op.bytes());
    switch (op.kind) {
        case OpKind::AllReduce: return 2 * f * S;
        case OpKind::ReduceScatter: return f * S;
        case OpKind::AllGather: return (n - 1) * S;
        case OpKind::Reduce: return f * S;  // each rank sends its share once
        case OpKind::Broadcast: return f * S;
        case OpKind::AllToAll: return f * S;  // S/n to each other rank
        case OpKind::Send:
        case OpKind::Recv: return S;          // point to point: the buffer crosses once (sent, or received)
        default: return 0;
    }
}

double wire_bytes_per_rank(const Schedule& s, int step, bool zero_only) {
    double total = 0;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind) || op.step != step) continue;
        // ZeRO's own: its data-parallel group and the experts' (the 3D groups carry the model's layers).
        if (zero_only && op.group != GroupKind::Dp && op.group != GroupKind::ExpertData) continue;
        total += op_wire_bytes(op, s.meta.group_size(op.group));
    }
    return total;
}

namespace {

// Sizes in zerosim's own voice (core/sizes.hpp); the comms logger's own size text stays ds_size_string.
std::string human(double bytes) { return binary_size_string(static_cast<int64_t>(bytes)); }

// 70426624 -> "70.4M": element counts as people say them.
std::string count_text(double n) {
    char b[32];
    if (n >= 1e9) std::snprintf(b, sizeof b, "%.3gB", n / 1e9);
    else if (n >= 1e6) std::snprintf(b, sizeof b, "%.3gM", n / 1e6);
    else if (n >= 1e3) std::snprintf(b, sizeof b, "%.3gK", n / 1e3);
    else std::snprintf(b, sizeof b, "%.0f", n);
    return b;
}

// One rule's ops in one step: how many, what each rank sends (and receives), the largest logged size.
struct StepOps {
    int count = 0;
    double wire = 0;
    int64_t largest = 0;
};

// How the gradients of one micro-step fill the buckets of a flush rule: "all 70.4M gradient
// elements fit one 500000000-element bucket (reduce_bucket_size): one flush per micro-step".
std::string bucket_sentence(const Schedule& s, const DsConfig& cfg, const std::vector<const Op*>& ops, int step) {
    std::set<std::pair<int, int>> flushes;   // (micro-step, bucket)
    for (auto* op : ops)
        if (op->step == step) flushes.insert({op->micro, op->bucket});
    std::set<int> micros;
    for (const auto& f : flushes) micros.insert(f.first);
    if (micros.empty()) return "";
    const size_t per_micro = flushes.size() / micros.size();
    const double psi = static_cast<double>(s.meta.total_params);
    const double bucket = static_cast<double>(cfg.zero.reduce_bucket_size);
    std::string out = psi <= bucket ? "all " + count_text(psi) + " gradient elements fit one " + count_text(bucket) +
                                          "-element bucket (reduce_bucket_size)"
                                    : "the " + count_text(psi) + " gradient elements fill " + std::to_string(per_micro) +
                                          " buckets of up to " + count_text(bucket) + " elements (reduce_bucket_size)";
    const std::string flushes_text = per_micro == 1 ? "one flush" : std::to_string(per_micro) + " flushes";
    if (micros.size() == 1) out += ": " + flushes_text + " per step";
    else out += ": " + flushes_text + " per micro-step, " + std::to_string(micros.size()) + " micro-steps per step (gradient_accumulation_steps)";
    return out;
}

// The value of a config key as zerosim read it, and DeepSpeed's default.
std::pair<std::string, std::string> key_value(const DsConfig& c, const std::string& key) {
    const DsConfig d = DsConfig{}.with_stage(c.zero.stage);   // DeepSpeed's defaults at this stage
    auto b = [](bool v) { return std::string(v ? "true" : "false"); };
    auto n = [](int64_t v) { return std::to_string(v); };
    const auto &z = c.zero, &dz = d.zero;
    if (key == "zero_optimization.stage") return {n(z.stage), "0"};
    if (key == "zero_optimization.reduce_scatter") return {b(z.reduce_scatter), b(dz.reduce_scatter)};
    if (key == "zero_optimization.reduce_bucket_size") return {n(z.reduce_bucket_size), n(dz.reduce_bucket_size)};
    if (key == "zero_optimization.contiguous_gradients") return {b(z.contiguous_gradients), b(dz.contiguous_gradients)};
    if (key == "zero_optimization.use_multi_rank_bucket_allreduce")
        return {b(z.use_multi_rank_bucket_allreduce), b(dz.use_multi_rank_bucket_allreduce)};
    if (key == "zero_optimization.round_robin_gradients") return {b(z.round_robin_gradients), b(dz.round_robin_gradients)};
    if (key == "zero_optimization.stage3_prefetch_bucket_size") return {n(z.prefetch_bucket_size), n(dz.prefetch_bucket_size)};
    if (key == "zero_optimization.stage3_max_live_parameters") return {n(z.max_live_parameters), n(dz.max_live_parameters)};
    if (key == "zero_optimization.stage3_param_persistence_threshold")
        return {n(z.param_persistence_threshold), n(dz.param_persistence_threshold)};
    if (key == "zero_optimization.sub_group_size") return {n(z.sub_group_size), n(dz.sub_group_size)};
    if (key == "zero_optimization.zero_hpz_partition_size") return {n(z.hpz_partition_size), "1"};   // ZeRO++ / MiCS
    if (key == "zero_optimization.zero_quantized_weights") return {b(z.quantized_weights), "false"};
    if (key == "zero_optimization.zero_quantized_gradients") return {b(z.quantized_gradients), "false"};
    if (key == "zero_optimization.mics_shard_size") return {n(z.mics_shard_size), "-1"};
    if (key == "zero_optimization.offload_optimizer") return {b(z.offload_optimizer), "false"};
    if (key == "gradient_accumulation_steps") return {n(c.grad_accum.value_or(1)), "1"};
    if (key == "train_micro_batch_size_per_gpu") return {c.micro_batch ? n(*c.micro_batch) : "unset", "unset"};
    if (key == "fp16.enabled") return {b(c.model_dtype == DType::FP16), "false"};
    if (key == "bf16.enabled") return {b(c.model_dtype == DType::BF16), "false"};
    if (key == "gradient_clipping") return {std::to_string(c.gradient_clipping), "0.0"};
    if (key == "pipeline.pipe_partitioned") return {b(c.pipeline.pipe_partitioned), "true"};
    if (key == "communication_data_type")
        return {c.communication_data_type ? dtype_name(*c.communication_data_type) : "unset (training dtype)", "unset"};
    return {"?", "?"};
}

// What changing the knobs behind a rule would do.
const std::map<RuleId, std::string>& consequences() {
    static const std::map<RuleId, std::string> m = {
        {RuleId::InitBroadcastModel, "Independent of the config: DeepSpeed makes every rank start from rank 0's weights."},
        {RuleId::Stage3InitZeroInitParam,
         "Build the model under deepspeed.zero.Init() and these broadcasts (and _broadcast_model's) disappear."},
        {RuleId::Stage3InitAllgatherParams, "One per trainable parameter, to register gradient hooks on whole tensors."},
        {RuleId::Stage0BucketAllreduce,
         "The engine sends gradients in chunks of 500,000,000 elements whatever the config says; more "
         "gradient_accumulation_steps means fewer reductions per sample."},
        {RuleId::Stage12FlushMultiRankAllreduce,
         "A smaller reduce_bucket_size gives more, smaller all_reduces that overlap better with backward; a larger "
         "one fewer, bigger ones. use_multi_rank_bucket_allreduce: false sends one reduce per owning rank instead."},
        {RuleId::Stage12FlushReducePerRank,
         "use_multi_rank_bucket_allreduce: true (the default) would send one all_reduce per bucket instead of one "
         "reduce per owning rank."},
        {RuleId::Stage12FlushAllreducePredivide,
         "reduce_scatter: true (the default) would slice buckets by owner; the op stays an all_reduce unless "
         "use_multi_rank_bucket_allreduce is false."},
        {RuleId::Stage12FlushAllreducePerDtype, "contiguous_gradients: true copies gradients into one buffer first."},
        {RuleId::Stage12StepGradNorm, "Always sent, even with gradient_clipping 0: the norm is logged and checked."},
        {RuleId::Stage12StepAllgatherPartitions,
         "One per parameter group: every rank needs the updated weights of the whole model for the next forward."},
        {RuleId::Stage3Fetch, "Each module gathers its own parameters before it runs unless a prefetch already did."},
        {RuleId::QwzFetch, "Each module gathers its own parameters before it runs unless a prefetch already did."},
        {RuleId::Stage3Prefetch,
         "Bigger stage3_prefetch_bucket_size bundles more upcoming parameters into one gather (0 disables "
         "prefetch); stage3_max_live_parameters caps what can be held at once."},
        {RuleId::QwzPrefetch,
         "Bigger stage3_prefetch_bucket_size bundles more upcoming parameters into one gather (0 disables "
         "prefetch); stage3_max_live_parameters caps what can be held at once."},
        {RuleId::Stage3TraceCheck, "Only after the first forward and backward, while the module trace is recorded."},
        {RuleId::Stage3FlushReduceScatter,
         "reduce_bucket_size sets how many gradient elements go into one reduce-scatter."},
        {RuleId::Stage3FlushAllreduce, "reduce_scatter: true (the default) reduce-scatters buckets instead."},
        {RuleId::Stage3StepGradNorm, "One fp64 scalar per optimizer sub-group (sub_group_size)."},
        {RuleId::Stage3StepPersistentRegather,
         "Parameters at or below stage3_param_persistence_threshold elements stay gathered; raising it trades "
         "memory for fewer, larger forward gathers."},
        {RuleId::Bf16GradAllreduce, "bf16 without ZeRO (or stage 1 with fp32 accumulation) uses DeepSpeed's BF16 optimizer."},
        // ZeRO++ / MiCS (docs/zero-comm.md 9b).
        {RuleId::QwzFetchScales, "zero_quantized_weights: false sends the gathers in the model dtype (2-4x the bytes), no scales."},
        {RuleId::QgzIntraAllToAll, "Only with more than one node; zero_quantized_gradients: false reduce-scatters the bucket "
                                 "in the communication dtype instead (about 4-8x the bytes)."},
        {RuleId::QgzInterAllToAll, "The node already summed its gradients: 1/ranks-per-node of them cross the NICs, as int4."},
        {RuleId::QgzFallbackReduceScatter, "Gradients that are 1-D or not a multiple of 2 x world elements: qgZ cannot "
                                        "split them, and they go unquantized over all ranks."},
        {RuleId::MicsAllreduceShardGrads, "A larger mics_shard_size shards more (less memory) and shrinks this all_reduce's "
                                       "group; mics_shard_size = world makes it vanish (plain stage 3 sharding)."},
    };
    return m;
}

// A bucket flush's reduction (stage 1/2 and stage 3 "flush" rules), which the bucket sentence describes.
bool flushes_buckets(RuleId rule) {
    switch (rule) {
        case RuleId::Stage12FlushAllreducePredivide:
        case RuleId::Stage12FlushAllreducePerDtype:
        case RuleId::Stage12FlushMultiRankAllreduce:
        case RuleId::Stage12FlushReducePerRank:
        case RuleId::Stage3FlushReduceScatter:
        case RuleId::Stage3FlushAllreduce: return true;
        default: return false;
    }
}

// The release rules (schedule/release_rules.hpp) in force at `r` that touch schedule rule `rule`:
// one line each, "  Since v0.17.6 (#7525): ...".
std::string release_notes(RuleId rule, Release r) {
    std::string out;
    for (const auto& rr : release_rules()) {
        if (!in_releases(r, rr.first, rr.last)) continue;
        std::stringstream ids(rr.op_rules);
        for (std::string id; std::getline(ids, id, ',');)
            if (rule_from_name(id) == rule) {
                std::string span = release_span(rr);
                span[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(span[0])));
                out += "  " + span + ": " + rr.change + "\n";
            }
    }
    return out;
}


// The collectives of a schedule per rule, the rules in the order they first appear.
struct CollectivesByRule {
    std::vector<RuleId> order;
    std::map<RuleId, std::vector<const Op*>> ops;
};

CollectivesByRule collectives_by_rule(const Schedule& s) {
    CollectivesByRule by;
    for (const auto& op : s.ops) {
        if (!is_collective(op.kind)) continue;
        if (!by.ops.count(op.rule)) by.order.push_back(op.rule);
        by.ops[op.rule].push_back(&op);
    }
    return by;
}

void write_explain_intro(std::ostream& out, const ScheduleMeta& meta, int last) {
    out << "# Why these collectives: " << meta.model_name << " (" << meta.total_params << " parameters), ZeRO stage "
        << meta.stage << ", " << meta.world << " ranks, " << dtype_name(meta.model_dtype) << " training, gradients sent in "
        << dtype_name(meta.comm_dtype) << "\n\n";
    // Counts and bytes are per step (the last, steady one; where another step differs it is said),
    // and bytes are what each rank sends and, equally, receives on a ring: all_reduce 2(n-1)/n S,
    // reduce_scatter (n-1)/n S of the full input, all_gather (n-1) x the shard, broadcast and reduce
    // (n-1)/n S: the convention the ZeRO paper's 2Ψ and 3Ψ use (table below).
    out << "Counts are per step (step " << last << " of " << meta.steps
        << "; another step is named where it differs). Bytes are what each rank sends, and equally receives, on a ring: "
           "all_reduce 2(n-1)/n x size, reduce_scatter (n-1)/n x the full input, all_gather (n-1) x the shard, "
           "broadcast and reduce (n-1)/n x size; the ZeRO paper's 2Ψ and 3Ψ count the same way.\n\n";
}

// Activation checkpointing changes what is sent: the recomputed forwards in backward (compute.recompute)
// run the modules' hooks again, so at stage 3 a parameter released after its forward is fetched again.
void write_recompute_note(std::ostream& out, const Schedule& s, int last) {
    int64_t recomputes = 0;
    for (const Op& op : s.ops)
        if (op.rule == RuleId::ComputeRecompute && op.step == last) ++recomputes;
    if (recomputes == 0) return;
    out << "Activation checkpointing: " << recomputes << " checkpointed module forward(s) run again in backward in step " << last
        << " (compute.recompute)" << (s.meta.stage == 3 ? ", their parameters gathered again where released after the forward; "
                                                          "the all_gather counts below include those fetches"
                                                        : "; no collective of their own at this stage")
        << ".\n\n";
}

std::map<int, StepOps> step_ops_by_step(const ScheduleMeta& meta, const std::vector<const Op*>& ops) {
    std::map<int, StepOps> steps;
    for (auto* op : ops) {
        StepOps& so = steps[op->step];
        so.count++;
        so.wire += op_wire_bytes(*op, meta.group_size(op->group));
        so.largest = std::max(so.largest, op->bytes());
    }
    return steps;
}

// "3 x all_reduce (caller), each rank sends and receives ...": one step's ops of a rule, named by its first op.
std::string step_ops_text(const StepOps& so, const Op& first) {
    std::string head = std::to_string(so.count) + " x " + op_record_name(first.kind) + " (" + first.caller + ")";
    if (so.largest == 0) return head + ", no data";
    return head + ", each rank sends and receives " + human(so.wire) + "; largest logged size " +
           ds_size_string(so.largest) + " (as the comms logger prints it)";
}

void write_rule_counts(std::ostream& out, const std::vector<const Op*>& ops, const std::map<int, StepOps>& steps, int last) {
    const Op& first = *ops.front();
    if (first.step < 0) {
        out << "## at engine start: " << step_ops_text(steps.begin()->second, first) << "\n";
    } else if (steps.count(last)) {
        const StepOps& steady = steps.at(last);
        out << "## per step: " << step_ops_text(steady, first);
        for (int st = 0; st < last; ++st) {
            auto it = steps.find(st);
            if (it == steps.end())
                out << " (step " << st << ": none)";
            else if (it->second.count != steady.count || it->second.wire != steady.wire)
                out << " (step " << st << ": " << it->second.count << " x, " << human(it->second.wire) << ")";
        }
        out << "\n";
    } else {
        out << "## not every step: ";
        bool first_step = true;
        for (const auto& [st, so] : steps) {
            out << (first_step ? "" : "; ") << "step " << st << ": " << step_ops_text(so, first);
            first_step = false;
        }
        out << "\n";
    }
}

void write_rule_config_keys(std::ostream& out, const DsConfig& cfg, const Rule& r) {
    std::string keys = r.config_keys;
    std::stringstream ks(keys);
    std::string k;
    while (std::getline(ks, k, ',')) {
        if (k.empty()) continue;
        auto [v, d] = key_value(cfg, k);
        out << "  - " << k << " = " << v << (v == d ? " (DeepSpeed's default)" : " (default " + d + ")") << "\n";
    }
}

// The overflow check's sentence for the config's own dtype (the schedule sends it under fp16
// always, under bf16 where bf16.check_grad_overflow asks: docs/zero-comm.md step.overflow_check).
std::string overflow_check_sentence(DType dtype) {
    if (dtype == DType::BF16)
        return "bf16.check_grad_overflow (its default from DeepSpeed v0.19.3) sends it under bf16; set it false to drop "
               "it. fp32 training sends none.";
    return "fp16 training sends it every step (the loss scaler needs it); bf16 without bf16.check_grad_overflow, or "
           "fp32, sends none.";
}

void write_rule_section(std::ostream& out, const DsConfig& cfg, const Schedule& s, RuleId rule,
                        const std::vector<const Op*>& ops, int last) {
    const auto& meta = s.meta;
    const Rule& r = rule_info(rule);
    write_rule_counts(out, ops, step_ops_by_step(meta, ops), last);
    out << r.summary << " [rule " << r.name << "]\n";
    write_rule_config_keys(out, cfg, r);
    if (flushes_buckets(rule) && meta.stage >= 1) {
        std::string b = bucket_sentence(s, cfg, ops, last);
        if (!b.empty()) out << "  Buckets: " << b << ".\n";
    }
    auto c = consequences().find(rule);
    if (rule == RuleId::StepOverflowCheck)
        out << "  Changing it: " << overflow_check_sentence(meta.model_dtype) << "\n";
    else if (c != consequences().end())
        out << "  Changing it: " << c->second << "\n";
    out << release_notes(rule, meta.release);
    out << "\n";
}

// The step in all, beside the paper's figure for this stage (the table below has every stage).
void write_step_against_paper(std::ostream& out, const Schedule& s, int last) {
    const auto& meta = s.meta;
    const double paper = (meta.stage == 3 ? 3 : 2) * static_cast<double>(meta.total_params) * dtype_size(meta.comm_dtype) *
                         (meta.world > 1 ? static_cast<double>(meta.world - 1) / static_cast<double>(meta.world) : 0.0);
    const bool layout = meta.layout.is_3d();
    const double sent = wire_bytes_per_rank(s, last, layout);
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", paper > 0 ? sent / paper : 0.0);
    out << "## Step " << last << (layout ? ", ZeRO's own groups" : " in all") << ": each rank sends and receives " << human(sent)
        << "; the ZeRO paper's "
        << (meta.stage == 3 ? "3Ψ" : "2Ψ") << " for stage " << meta.stage << " is " << human(paper) << " (" << ratio
        << "x)\n\n";
}

// The classic question.
void write_stage12_allreduce_question(std::ostream& out, const DsConfig& cfg, const Schedule& s,
                                      const CollectivesByRule& by, int last) {
    const auto& meta = s.meta;
    if ((meta.stage == 1 || meta.stage == 2) && by.ops.count(RuleId::Stage12FlushMultiRankAllreduce)) {
        const auto& ops = by.ops.at(RuleId::Stage12FlushMultiRankAllreduce);
        int64_t biggest = 0;
        int per_step = 0;
        for (auto* op : ops) {
            biggest = std::max(biggest, op->bytes());
            if (op->step == last) ++per_step;
        }
        const std::string buckets = bucket_sentence(s, cfg, ops, last);
        out << "## \"I set reduce_scatter: true, why do I see one big all_reduce?\"\n"
            << "Because in DeepSpeed " << meta.release.number() << " stages 1 and 2 never call reduce_scatter. With reduce_scatter: "
            << (cfg.zero.reduce_scatter ? "true" : "false") << " and use_multi_rank_bucket_allreduce: "
            << (cfg.zero.use_multi_rank_bucket_allreduce ? "true" : "false")
            << " (the default), each flushed gradient bucket - up to reduce_bucket_size = " << cfg.zero.reduce_bucket_size
            << " elements - is cut into slices by owning rank and then all-reduced whole; each rank keeps only its own "
               "slices. Here that is "
            << per_step << " all_reduce(s) per step, the largest " << human(static_cast<double>(biggest))
            << (buckets.empty() ? "" : ": " + buckets) << ". Set use_multi_rank_bucket_allreduce: false to send one reduce per owning rank instead (each rank "
               "receives only its share), or lower reduce_bucket_size for more, smaller all_reduces that overlap with "
               "backward. Stage 3 is the stage that really reduce-scatters.\n\n";
    } else if ((meta.stage == 1 || meta.stage == 2) && by.ops.count(RuleId::Stage12FlushReducePerRank)) {
        out << "## Where is the all_reduce?\nuse_multi_rank_bucket_allreduce is false, so each gradient bucket (up to "
               "reduce_bucket_size = "
            << cfg.zero.reduce_bucket_size
            << " elements) goes out as one reduce per owning rank. The default (true) sends one all_reduce per bucket.\n\n";
    }
}

// What the table shows, said from its own figures: stage 1 reduces once per step (2Ψ all_reduce
// plus Ψ all_gather of the updated partitions: 1.5x the paper's 2Ψ); stage 2 reduces every micro
// batch's gradients, so with gradient accumulation A it sends (2A + 1)Ψ, (2A + 1) / 2 times 2Ψ.
void write_volume_sentences(std::ostream& out, int64_t accumulation, const double ratios[4]) {
    const double stage2 = (2.0 * static_cast<double>(accumulation) + 1) / 2;
    char line[700];
    std::snprintf(line, sizeof line,
                  "Stage 1 sends %.2fx the paper's 2Ψ here (1.50x expected: DeepSpeed all-reduces every gradient once "
                  "per step, 2Ψ, then all-gathers the updated partitions, Ψ, where the paper reduce-scatters). Stage 2 "
                  "sends %.2fx (%.2fx expected: it reduces the gradients of each micro batch, %lld per step here, "
                  "(2 x %lld + 1)Ψ in all). ",
                  ratios[1], ratios[2], stage2, static_cast<long long>(accumulation), static_cast<long long>(accumulation));
    out << line;
    std::snprintf(line, sizeof line,
                  "Stage 3 sends %.2fx the paper's 3Ψ on later steps: it gathers in forward and again in backward and "
                  "reduce-scatters once per micro batch; parameters reused within stage3_max_reuse_distance stay "
                  "gathered through backward, and persistent parameters are gathered once.\n",
                  ratios[3]);
    out << line;
}

// Volume per stage: the paper against DeepSpeed.
void write_volume_per_stage(std::ostream& out, const Model& model, const DsConfig& cfg, const ScheduleMeta& meta) {
    out << "## Communication volume per step and rank: the ZeRO paper against DeepSpeed " << meta.release.number() << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-7s %-12s %14s %16s %16s %8s\n", "stage", "paper", "paper bytes", "DeepSpeed step 0",
                  "later steps", "ratio");
    out << line;
    double ratios[4] = {0, 0, 0, 0};   // later steps against the paper, per stage (0: not built)
    double psi_bytes = static_cast<double>(meta.total_params) * dtype_size(meta.comm_dtype);
    double f = meta.world > 1 ? static_cast<double>(meta.world - 1) / static_cast<double>(meta.world) : 0.0;
    for (int st = 0; st <= 3; ++st) {
        DsConfig c = cfg.with_stage(st);
        ScheduleOptions o;
        o.world = meta.layout.is_3d() ? meta.layout.world : meta.world;
        o.steps = 2;
        o.gpus_per_node = meta.variants.gpus_per_node;  // qgZ's node groups
        o.layout = meta.layout;   // a 3D schedule: the same rank of the same layout
        o.rank = meta.rank;
        o.pp_partition = meta.pipe_partition;
        o.pp_partition_type = meta.pipe_partition_type;
        auto sched = build_schedule(model, c, o);
        if (!sched) continue;
        double paper = (st == 3 ? 3 : 2) * psi_bytes * f;
        const bool layout = meta.layout.is_3d();   // ZeRO's own groups against the paper
        double s0 = wire_bytes_per_rank(sched.value(), 0, layout), s1 = wire_bytes_per_rank(sched.value(), 1, layout);
        std::snprintf(line, sizeof line, "%-7d %-12s %14s %16s %16s %7.2fx\n", st, st == 3 ? "3Ψ" : "2Ψ", human(paper).c_str(),
                      human(s0).c_str(), human(s1).c_str(), paper > 0 ? s1 / paper : 0.0);
        out << line;
        ratios[st] = paper > 0 ? s1 / paper : 0.0;
    }
    write_volume_sentences(out, meta.grad_accum, ratios);
}

// What the release changes against v0.14.2, the dialect of docs/zero-comm.md.
void write_release_changes(std::ostream& out, const ScheduleMeta& meta) {
    out << "\n## DeepSpeed " << meta.release.name() << " against v0.14.2 (docs/releases.md)\n";
    for (const auto& rr : release_rules())
        if (in_releases(meta.release, rr.first, rr.last))
            out << "- " << release_span(rr) << ": " << rr.change << " [" << rr.name << "]\n";
}

}  // namespace

std::string explain_schedule(const Model& model, const DsConfig& cfg, const Schedule& s) {
    std::ostringstream out;
    const auto& meta = s.meta;
    const int last = meta.steps - 1;
    write_explain_intro(out, meta, last);
    write_recompute_note(out, s, last);
    out << explain_layout(model, cfg, s);
    // Per rule, in the order rules first appear.
    const CollectivesByRule by = collectives_by_rule(s);
    for (const auto& rule : by.order) write_rule_section(out, cfg, s, rule, by.ops.at(rule), last);
    write_step_against_paper(out, s, last);
    write_stage12_allreduce_question(out, cfg, s, by, last);
    write_volume_per_stage(out, model, cfg, meta);
    // ZeRO++ / MiCS: asked for by a variant config or by --gpus-per-node.
    if (meta.variants.any() || meta.variants.gpus_per_node > 0) out << "\n" << explain_hpz_choice(model, cfg, s);
    if (meta.release != kBaselineRelease) write_release_changes(out, meta);
    return out.str();
}

}  // namespace zerosim
