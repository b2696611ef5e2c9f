// The domain code that left zerosim's front end, tested as functions: "this config at stage k"
// (DsConfig::with_stage), the memory command's rows and rendering, zerorun's --json log reader, the
// prediction as a validator log, the tuner-choice and world checks, sweep's grid flags, and
// calibrate's table reading and topology writer.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <sstream>

#include "analysis/memory_report.hpp"
#include "core/input_file.hpp"
#include "formats/nccl_tests.hpp"
#include "formats/zerorun_log.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "prediction/prediction_log.hpp"
#include "prediction/sweep.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"
#include "validate/calibrate.hpp"

using namespace zerosim;

namespace {

DsConfig config(const std::string& zero, const std::string& extra = "") {
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 1, )" + extra + R"("zero_optimization": )" + zero + "}");
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

// with_stage(k) is the file written with "stage": k: overlap_comm's default (true for stage 3 only,
// DeepSpeed v0.14.2 zero/config.py overlap_comm_valid) follows k unless the user set it.
TEST(WithStage, SameAsTheConfigWrittenForThatStage) {
    for (const std::string overlap : {"", R"(, "overlap_comm": true)", R"(, "overlap_comm": false)"})
        for (int from = 0; from <= 3; ++from)
            for (int to = 0; to <= 3; ++to) {
                DsConfig asked = config(R"({"stage": )" + std::to_string(from) + overlap + "}").with_stage(to);
                DsConfig written = config(R"({"stage": )" + std::to_string(to) + overlap + "}");
                EXPECT_EQ(asked.zero.stage, to);
                EXPECT_EQ(asked.zero.overlap_comm, written.zero.overlap_comm) << "from " << from << " to " << to << overlap;
                EXPECT_EQ(asked.zero.overlap_comm_written, written.zero.overlap_comm_written);
            }
    EXPECT_FALSE(config(R"({"stage": 3})").with_stage(2).zero.overlap_comm);
    EXPECT_TRUE(config(R"({"stage": 1})").with_stage(3).zero.overlap_comm);
    EXPECT_TRUE(config(R"({"stage": 3, "overlap_comm": true})").with_stage(1).zero.overlap_comm);
}

Model small_model() {
    auto m = model_from_param_list_json("m.json", R"({"parameters": [{"name": "w", "shape": [1000]}]})");
    EXPECT_TRUE(m.ok());
    return m.value();
}

MemoryReport report_of(const DsConfig& c, const std::vector<int>& stages) {
    auto r = memory_report(small_model(), c, 4, stages, std::nullopt, "");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
    return r.value();
}

// The issue's case: fp16, default reduce_bucket_size (5e8 elements). A stage-3 config without
// overlap_comm asked at stage 2 reported two buckets (2 x 5e8 x 2 B = 1.86 GiB); the same config
// written for stage 2 has overlap_comm off and one bucket: 5e8 x 2 B = 1e9 B = 953.67 MiB.
TEST(WithStage, MemoryOfAStage3ConfigAskedAtStage2IsThatOfStage2) {
    const std::string fp16 = R"("fp16": {"enabled": true}, )";
    MemoryReport asked = report_of(config(R"({"stage": 3})", fp16), {2});
    MemoryReport written = report_of(config(R"({"stage": 2})", fp16), {2});
    ASSERT_EQ(asked.stages.size(), 1u);
    ASSERT_EQ(written.stages.size(), 1u);
    const MemoryEstimate &a = asked.stages[0].estimate, &w = written.stages[0].estimate;
    EXPECT_EQ(a.category("buckets"), 1000000000);
    EXPECT_EQ(a.category("buckets"), w.category("buckets"));
    EXPECT_EQ(a.total(), w.total());
    ASSERT_EQ(a.items.size(), w.items.size());
    for (size_t i = 0; i < a.items.size(); ++i) {
        EXPECT_EQ(a.items[i].name, w.items[i].name);
        EXPECT_EQ(a.items[i].bytes, w.items[i].bytes);
    }
    std::ostringstream text;
    write_memory_text(text, asked);
    EXPECT_NE(text.str().find("gradient bucket (reduce_bucket_size)"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("953.67 MiB"), std::string::npos) << text.str();
    EXPECT_EQ(text.str().find("1.86 GiB"), std::string::npos) << text.str();
}

// zerorun's own log of the tiny GPT at stage 2 on 4 ranks (tests/fixtures).
TEST(ZerorunLog, ReadsThePeaksOfTheLargestRank) {
    auto m = read_zerorun_memory(test::fixture("zerorun-tiny-zero2-memory.json"));
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ(m->stage, 2);
    EXPECT_EQ(m->world, 4);
    EXPECT_EQ(m->peak.at("parameters"), 2668544);
    EXPECT_EQ(m->peak.at("optimizer_states"), 2001408);
    EXPECT_EQ(m->peak.count("state_peak"), 0u);   // a total, not a category
    auto wrong = read_zerorun_memory(test::temp_file("not-zerorun.json", R"({"format": "zerosim-schedule"})"));
    ASSERT_FALSE(wrong.ok());
    EXPECT_NE(wrong.error().message.find("zerorun --json log"), std::string::npos);
    auto bad_peak = read_zerorun_memory(test::temp_file(
        "bad-peak.json", R"({"format": "zerorun-log", "stage": 2, "world": 2, "ranks": [{"memory": {"buckets": {"peak": "x"}}}]})"));
    ASSERT_FALSE(bad_peak.ok());
    EXPECT_EQ(bad_peak.error().field, "ranks[0].memory.buckets.peak");
}

TEST(MemoryReport, MeasuredBesidePredictedAndItsWorldChecked) {
    MeasuredMemory measured{2, 4, {{"parameters", 4000}, {"optimizer_states", 1}}};
    auto r = memory_report(small_model(), config(R"({"stage": 2})"), 4, {1, 2}, measured, "run.json");
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->stages[0].measured.empty());   // the run was stage 2
    const auto& rows = r->stages[1].measured;
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].category, "parameters");
    EXPECT_EQ(rows[0].predicted, 4000);   // 1000 fp32 parameters on every rank
    EXPECT_EQ(rows[0].measured, 4000);
    EXPECT_EQ(rows[2].category, "optimizer");
    EXPECT_EQ(rows[2].measured, 1);
    EXPECT_EQ(rows[3].measured, -1);      // buckets: not reported
    std::ostringstream text, json;
    write_memory_text(text, r.value());
    EXPECT_NE(text.str().find("measured by zerorun (run.json, peak bytes, largest rank)"), std::string::npos);
    EXPECT_NE(text.str().find("(equal)"), std::string::npos);
    EXPECT_NE(text.str().find("(not reported)"), std::string::npos);
    write_memory_json(json, r.value());
    auto j = nlohmann::json::parse(json.str());
    EXPECT_EQ(j[1]["measured"]["parameters"]["measured"], 4000);
    auto other = memory_report(small_model(), config(R"({"stage": 2})"), 8, {2}, measured, "run.json");
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.error().what(), "run.json: field 'world': the measured run had 4 ranks, --world says 8");
}

TEST(PredictionLog, OneLineOfTheValidatorPerCollective) {
    Model m = small_model();
    ScheduleOptions o;
    o.world = 4;
    o.steps = 1;
    auto s = build_schedule(m, config(R"({"stage": 1})"), o);
    ASSERT_TRUE(s.ok());
    Prediction p;
    for (size_t i = 0; i < s->ops.size(); ++i) {
        OpTiming t;
        t.start_s = 0;
        t.end_s = 0.001 * static_cast<double>(i + 1);
        p.ops.push_back(t);
    }
    MeasuredLog log = prediction_as_log(s.value(), p);
    EXPECT_EQ(log.path, "prediction");
    size_t collectives = 0;
    for (const auto& op : s->ops) collectives += is_collective(op.kind);
    ASSERT_EQ(log.ops.size(), collectives);
    ASSERT_FALSE(log.ops.empty());
    const LoggedOp& first = log.ops.front();
    const Op& op = s->ops[static_cast<size_t>(first.line)];
    EXPECT_EQ(first.record, op_record_name(op.kind));
    EXPECT_DOUBLE_EQ(first.time_ms, static_cast<double>(first.line + 1));
    EXPECT_EQ(first.size_text, ds_size_string(op.bytes()));
    EXPECT_FALSE(comms_logger_ops("no logger lines here\n", "m.log").ok());
}

Topology topology(int64_t nodes) {
    auto t = load_topology(test::config("../topologies/dgx-a100.json"), nodes);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

TEST(WorldOnTopology, DefaultsToEveryGpuAndNamesTheNodesThatFit) {
    Topology t = topology(1);
    EXPECT_EQ(world_on(t, 0).value(), 8);
    EXPECT_EQ(world_on(t, 4).value(), 4);
    auto e = world_on(t, 17);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().field, "--world");
    EXPECT_NE(e.error().message.find("world size 17 needs more GPUs than 1 nodes x 8; pass --nodes 3"), std::string::npos);
    EXPECT_FALSE(check_world_fits(topology(3), 17).has_value());
}

TEST(TunerChoice, NamesCheckedAgainstWhatTheTunerWeighs) {
    Topology t = topology(1);
    auto ring = tuner_choice_named("ring", "", t, OpKind::AllReduce, "all_reduce", 8);
    ASSERT_TRUE(ring.ok());
    EXPECT_EQ(ring->algorithm, Algorithm::Ring);
    EXPECT_FALSE(ring->protocol.has_value());
    EXPECT_EQ(tuner_choice_named("rings", "", t, OpKind::AllReduce, "all_reduce", 8).error().field, "--algo");
    EXPECT_EQ(tuner_choice_named("", "LL64", t, OpKind::AllReduce, "all_reduce", 8).error().field, "--proto");
    // The A100 has no NVLink SHARP: NCCL weighs no NVLS there.
    auto nvls = tuner_choice_named("nvls", "", t, OpKind::AllReduce, "all_reduce", 8);
    ASSERT_FALSE(nvls.ok());
    EXPECT_NE(nvls.error().message.find("NCCL has no nvls for all_reduce on 8 ranks of"), std::string::npos)
        << nvls.error().message;
}

TEST(SweepFlags, GridFlagsCheckedAndAdded) {
    SweepSpec spec;
    SweepFlags f;
    f.topologies = {"a.json,b.json", "c.json"};
    f.stages = "1,3";
    f.nodes = "1,2";
    f.shard = "1/3";
    ASSERT_FALSE(apply_sweep_flags(f, spec).has_value());
    EXPECT_EQ(spec.topologies, (std::vector<std::string>{"a.json", "b.json", "c.json"}));
    EXPECT_EQ(spec.stages, (std::vector<int>{1, 3}));
    EXPECT_EQ(spec.nodes, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(spec.shard, 1);
    EXPECT_EQ(spec.shards, 3);
    auto error_of = [](SweepFlags g) {
        SweepSpec s;
        auto e = apply_sweep_flags(g, s);
        return e ? e->what() : std::string();
    };
    SweepFlags g;
    g.stages = "4";
    EXPECT_EQ(error_of(g), "field '--stages': stage 4 is not 0..3");
    g = {};
    g.nodes = "0";
    EXPECT_EQ(error_of(g), "field '--nodes': node counts must be at least 1");
    g = {};
    g.shard = "3/3";
    EXPECT_EQ(error_of(g), "field '--shard': expected i/k with 0 <= i < k, found '3/3'");
    g = {};
    g.stages = "";
    EXPECT_EQ(error_of(g), "");   // an empty grid is refused later, as "the grid is empty"
}

// The A100 table of shared/reference (all_reduce, -g 8, out-of-place and in-place columns).
TEST(CalibrationTable, ColumnAsDeepSpeedCallsTheCollective) {
    const std::string file = test::reference("nccl-tests/a100-8gpu-allreduce.txt");
    auto in_place = read_calibration_table(file, "", "as-deepspeed", 8);
    ASSERT_TRUE(in_place.ok()) << in_place.error().what();
    ASSERT_FALSE(in_place->empty());
    const Measurement& first = in_place->front();
    EXPECT_EQ(first.op, OpKind::AllReduce);   // guessed from the file's head
    EXPECT_EQ(first.bytes, 8);
    EXPECT_DOUBLE_EQ(first.time_us, 38.85);   // DeepSpeed all-reduces in place
    auto out_of_place = read_calibration_table(file, "", "out-of-place", 8);
    EXPECT_DOUBLE_EQ(out_of_place->front().time_us, 40.12);
    EXPECT_EQ(read_calibration_table(file, "all_to_all", "in-place", 8).error().field, "--op");
}

// A bench table's head names its collective, and calibrate takes it from there before any guess:
// the A100 all_reduce table's rows under a zerorun head that says all_gather, in a file whose name
// says allreduce, are all_gather rows.
TEST(CalibrationTable, TheBenchHeadNamesTheCollective) {
    EXPECT_EQ(bench_table_collective("# nThread 1\n# zerorun bench: all_gather, backend mpi, 8 ranks, host memory\n"), "all_gather");
    EXPECT_EQ(bench_table_collective("# zerosim bench: predicted reduce_scatter (dgx-h100, 16 ranks)\n"), "reduce_scatter");
    EXPECT_EQ(bench_table_collective("#  all_reduce_perf run, see # zerorun bench: all_gather\n"), "");   // not a head line
    auto text = read_text_file(test::reference("nccl-tests/a100-8gpu-allreduce.txt"), "table");
    ASSERT_TRUE(text.ok());
    const std::string file = testing::TempDir() + "zerosim-allreduce-named-all_gather.txt";
    {
        std::ofstream out(file);
        out << "# zerorun bench: all_gather, backend mpi, 8 ranks, host memory\n" << text.value();
    }
    auto rows = read_calibration_table(file, "", "out-of-place", 8);
    ASSERT_TRUE(rows.ok()) << rows.error().what();
    ASSERT_FALSE(rows->empty());
    EXPECT_EQ(rows->front().op, OpKind::AllGather);
    std::remove(file.c_str());
}

TEST(CalibrationTable, TheCalibratedTopologyIsTheInputPlusItsBlock) {
    Calibration cal;
    cal.global.bandwidth_scale = 0.5;
    cal.global.latency_scale = 2;
    cal.global.used = 3;
    cal.per_collective["all_reduce"] = cal.global;
    Json topo = {{"name", "t"}, {"nodes", 1}};
    Json out = calibrated_topology(topo, cal, {"a.txt"}, "in-place");
    EXPECT_EQ(out["name"], "t");
    EXPECT_EQ(out["calibration"]["bandwidth_scale"], 0.5);
    EXPECT_EQ(out["calibration"]["latency_scale"], 2);
    EXPECT_EQ(out["calibration"]["per_collective"]["all_reduce"]["rows"], 3);
    EXPECT_EQ(out["calibration"]["fitted_from"], Json::array({"a.txt"}));
    EXPECT_EQ(out["calibration"]["column"], "in-place");
    std::ostringstream summary;
    write_calibration_summary(summary, cal);
    EXPECT_EQ(summary.str().substr(0, 32), "zerosim calibrate: 3 rows fitted");
}

}  // namespace
