// Issue 33, the second hostile battery: each class's rule, at the one place it lives. Expected
// values come from the inputs written here (a row whose #wrong is 3, a key given twice, "010"
// read as ten) and from DeepSpeed's own source where it decides (cited beside each test).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <string>

#include "core/cli_integers.hpp"
#include "core/json_input.hpp"
#include "formats/measured_logs.hpp"
#include "formats/nccl_tests.hpp"
#include "inputs/ds_config.hpp"
#include "prediction/sweep.hpp"
#include "schedule/check.hpp"
#include "schedule/schedule.hpp"
#include "inputs/model.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

const char* kHeader =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
const char* kRowGood = "        1024           256     float     sum      -1    42.05    0.02    0.04      0    39.65    0.03    0.05      0\n";
const char* kRowWrong = "        2048           512     float     sum      -1    38.39    0.05    0.09      3    39.41    0.05    0.09      0\n";

std::string what(const Status& s) { return s ? s->what() : ""; }

}  // namespace

// --- Verdicts on wrong data ----------------------------------------------------------------------

TEST(HostileBattery2, NcclTestsRowWithWrongResultsIsRefusedNamingItsLine) {
    const std::string text = std::string("# all_reduce_perf\n") + kHeader + kRowGood + kRowWrong;   // the bad row is line 5
    auto tables = parse_nccl_tests(text, "t.txt");
    ASSERT_TRUE(tables.ok());
    const std::string e = what(nccl_tests_checks_passed(tables.value(), "t.txt"));
    EXPECT_NE(e.find("t.txt:5"), std::string::npos) << e;
    EXPECT_NE(e.find("#wrong is 3"), std::string::npos) << e;
    // validate and calibrate read tables through parse_log: the same refusal.
    auto log = parse_log(text, "t.txt");
    ASSERT_FALSE(log.ok());
    EXPECT_NE(log.error().what().find("t.txt:5"), std::string::npos) << log.error().what();
}

TEST(HostileBattery2, NcclTestsFailedFooterIsRefusedNamingItsLine) {
    const std::string text = std::string(kHeader) + kRowGood + "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 0.04 \n";
    auto log = parse_log(text, "f.txt");
    ASSERT_FALSE(log.ok());
    EXPECT_NE(log.error().what().find("f.txt:4"), std::string::npos) << log.error().what();
    EXPECT_NE(log.error().what().find("FAILED"), std::string::npos);
    // The same table with nccl-tests' "0 OK" footer reads.
    const std::string ok = std::string(kHeader) + kRowGood + "# Out of bounds values : 0 OK\n";
    EXPECT_TRUE(parse_log(ok, "ok.txt").ok());
}

TEST(HostileBattery2, OlderErrorColumnIsNoCountOfWrongValues) {
    // Before #wrong, nccl-tests printed the largest error of the row ("1e+00" is a float, not a
    // count): such a table is read, as before.
    const std::string text =
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "        1024           256     float     sum    42.05    0.02    0.04  1e+00    39.65    0.03    0.05  1e+00\n";
    auto tables = parse_nccl_tests(text, "old.txt");
    ASSERT_TRUE(tables.ok());
    EXPECT_FALSE(nccl_tests_checks_passed(tables.value(), "old.txt"));
}

namespace {

std::string zerorun_log(const std::string& rank1_op, int64_t wrong, int64_t rank1 = 1) {
    return R"({"format": "zerorun-log", "version": 1, "world": 2, "stage": 1, "wrong": )" + std::to_string(wrong) +
           R"(, "ops": [{"id": 0, "kind": "all_reduce", "bytes": 1024, "time_ms": 0.5, "step": 0, "micro": 0, "phase": "backward"}],
         "ranks": [{"rank": 0, "wrong": 0, "ops": [{"start_us": 0, "end_us": 500, "wrong": 0}]},
                   {"rank": )" + std::to_string(rank1) + R"(, "wrong": 0, "ops": [)" + rank1_op + "]}]}";
}

}  // namespace

TEST(HostileBattery2, ZerorunLogWhoseCheckFailedIsRefused) {
    EXPECT_TRUE(parse_log(zerorun_log(R"({"start_us": 0, "end_us": 500, "wrong": 0})", 0), "ok.json").ok());
    auto bad = parse_log(zerorun_log(R"({"start_us": 0, "end_us": 500, "wrong": 7})", 7), "bad.json");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().field, "ranks[1].ops[0].wrong");
    // The total alone (a log whose per-op records were dropped) is enough.
    auto total = parse_log(zerorun_log(R"({"start_us": 0, "end_us": 500})", 2), "t.json");
    ASSERT_FALSE(total.ok());
    EXPECT_EQ(total.error().field, "wrong");
}

TEST(HostileBattery2, OpEndingBeforeItStartsAndRankOutsideTheWorldAreRefused) {
    auto backwards = parse_log(zerorun_log(R"({"start_us": 900, "end_us": 500, "wrong": 0})", 0), "b.json");
    ASSERT_FALSE(backwards.ok());
    EXPECT_EQ(backwards.error().field, "ranks[1].ops[0].end_us");
    auto outside = parse_log(zerorun_log(R"({"start_us": 0, "end_us": 500, "wrong": 0})", 0, 5), "o.json");
    ASSERT_FALSE(outside.ok());
    EXPECT_EQ(outside.error().field, "ranks[1].rank");
    EXPECT_NE(outside.error().message.find("world of 2"), std::string::npos);
}

// --- Numbers -------------------------------------------------------------------------------------

TEST(HostileBattery2, IntegerFlagsAreDecimal) {
    EXPECT_EQ(decimal_integer_text("010"), "10");
    EXPECT_EQ(decimal_integer_text("09"), "9");
    EXPECT_EQ(decimal_integer_text("-007"), "-7");
    EXPECT_EQ(decimal_integer_text("000"), "0");
    EXPECT_EQ(decimal_integer_text("+5"), "5");
    EXPECT_EQ(decimal_integer_text("0x10"), "");
    EXPECT_EQ(decimal_integer_text(""), "");
    // Through CLI11, on a subcommand's int and int64 options (CLI11 alone reads "010" as 8).
    CLI::App app;
    auto* sub = app.add_subcommand("predict");
    int world = 0;
    int64_t steps = 0;
    sub->add_option("--world", world);
    sub->add_option("--steps", steps);
    decimal_integer_options(app);
    app.parse(std::vector<std::string>{"09", "--steps", "010", "--world", "predict"});   // CLI11 takes them reversed
    EXPECT_EQ(world, 10);
    EXPECT_EQ(steps, 9);
    CLI::App hex;
    int n = 0;
    hex.add_option("--n", n);
    decimal_integer_options(hex);
    EXPECT_THROW(hex.parse(std::vector<std::string>{"0x10", "--n"}), CLI::ValidationError);
}

namespace {

std::string topology_with(const std::string& gpu_extra, const std::string& nic_bandwidth = "25") {
    return R"({"name": "t", "nodes": 2, "gpus_per_node": 8,
      "gpu": {"name": "A100", "peak_tflops": {"bf16": 312}, "memory_bandwidth_gbs": 2039)" + gpu_extra + R"(},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 300},
      "nics": {"per_node": 8, "bandwidth_gbs": )" + nic_bandwidth + R"(, "latency_us": 4},
      "network": {"kind": "fat_tree"}})";
}

}  // namespace

TEST(HostileBattery2, TopologyFiguresStayInRangesRealDevicesHave) {
    ASSERT_TRUE(parse_topology("t.json", topology_with("")).ok()) << parse_topology("t.json", topology_with("")).error().what();
    auto fast = parse_topology("t.json", topology_with(R"(, "compute_efficiency": 1.5)"));
    ASSERT_FALSE(fast.ok());
    EXPECT_EQ(fast.error().field, "gpu.compute_efficiency");
    auto huge = parse_topology("t.json", topology_with("", "1e308"));   // SimGrid aborted on it
    ASSERT_FALSE(huge.ok());
    EXPECT_EQ(huge.error().field, "nics.bandwidth_gbs");
    EXPECT_NE(huge.error().message.find("(0, 100000]"), std::string::npos) << huge.error().message;
    auto slow = parse_topology("t.json", topology_with(R"(, "launch_overhead_us": 1e9)"));
    ASSERT_FALSE(slow.ok());
    EXPECT_EQ(slow.error().field, "gpu.launch_overhead_us");
}

TEST(HostileBattery2, SweepSetOfOneKeyTwiceOrOfTheStageIsRefused) {
    SweepSpec spec;
    SweepFlags twice;
    twice.sets = {"zero_optimization.reduce_bucket_size=5e7", "zero_optimization.reduce_bucket_size=5e8"};
    auto e = apply_sweep_flags(twice, spec);
    ASSERT_TRUE(e);
    EXPECT_NE(e->message.find("given twice"), std::string::npos) << e->message;
    SweepSpec spec2;
    SweepFlags stage;
    stage.sets = {"zero_optimization.stage=3"};
    auto s = apply_sweep_flags(stage, spec2);
    ASSERT_TRUE(s);
    EXPECT_NE(s->message.find("--stages 3"), std::string::npos) << s->message;
}

TEST(HostileBattery2, SweepValueTheConfigRefusesIsRefusedBeforeAnyPoint) {
    SweepSpec spec;
    SweepFlags f;
    f.stages = "1,2";
    f.sets = {"zero_optimization.reduce_bucket_size=5e8,lots"};
    ASSERT_FALSE(apply_sweep_flags(f, spec));
    SweepInputs in;
    auto e = check_sweep_values(spec, in);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->field, "--set");
    EXPECT_NE(e->message.find("zero_optimization.reduce_bucket_size=lots"), std::string::npos) << e->message;
}

// --- Configs read like DeepSpeed ---------------------------------------------------------------

TEST(HostileBattery2, HjsonCommentsAndTrailingCommasAreRead) {
    const std::string text = "{\n  # hjson comment\n  \"a\": 1, // another\n  /* block\n comment */ \"b\": [1, 2,],\n  \"c\": \"x # not a comment\",\n}\n";
    auto doc = parse_hjson_text(text, "c.json");
    ASSERT_TRUE(doc.ok()) << doc.error().what();
    EXPECT_EQ(doc.value()["a"], 1);
    EXPECT_EQ(doc.value()["b"].size(), 2u);
    EXPECT_EQ(doc.value()["c"], "x # not a comment");
    // Strict JSON readers (topologies, logs) are unchanged: a comment is malformed there.
    EXPECT_FALSE(parse_json_text(text, "c.json").ok());
}

TEST(HostileBattery2, DuplicateKeyIsRefusedAsDeepSpeedsLoaderDoes) {
    // runtime/config_utils.py dict_raise_error_on_duplicate_keys, per object.
    const std::string text = "{\n \"zero_optimization\": {\"stage\": 2,\n  \"stage\": 3},\n \"x\": {\"stage\": 1}\n}\n";
    auto doc = parse_hjson_text(text, "d.json");
    ASSERT_FALSE(doc.ok());
    EXPECT_NE(doc.error().message.find("line 3: key \"stage\" given twice"), std::string::npos) << doc.error().message;
    EXPECT_NE(doc.error().message.find("first on line 2"), std::string::npos);
    auto cfg = parse_ds_config("d.json", text);
    EXPECT_FALSE(cfg.ok());
    // The same key in two objects is no duplicate.
    EXPECT_TRUE(parse_hjson_text("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}}", "ok.json").ok());
}

TEST(HostileBattery2, ManyKeysParseInOrderAndTheLastOfARepeatWins) {
    // 100k keys: Json::parse on ordered_json was quadratic (27 s); the builder appends.
    std::string text = "{";
    for (int i = 0; i < 100000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    text += ",\"k5\":-1}";
    auto doc = parse_json_text(text, "big.json");
    ASSERT_TRUE(doc.ok());
    ASSERT_EQ(doc.value().size(), 100000u);
    EXPECT_EQ(doc.value().begin().key(), "k0");
    EXPECT_EQ(doc.value()["k99999"], 99999);
    EXPECT_EQ(doc.value()["k5"], -1);
}

TEST(HostileBattery2, DeprecatedZeroFlagIsStageOne) {
    // runtime/zero/config.py read_zero_config_deprecated: stage 1 if true, 0 if false;
    // allgather_bucket_size from the top-level allgather_size.
    auto on = parse_ds_config("z.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": true, "allgather_size": 1000})");
    ASSERT_TRUE(on.ok()) << on.error().what();
    EXPECT_EQ(on->zero.stage, 1);
    EXPECT_EQ(on->zero.allgather_bucket_size, 1000);
    EXPECT_TRUE(on->ignored_keys.empty());
    auto off = parse_ds_config("z.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": false})");
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->zero.stage, 0);
}

TEST(HostileBattery2, OptimizersDeepSpeedCannotBuildAndOneBitOnesAreRefusedByName) {
    auto with = [](const std::string& type) {
        return parse_ds_config("o.json", R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": ")" + type + "\"}}");
    };
    EXPECT_TRUE(with("AdamW").ok());
    EXPECT_TRUE(with("adam").ok());
    EXPECT_TRUE(with("Lion").ok());   // DEEPSPEED_OPTIMIZERS compares in lower case
    EXPECT_TRUE(with("SGD").ok());    // torch.optim.SGD
    auto made_up = with("SuperAdam");
    ASSERT_FALSE(made_up.ok());
    EXPECT_EQ(made_up.error().field, "optimizer.type");
    auto sgd_lower = with("sgd");     // getattr(torch.optim, "sgd") is None
    EXPECT_FALSE(sgd_lower.ok());
    for (const char* one_bit : {"OneBitAdam", "OneBitLamb", "ZeroOneAdam"}) {
        auto r = with(one_bit);
        ASSERT_FALSE(r.ok()) << one_bit;
        EXPECT_NE(r.error().message.find("1-bit"), std::string::npos) << r.error().message;
    }
}

TEST(HostileBattery2, CommsLoggerIsPydanticStrict) {
    auto with = [](const std::string& section) {
        return parse_ds_config("c.json", R"({"train_micro_batch_size_per_gpu": 1, "comms_logger": )" + section + "}");
    };
    EXPECT_TRUE(with(R"({"enabled": true, "verbose": "yes", "prof_ops": ["all_reduce"]})").ok());   // pydantic v1 reads "yes"
    auto two = with(R"({"enabled": 2})");
    ASSERT_FALSE(two.ok());
    EXPECT_EQ(two.error().field, "comms_logger.enabled");
    auto extra = with(R"({"enabled": true, "verbosity": 1})");
    ASSERT_FALSE(extra.ok());
    EXPECT_EQ(extra.error().field, "comms_logger.verbosity");
}

TEST(HostileBattery2, HiddenSizeNullIsRefusedNamingTheKey) {
    auto m = model_from_hf_config_json("config.json", R"({"model_type": "llama", "hidden_size": null, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 100})");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().field, "hidden_size");
}

// --- zerorun's schedule -------------------------------------------------------------------------

TEST(HostileBattery2, ScheduleWhoseStageDisagreesWithItsOpsIsRefused) {
    auto m = model_from_param_list_json("m.json", R"({"parameters": [{"name": "w", "shape": [64]}]})");
    ASSERT_TRUE(m.ok());
    auto c = parse_ds_config("ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})");
    ASSERT_TRUE(c.ok());
    ScheduleOptions o;
    o.world = 2;
    o.steps = 1;
    auto s = build_schedule(m.value(), c.value(), o);
    ASSERT_TRUE(s.ok());
    EXPECT_FALSE(check_schedule(s.value(), "s.json"));
    Schedule edited = s.value();
    edited.meta.stage = 2;
    auto e = check_schedule(edited, "s.json");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->field, "meta.stage");
    EXPECT_NE(e->message.find("stage-3 op"), std::string::npos) << e->message;
}

// --- Unclear ------------------------------------------------------------------------------------

TEST(HostileBattery2, DecimalCommaTimeIsRefusedNotReadAsItsWholePart) {
    const std::string line =
        "[2026-11-30 02:16:34,780] [INFO] [logging.py:96:log_dist] [Rank 0] comm op: broadcast | [Caller Func: _broadcast_model] | "
        "time (ms): 4,19 | msg size: 512.0 KB | algbw (Gbps): 1.00 | busbw (Gbps): 1.00\n";
    auto log = parse_log(line, "c.log");
    ASSERT_FALSE(log.ok());
    EXPECT_NE(log.error().what().find("c.log:1"), std::string::npos) << log.error().what();
    EXPECT_NE(log.error().message.find("'4,19' has a decimal comma"), std::string::npos) << log.error().message;
}

TEST(HostileBattery2, LauncherTagNamesTheRankOfALineThatNamesNone) {
    // OpenMPI's --tag-output "[job,rank]<stdout>:" on two ranks' lines without DeepSpeed's
    // "[Rank N]": the log holds ranks 0 and 1, so validate splits it instead of counting extra ops.
    const std::string op = "comm op: all_reduce | [Caller Func: allreduce_bucket] | time (ms): 1.00 | msg size: 4.0 KB | "
                           "algbw (Gbps): 1.00 | busbw (Gbps): 1.00\n";
    auto log = parse_log("[1,0]<stdout>:" + op + "[1,1]<stdout>:" + op, "tagged.log");
    ASSERT_TRUE(log.ok()) << log.error().what();
    EXPECT_EQ(log->ranks, (std::vector<int64_t>{0, 1}));
    auto srun = parse_log("0: " + op + "1: " + op, "srun.log");
    ASSERT_TRUE(srun.ok());
    EXPECT_EQ(srun->ranks, (std::vector<int64_t>{0, 1}));
}
