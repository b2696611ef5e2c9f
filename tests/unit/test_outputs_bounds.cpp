// Outputs written or refused (core/output.hpp), read_text_file naming what it was given, the flag
// grammar (core/sizes.hpp), and the schedule's size bound (schedule/bounds.hpp) against hand counts
// and against the schedules the generators build.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/json_input.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/bounds.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

namespace fs = std::filesystem;

using test::stderr_of;

std::string fresh_dir(const std::string& name) {
    fs::path d = fs::path(::testing::TempDir()) / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

// Files left in `dir` other than `keep`: a temporary that outlived its write.
std::vector<std::string> leftovers(const std::string& dir, const std::string& keep) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    return out;
}

// Each writer's whole file: one byte repeated, long enough to take several write(2) calls.
std::string payload(char c) { return std::string(200000, c) + "\n"; }

TEST(OutputWriter, TwoThreadsWritingOnePathAlwaysLeaveOneCompleteFile) {
    std::string dir = fresh_dir("writer-threads");
    std::string out = dir + "/same.txt";
    std::atomic<int> failures{0};
    auto writer = [&](char c) {
        for (int i = 0; i < 60; ++i)
            if (write_output("zerosim", out, "-o", {}, [&](std::ostream& o) { o << payload(c); }) != 0) ++failures;
    };
    std::thread a(writer, 'a'), b(writer, 'b');
    a.join();
    b.join();
    EXPECT_EQ(failures.load(), 0);
    std::string got = test::read_file(out);
    EXPECT_TRUE(got == payload('a') || got == payload('b'));
    EXPECT_TRUE(leftovers(dir, "same.txt").empty());
}

TEST(OutputWriter, TwoProcessesWritingOnePathNeverCollide) {
    // The issue's case: two processes on one -o shared PATH.tmp-zerosim and one failed with
    // "cannot write: Success" now and then. Each child exits with its failures counted.
    std::string dir = fresh_dir("writer-processes");
    std::string out = dir + "/same.txt";
    std::vector<pid_t> kids;
    for (char c : {'x', 'y'}) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            int bad = 0;
            for (int i = 0; i < 60; ++i)
                bad += write_output("zerosim", out, "-o", {}, [&](std::ostream& o) { o << payload(c); }) != 0;
            _exit(bad);
        }
        kids.push_back(pid);
    }
    for (pid_t pid : kids) {
        int status = 0;
        waitpid(pid, &status, 0);
        ASSERT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 0);
    }
    std::string got = test::read_file(out);
    EXPECT_TRUE(got == payload('x') || got == payload('y'));
    EXPECT_TRUE(leftovers(dir, "same.txt").empty());
}

TEST(OutputWriter, FullDeviceIsAFaultAndDevNullIsWrittenInPlace) {
    int code = 0;
    std::string err = stderr_of([&] { code = write_output("zerosim", "/dev/full", "-o", {}, [](std::ostream& o) { o << "x\n"; }); });
    EXPECT_EQ(code, kExitRuntimeFault);
    EXPECT_EQ(err, "zerosim: error: /dev/full: field '-o': cannot write: No space left on device\n");
    // /dev/null stays the device: a temporary renamed over it (what the writer did before) would
    // replace it with a regular file for every process on the machine.
    struct stat st {};
    ASSERT_EQ(stat("/dev/null", &st), 0);
    if (!S_ISCHR(st.st_mode)) GTEST_SKIP() << "/dev/null is not a device on this machine (something replaced it)";
    EXPECT_EQ(write_output("zerosim", "/dev/null", "-o", {}, [](std::ostream& o) { o << "x\n"; }), 0);
    ASSERT_EQ(stat("/dev/null", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputWriter, AnInputThroughASymlinkOrAHardLinkIsRefused) {
    std::string dir = fresh_dir("writer-identity");
    std::string input = dir + "/ds.json";
    test::temp_file("writer-identity/ds.json", "{}");
    fs::create_symlink(input, dir + "/link.json");
    fs::create_hard_link(input, dir + "/hard.json");
    for (const std::string& out : {dir + "/link.json", dir + "/hard.json", dir + "/./ds.json"}) {
        int code = 0;
        std::string err = stderr_of([&] { code = write_output("zerorun", out, "--json", {input}, [](std::ostream& o) { o << "x"; }); });
        EXPECT_EQ(code, kExitBadInput) << out;
        EXPECT_EQ(err, "zerorun: error: " + out + ": field '--json': is one of the inputs; zerorun never overwrites what it was given\n");
    }
    EXPECT_EQ(test::read_file(input), "{}");
}

TEST(OutputWriter, ADirectoryIsNamedAsSuch) {
    std::string dir = fresh_dir("writer-dir");
    int code = 0;
    std::string err = stderr_of([&] { code = write_output("zerosim", dir, "-o", {}, [](std::ostream& o) { o << "x"; }); });
    EXPECT_EQ(code, kExitBadInput);
    EXPECT_EQ(err, "zerosim: error: " + dir + ": field '-o': is a directory; give a file name to write\n");
    auto e = check_writable(dir, "--plot");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->message, "is a directory; give a file name to write");
}

TEST(OutputWriter, AWriterThatThrowsLeavesNoTemporary) {
    std::string dir = fresh_dir("writer-throws");
    EXPECT_THROW(write_output("zerosim", dir + "/out.txt", "-o", {},
                              [](std::ostream& o) {
                                  o << "half";
                                  throw std::bad_alloc();
                              }),
                 std::bad_alloc);
    EXPECT_TRUE(leftovers(dir, "").empty());
}

TEST(ReadTextFile, DirectoryAndFifoNamedAsSuch) {
    std::string dir = fresh_dir("read-kinds");
    auto d = read_text_file(dir, "DeepSpeed config");
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().what(), dir + ": is a directory, not a DeepSpeed config");
    std::string fifo = dir + "/pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    auto f = read_text_file(fifo, "log");   // must not block waiting for a writer
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().what(), fifo + ": is a FIFO, not a regular file; give the log as a file");
    auto missing = read_text_file(dir + "/none.json", "model file");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, "cannot open model file for reading");
}

TEST(FlagGrammar, IntegersRealsAndCli11Errors) {
    EXPECT_EQ(parse_int_flag("4", "--world", 1, INT64_MAX).value(), 4);
    EXPECT_EQ(parse_int_flag("0", "--world", 1, INT64_MAX).error().message, "expected an integer of at least 1, found '0'");
    EXPECT_FALSE(parse_int_flag("-5", "--world", 1, INT64_MAX).ok());
    EXPECT_FALSE(parse_int_flag("abc", "--world", 1, INT64_MAX).ok());
    EXPECT_FALSE(parse_int_flag("1.5", "--world", 1, INT64_MAX).ok());
    EXPECT_FALSE(parse_int_flag("", "--world", 1, INT64_MAX).ok());
    EXPECT_FALSE(parse_int_flag("99999999999999999999", "--world", 1, INT64_MAX).ok());   // past 64 bits, not wrapped
    EXPECT_EQ(parse_int_flag("2147483648", "--steps", 1, INT32_MAX).error().message,
              "expected an integer from 1 to 2147483647, found '2147483648'");
    EXPECT_EQ(parse_real_flag("0.5", "--tolerance", 0, false).value(), 0.5);
    EXPECT_EQ(parse_real_flag("0", "--tolerance", 0, false).value(), 0.0);
    for (const char* bad : {"nan", "inf", "-inf", "1e400", "0x10", "-0.1", "", "1,5"})
        EXPECT_FALSE(parse_real_flag(bad, "--min-ms", 0, false).ok()) << bad;
    EXPECT_EQ(parse_real_flag("0", "--timeout", 0, true).error().message, "expected a number greater than 0, found '0'");
    EXPECT_EQ(parse_real_flag("nan", "--timeout", 0, true).error().message, "expected a finite number, found 'nan'");
    EXPECT_EQ(parse_int_flag("abc", "--world", 1, INT64_MAX).error().message, "expected an integer, found 'abc'");
    EXPECT_EQ(command_line_error("Could not convert: --world = abc").what(), "field '--world': cannot read 'abc'");
    EXPECT_EQ(command_line_error("--ds-config is required").what(), "field '--ds-config': required");
    EXPECT_EQ(command_line_error("--world: expected an integer of at least 1, found 'x'").what(),
              "field '--world': expected an integer of at least 1, found 'x'");
    EXPECT_EQ(command_line_error("--world: 1 required INT missing").what(), "field '--world': expected a value after the flag");
    EXPECT_EQ(command_line_error("The following argument was not expected: --bogus").what(),
              "The following argument was not expected: --bogus");
}

// Two parameters: a.weight [4, 4] (16 elements) used by module a, then b.weight [4] by module b.
Model two_param_model() {
    auto m = model_from_param_list_json(
        "m.json", R"({"parameters": [{"name": "a.weight", "shape": [4, 4]}, {"name": "b.weight", "shape": [4]}]})");
    EXPECT_TRUE(m.ok());
    return m.value();
}

DsConfig config(const std::string& text) {
    auto c = parse_ds_config("ds.json", text);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

TEST(ScheduleBounds, HandCountsOfTheRealScheduleAndOfTheEstimate) {
    Model m = two_param_model();
    // Stage 0, fp32, world 2, one step, one micro-step. Real: 2 init broadcasts; forward a, b and
    // backward b, a; one engine all_reduce of the 20 elements (one chunk under 500M); the optimizer
    // step: 2 + 4 + 1 + 1 = 8. Estimate: init 2; micro 2 x 2 modules = 4; the engine's chunks
    // min(2 params, 20 / 500M + 1) = 1, on the boundary, with the step's 2G + 2 = 4: 2 + 4 + 5 = 11.
    DsConfig c0 = config(R"({"train_micro_batch_size_per_gpu": 1})");
    ScheduleOptions o;
    o.world = 2;
    o.steps = 1;
    auto s0 = build_schedule(m, c0, o);
    ASSERT_TRUE(s0.ok());
    EXPECT_EQ(s0->ops.size(), 8u);
    EXPECT_EQ(estimate_schedule_size(m, c0, o, 1).ops, 11);

    // Stage 2, fp32, world 2, two steps of two micro-steps. The group's 20 elements are cut in two
    // partitions of 10. Per micro-step: 4 compute ops and one flush whose slices (b: 4 to rank 1; a:
    // 10 to rank 0, 6 to rank 1) go in one multi-rank all_reduce: 5. Per step: 2 x 5 + the norm,
    // the update and the all_gather = 13. Real: 2 + 2 x 13 = 28. Estimate: slices at most P + min(W
    // - 1, 19 / 2) = 3 per micro-step, so 2 x (4 + 3) + (1 + 3G) = 18 per step: 2 + 2 x 18 = 38.
    DsConfig c2 = config(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
                             "zero_optimization": {"stage": 2}})");
    o.steps = 2;
    auto s2 = build_schedule(m, c2, o);
    ASSERT_TRUE(s2.ok());
    EXPECT_EQ(s2->ops.size(), 28u);
    ScheduleSize e2 = estimate_schedule_size(m, c2, o, 2);
    EXPECT_EQ(e2.init_ops, 2);
    EXPECT_EQ(e2.per_step_ops, 18);
    EXPECT_EQ(e2.ops, 38);
}

// build_schedule (through ScheduleStream::open) counts while it builds: the stage-2 schedule above
// has 28 ops against an estimate of 38, and a limit between the two builds it; a limit below 28
// refuses it by the exact count (no "up to").
TEST(ScheduleBounds, AScheduleTheEstimateOverstatesIsBuiltAndCountedExactly) {
    Model m = two_param_model();
    DsConfig c2 = config(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
                             "zero_optimization": {"stage": 2}})");
    ScheduleOptions o;
    o.world = 2;
    o.steps = 2;
    ASSERT_EQ(estimate_schedule_size(m, c2, o, 2).ops, 38);
    o.max_ops = 30;
    auto built = build_schedule(m, c2, o);
    ASSERT_TRUE(built.ok()) << built.error().what();
    EXPECT_EQ(built->ops.size(), 28u);
    o.max_ops = 27;
    auto refused = build_schedule(m, c2, o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().field, "--max-ops");
    EXPECT_NE(refused.error().message.find("the schedule would have 28 ops (2 step(s) x 2 micro-step(s) on 2 rank(s), 2 parameters)"),
              std::string::npos)
        << refused.error().message;
}

// The refusal of a schedule counted while built (past the default limits, where the builder stops):
// "more than", where it stopped, the run's steps rather than the template's.
TEST(ScheduleBounds, ARefusalWhileBuildingSaysMoreThanAndWhere) {
    ScheduleOptions o;
    o.world = 8;
    o.steps = 6;
    o.steps_in_run = 50;
    o.max_ops = 5000000;
    ScheduleMeta meta;
    meta.world = 8;
    meta.grad_accum = 400;
    EXPECT_FALSE(check_building_size(5000000, 1000, 723, 5, 78, meta, o).has_value());
    auto e = check_building_size(5001655, 1000, 723, 5, 78, meta, o);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->field, "--max-ops");
    EXPECT_EQ(e->message,
              "the schedule would have more than 5001655 ops by step 5, micro-step 78, counted as built (50 step(s) x 400 "
              "micro-step(s) on 8 rank(s), 723 parameters), past the limit of 5000000; raise --max-ops to build it anyway");
    o.max_bytes = 1 << 20;
    auto mem = check_building_size(10, int64_t{3} << 20, 723, 0, -1, meta, o);
    ASSERT_TRUE(mem.has_value());
    EXPECT_EQ(mem->field, "--max-memory");
    EXPECT_EQ(mem->message.rfind("the schedule would take more than 3.0 MiB for 10 ops by step 0, counted as built (50 step(s)", 0), 0u)
        << mem->message;
}

TEST(ScheduleBounds, NeverBelowTheRealCountOnEveryShippedConfig) {
    auto model = load_model(test::config("models/tiny-gpt.json"));
    ASSERT_TRUE(model.ok());
    int checked = 0;
    for (const auto& entry : fs::directory_iterator(test::config("deepspeed"))) {
        auto cfg = load_ds_config(entry.path().string());
        ASSERT_TRUE(cfg.ok()) << entry.path();
        for (int64_t world : {1, 2, 3, 4, 8, 64})
            for (int steps : {1, 3}) {
                ScheduleOptions o;
                o.world = world;
                o.steps = steps;
                auto batch = resolve_batch(cfg.value(), world);
                if (!batch) continue;
                auto s = build_schedule(model.value(), cfg.value(), o);
                ASSERT_TRUE(s.ok()) << entry.path() << " world " << world << ": " << s.error().what();
                int64_t est = estimate_schedule_size(model.value(), cfg.value(), o, batch->grad_accum).ops;
                EXPECT_GE(est, static_cast<int64_t>(s->ops.size())) << entry.path() << " world " << world << " steps " << steps;
                ++checked;
            }
    }
    EXPECT_GE(checked, 7 * 6 * 2 - 12);
}

TEST(ScheduleBounds, AbsurdInputsAreRefusedInMilliseconds) {
    auto model = load_model(test::config("models/tiny-gpt.json"));
    ASSERT_TRUE(model.ok());
    auto start = std::chrono::steady_clock::now();
    // gradient_accumulation_steps 1e6 (the issue's first case).
    DsConfig ga = config(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1000000,
                             "zero_optimization": {"stage": 2}})");
    ScheduleOptions o;
    o.world = 2;
    o.steps = 2;
    auto r = build_schedule(model.value(), ga, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().field, "--max-ops");
    EXPECT_NE(r.error().message.find("2 step(s) x 1000000 micro-step(s) on 2 rank(s)"), std::string::npos) << r.error().message;
    // --steps 2147483647.
    DsConfig c2 = config(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})");
    o.steps = INT32_MAX;
    r = build_schedule(model.value(), c2, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().field, "--max-ops");
    // A world of 99999999999 cuts each gradient into 2-element partitions: millions of slices.
    auto gpt2 = load_model(test::config("models/gpt2-small.json"));
    ASSERT_TRUE(gpt2.ok());
    o.steps = 2;
    o.world = 99999999999;
    r = build_schedule(gpt2.value(), c2, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().field, "--max-ops");
    // The memory cap: the same small schedule refused under a tiny cap.
    o.world = 2;
    o.max_bytes = 1000;
    r = build_schedule(model.value(), c2, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().field, "--max-memory");
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace zerosim
