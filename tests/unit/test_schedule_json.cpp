// The schedule JSON is the whole in-memory IR (issue 27, part 3): every field of ScheduleMeta, Op,
// HostEvent, ScheduleParam, ProcessGroup and PartitionLayout comes back from the file, a write of
// what was read is the same bytes, and bad input is refused with the file and the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/schedule_json.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

const std::string kVariants = "deepspeed-v0.14.2-cpu-variants/";

struct Built {
    Schedule schedule;
    ScheduleSources sources;
};

// A reference run's schedule as `zerosim schedule --world 4 --gpus-per-node 4` builds it.
Built build_run(const std::string& run, bool zero_init = false) {
    const std::string cfg_path = test::reference(kVariants + run + "/ds_config.json");
    const std::string model_path = test::reference(kVariants + "model.json");
    auto cfg = load_ds_config(cfg_path);
    auto model = load_model(model_path);
    EXPECT_TRUE(cfg.ok() && model.ok());
    ScheduleOptions o;
    o.world = 4;
    o.steps = 2;
    o.gpus_per_node = 4;
    o.zero_init = zero_init;
    auto s = build_schedule(model.value(), cfg.value(), o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return {s.value(), {nlohmann::ordered_json::parse(test::read_file(cfg_path)),
                        nlohmann::ordered_json::parse(test::read_file(model_path))}};
}

std::string json_of(const Schedule& s, const ScheduleSources* src = nullptr) {
    std::ostringstream out;
    write_schedule_json(out, s, src);
    return out.str();
}

// Every field of the IR, compared one by one (the structs have no operator==).
void expect_same_ir(const Schedule& a, const Schedule& b) {
    const ScheduleMeta &m = a.meta, &n = b.meta;
    EXPECT_EQ(m.release, n.release);
    EXPECT_EQ(m.dialect, n.dialect);
    EXPECT_EQ(m.model_name, n.model_name);
    EXPECT_EQ(m.model_file, n.model_file);
    EXPECT_EQ(m.ds_config_file, n.ds_config_file);
    EXPECT_EQ(std::tie(m.world, m.stage, m.steps, m.micro_batch, m.grad_accum, m.seq_len, m.total_params, m.num_groups),
              std::tie(n.world, n.stage, n.steps, n.micro_batch, n.grad_accum, n.seq_len, n.total_params, n.num_groups));
    EXPECT_EQ(m.model_dtype, n.model_dtype);
    EXPECT_EQ(m.comm_dtype, n.comm_dtype);
    EXPECT_EQ(m.overflow_steps, n.overflow_steps);
    EXPECT_EQ(m.round_robin_gradients, n.round_robin_gradients);
    EXPECT_EQ(m.partition.kind, n.partition.kind);
    ASSERT_EQ(m.partition.groups.size(), n.partition.groups.size());
    for (size_t g = 0; g < m.partition.groups.size(); ++g) {
        EXPECT_EQ(m.partition.groups[g].order, n.partition.groups[g].order);
        EXPECT_EQ(m.partition.groups[g].offsets, n.partition.groups[g].offsets);
        EXPECT_EQ(m.partition.groups[g].partition_size, n.partition.groups[g].partition_size);
    }
    EXPECT_EQ(m.stage3_peak_gathered_elements, n.stage3_peak_gathered_elements);
    EXPECT_EQ(m.stage3_persistent_elements, n.stage3_persistent_elements);
    EXPECT_EQ(std::tie(m.zero_init, m.offload_optimizer, m.offload_param),
              std::tie(n.zero_init, n.offload_optimizer, n.offload_param));
    EXPECT_EQ(std::tie(m.variants.hpz, m.variants.qwz, m.variants.qgz, m.variants.mics, m.variants.gpus_per_node),
              std::tie(n.variants.hpz, n.variants.qwz, n.variants.qgz, n.variants.mics, n.variants.gpus_per_node));
    ASSERT_EQ(m.groups.size(), n.groups.size());
    for (size_t g = 0; g < m.groups.size(); ++g) {
        EXPECT_EQ(m.groups[g].kind, n.groups[g].kind);
        EXPECT_EQ(m.groups[g].members, n.groups[g].members);
    }
    ASSERT_EQ(a.params.size(), b.params.size());
    for (size_t i = 0; i < a.params.size(); ++i)
        EXPECT_EQ(std::tie(a.params[i].name, a.params[i].shape, a.params[i].numel, a.params[i].group),
                  std::tie(b.params[i].name, b.params[i].shape, b.params[i].numel, b.params[i].group));
}

void expect_same_ops(const Schedule& a, const Schedule& b) {
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) {
        const Op &x = a.ops[i], &y = b.ops[i];
        SCOPED_TRACE("op " + std::to_string(i));
        EXPECT_EQ(std::tie(x.id, x.kind, x.step, x.micro, x.phase, x.stream, x.rule, x.caller, x.payload),
                  std::tie(y.id, y.kind, y.step, y.micro, y.phase, y.stream, y.rule, y.caller, y.payload));
        EXPECT_EQ(std::tie(x.elements, x.dtype, x.redop, x.root, x.logged, x.group, x.bucket, x.param_group),
                  std::tie(y.elements, y.dtype, y.redop, y.root, y.logged, y.group, y.bucket, y.param_group));
        EXPECT_EQ(std::tie(x.compute, x.module, x.module_name, x.flops, x.mem_bytes, x.params, x.deps),
                  std::tie(y.compute, y.module, y.module_name, y.flops, y.mem_bytes, y.params, y.deps));
        ASSERT_EQ(x.segments.size(), y.segments.size());
        for (size_t k = 0; k < x.segments.size(); ++k)
            EXPECT_EQ(std::tie(x.segments[k].param, x.segments[k].offset, x.segments[k].numel),
                      std::tie(y.segments[k].param, y.segments[k].offset, y.segments[k].numel));
    }
    ASSERT_EQ(a.host.size(), b.host.size());
    for (size_t i = 0; i < a.host.size(); ++i) {
        const HostEvent &x = a.host[i], &y = b.host[i];
        EXPECT_EQ(std::tie(x.kind, x.step, x.micro, x.module, x.first_op, x.waits, x.fetch_events, x.released_elements),
                  std::tie(y.kind, y.step, y.micro, y.module, y.first_op, y.waits, y.fetch_events, y.released_elements))
            << "host event " << i;
    }
}

// Write, read, write: the same bytes, and the IR read back is the IR written, field by field.
TEST(ScheduleJson, RoundTripIsWholeAndByteIdentical) {
    for (const char* run : {"hpz2_r0p0_w4", "mics2_w4", "qgz_l2_w4", "qwz_w4", "z3_offload_opt_w4", "z3_zeroinit_w4"}) {
        SCOPED_TRACE(run);
        Built b = build_run(run, std::string(run) == "z3_zeroinit_w4");
        const std::string first = json_of(b.schedule, &b.sources);
        auto back = parse_saved_schedule(first, run);
        ASSERT_TRUE(back.ok()) << back.error().what();
        ASSERT_TRUE(back->sources.has_value());
        expect_same_ir(b.schedule, back->schedule);
        expect_same_ops(b.schedule, back->schedule);
        EXPECT_EQ(json_of(back->schedule, &*back->sources), first);
    }
}

// What version 1 left out is in the file, by the values the configs give: offload_optimizer.device
// "cpu" in z3_offload_opt_w4, the model built under zero.Init for z3_zeroinit_w4, and stage 3's host
// events; the release is "release", not "dialect".
TEST(ScheduleJson, CarriesOffloadZeroInitHostEventsAndRelease) {
    Built offload = build_run("z3_offload_opt_w4");
    auto j = nlohmann::ordered_json::parse(json_of(offload.schedule));
    EXPECT_EQ(j["version"], 2);
    EXPECT_EQ(j["meta"]["release"], "0.14.2");
    EXPECT_FALSE(j["meta"].contains("dialect"));
    EXPECT_EQ(j["meta"]["offload_optimizer"], true);
    EXPECT_EQ(j["meta"]["offload_param"], false);
    EXPECT_EQ(j["meta"]["zero_init"], false);
    EXPECT_FALSE(j.contains("inputs"));   // none given to the writer
    ASSERT_TRUE(j["host"].is_array());
    EXPECT_FALSE(j["host"].empty());
    EXPECT_EQ(j["host"][0]["kind"], "pre_forward");   // the first forward module's fetch comes first
    Built zi = build_run("z3_zeroinit_w4", true);
    auto k = nlohmann::ordered_json::parse(json_of(zi.schedule));
    EXPECT_EQ(k["meta"]["zero_init"], true);
    EXPECT_EQ(k["meta"]["offload_optimizer"], false);
    EXPECT_GT(k["meta"]["stage3_peak_gathered_elements"].get<int64_t>(), 0);
}

std::string edited(const std::string& text, const std::function<void(nlohmann::ordered_json&)>& edit) {
    auto j = nlohmann::ordered_json::parse(text);
    edit(j);
    return j.dump(1);
}

std::string error_of(const std::string& text) {
    auto r = parse_saved_schedule(text, "s.json");
    return r.ok() ? "accepted" : r.error().what();
}

TEST(ScheduleJson, BadFieldsAreRefusedWithFileAndField) {
    Built b = build_run("hpz2_r0p0_w4");
    const std::string text = json_of(b.schedule);
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["ops"][0]["rule"] = "stage3.fetchh"; })),
              "s.json: field 'ops[0].rule': unknown rule \"stage3.fetchh\" (did you mean \"stage3.fetch\"?); expected a "
              "rule of docs/zero-comm.md");
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["ops"][2]["id"] = 7; })),
              "s.json: field 'ops[2].id': expected 2: ops are listed in id order from 0");
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["ops"][0]["bytes"] = 1; })).rfind("s.json: field 'ops[0].bytes': expected elements x", 0), 0u);
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["host"][0]["kind"] = "prefetch"; })),
              "s.json: field 'host[0].kind': unknown value \"prefetch\"; expected one of \"pre_forward\", \"pre_backward\", "
              "\"fetch_wait\", \"post_forward\", \"post_backward\", \"release_all\", \"gradient_flush\", \"reduce_sync\"");
    const size_t ops = b.schedule.ops.size();
    EXPECT_EQ(error_of(edited(text, [&](auto& j) { j["host"][0]["first_op"] = ops + 1; })),
              "s.json: field 'host[0].first_op': expected a whole number from 0 to " + std::to_string(ops) + ", found " +
                  std::to_string(ops + 1));
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["meta"]["zero_init"] = "yes"; })),
              "s.json: field 'meta.zero_init': expected true or false, found a string \"yes\"");
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["meta"].erase("release"); })),
              "s.json: field 'meta': expected \"release\" (the DeepSpeed release whose rules built the schedule)");
}

// A version 1 file names the release by its dialect; one that gives both must give the same.
TEST(ScheduleJson, ReadsVersionOneDialect) {
    Built b = build_run("qwz_w4");
    const std::string text = json_of(b.schedule);
    auto v1 = parse_saved_schedule(edited(text, [](auto& j) {
                                       j["version"] = 1;
                                       j["meta"].erase("release");
                                       j["meta"]["dialect"] = "deepspeed-0.16.2";
                                   }),
                                   "v1.json");
    ASSERT_TRUE(v1.ok()) << v1.error().what();
    EXPECT_EQ(v1->schedule.meta.release.number(), "0.16.2");
    EXPECT_EQ(v1->schedule.meta.dialect, "deepspeed-0.16.2");
    EXPECT_EQ(error_of(edited(text, [](auto& j) { j["meta"]["dialect"] = "deepspeed-0.16.2"; })),
              "s.json: field 'meta.dialect': names release 0.16.2, meta.release 0.14.2: give one");
}

// predict --schedule reads the config and the model from the file; without them, or with ones the
// schedule was not built from, it says so.
TEST(ScheduleJson, SavedInputsAreTheSourcesOrRefused) {
    Built b = build_run("z3_offload_opt_w4");
    auto bare = parse_saved_schedule(json_of(b.schedule), "s.json");
    ASSERT_TRUE(bare.ok());
    auto refused = saved_schedule_inputs(bare.value(), "s.json");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().what().rfind("s.json: field 'inputs': required field is missing: predict, report and "
                                           "explain read the DeepSpeed config",
                                           0),
              0u);
    auto full = parse_saved_schedule(json_of(b.schedule, &b.sources), "s.json");
    ASSERT_TRUE(full.ok());
    auto in = saved_schedule_inputs(full.value(), "s.json");
    ASSERT_TRUE(in.ok()) << in.error().what();
    EXPECT_TRUE(in->cfg.zero.offload_optimizer);
    EXPECT_EQ(in->cfg.zero.stage, 3);
    EXPECT_EQ(in->model.params.size(), b.schedule.params.size());
    EXPECT_EQ(in->cfg.source, b.schedule.meta.ds_config_file);
    ScheduleSources swapped = b.sources;
    swapped.ds_config["zero_optimization"]["stage"] = 2;
    auto other = parse_saved_schedule(json_of(b.schedule, &swapped), "s.json");
    ASSERT_TRUE(other.ok());
    auto mismatch = saved_schedule_inputs(other.value(), "s.json");
    ASSERT_FALSE(mismatch.ok());
    EXPECT_EQ(mismatch.error().what(), "s.json: field 'inputs.ds_config.zero_optimization.stage': is 2, the schedule's "
                                       "meta.stage 3: the config is not the one the schedule was built from");
}

}  // namespace
}  // namespace zerosim
