// zerorun bench under mpirun: an nccl-tests table whose #wrong is a real check (a corrupted result
// is counted), fenced timing that says so, and bad options that exit 2.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime_test_helpers.hpp"

namespace {

using zerorun_test::RunResult;

RunResult mpirun(int np, const std::string& args) { return zerorun_test::mpirun_program(np, ZERORUN_BINARY, args); }

// nccl-tests' table shape, and #wrong from a real check of every result.
struct BenchRowText {
    std::vector<std::string> cols;
};

std::vector<BenchRowText> bench_rows(const std::string& out) {
    std::vector<BenchRowText> rows;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        BenchRowText r;
        std::string c;
        while (ls >> c) r.cols.push_back(c);
        if (r.cols.size() == 13 && std::isdigit(static_cast<unsigned char>(r.cols[0][0]))) rows.push_back(r);
    }
    return rows;
}

// A fenced table of `n` rows, every result checked right (#wrong 0 in both columns) and both
// columns timed.
void expect_checked_rows(const std::string& out, size_t n) {
    auto rows = bench_rows(out);
    ASSERT_EQ(rows.size(), n) << out;
    for (const auto& row : rows) {
        EXPECT_EQ(row.cols[8], "0");
        EXPECT_EQ(row.cols[12], "0");
        EXPECT_GT(std::stod(row.cols[5]), 0.0);
        EXPECT_GT(std::stod(row.cols[9]), 0.0);
    }
}

TEST(Bench, CollectivesPrintNcclTestsTablesWithoutWrongResults) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"all_reduce", "float"}, {"all_gather", "bfloat16"}, {"reduce_scatter", "half"},
        {"broadcast", "double"}, {"reduce", "int64"},       {"all_reduce", "bfloat16"}};
    for (const auto& [op, type] : cases) {
        SCOPED_TRACE(op + " " + type);
        RunResult r = mpirun(4, "bench --op " + op + " --dtype " + type + " --min 64 --max 1M -f 4 -n 5 -w 1");
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_NE(r.out.find("#       size         count      type   redop    root     time   algbw   busbw #wrong     time"),
                  std::string::npos);
        EXPECT_NE(r.out.find("# Avg bus bandwidth    : "), std::string::npos);
        auto rows = bench_rows(r.out);
        ASSERT_EQ(rows.size(), 8u) << r.out;   // 64 B .. 1 MiB by 4
        int64_t prev = 0;
        for (const auto& row : rows) {
            int64_t size = std::stoll(row.cols[0]);
            EXPECT_GT(size, prev);
            prev = size;
            EXPECT_EQ(row.cols[2], type);
            EXPECT_EQ(row.cols[8], "0");
            EXPECT_EQ(row.cols[12], "0");
            EXPECT_GT(std::stod(row.cols[5]), 0.0);   // time (us)
        }
    }
}

TEST(Bench, CorruptedResultIsCountedWrong) {
    RunResult r = mpirun(4, "bench --op all_reduce --min 1K --max 4K -n 2 -w 0 --test-corrupt-rank 2");
    EXPECT_EQ(r.code, 1) << r.out;
    auto rows = bench_rows(r.out);
    ASSERT_EQ(rows.size(), 3u) << r.out;
    for (const auto& row : rows) {
        EXPECT_EQ(row.cols[8], "1");
        EXPECT_EQ(row.cols[12], "1");
    }
    EXPECT_NE(r.out.find("# Out of bounds values : 6 FAILED"), std::string::npos) << r.out;
}

// --fenced: single calls after a barrier, still every result checked; the header says how it
// timed, so a table is never mistaken for nccl-tests' back-to-back figures.
TEST(Bench, FencedCallsAreCheckedAndSaySo) {
    RunResult r = mpirun(3, "bench --op all_gather --min 1K --max 64K -f 8 -n 3 -w 1 --fenced --evict 1M");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("fenced calls (a barrier before each; time = shortest over ranks, mean over calls); "
                         "caches evicted with 1 MiB between calls"),
              std::string::npos)
        << r.out;
    expect_checked_rows(r.out, 3);
    RunResult warm = mpirun(2, "bench --op broadcast --min 1K --max 1K -n 2 -w 0 --fenced --evict 0");
    ASSERT_EQ(warm.code, 0) << warm.out;
    EXPECT_NE(warm.out.find("fenced calls"), std::string::npos) << warm.out;
    EXPECT_EQ(warm.out.find("caches evicted"), std::string::npos) << warm.out;
    RunResult bad = mpirun(2, "bench --fenced --evict lots");
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find("--evict"), std::string::npos) << bad.out;
}

// zerorun --bench-between-steps (issue 20): a bench round of each collective before every N-th
// step and after the last, inside the timed run, appended to PREFIX-<op>.txt as nccl-tests tables
// that zerosim calibrate reads; only with --sync-each-op (a round must not overlap an op).
TEST(Bench, RoundsBetweenStepsAppendOneTablePerRound) {
    const std::string prefix = ::testing::TempDir() + "zerorun-rounds";
    const std::string run = "--ds-config " + std::string(ZERORUN_FIXTURES_DIR) + "/configs/z1.json --model " +
                            std::string(ZERORUN_FIXTURES_DIR) + "/tiny_model.json --steps 3 --compute-scale 0 --no-verify -o /dev/null";
    RunResult r = mpirun(2, run + " --sync-each-op --bench-between-steps " + prefix +
                                " --bench-min 1K --bench-max 4K --bench-every 2 --bench-iters 3");
    ASSERT_EQ(r.code, 0) << r.out;
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}) {
        std::ifstream in(prefix + "-" + op + ".txt");
        std::stringstream text;
        text << in.rdbuf();
        // Rounds before steps 0 and 2 and after the last: three tables of three sizes.
        size_t tables = 0;
        for (size_t at = text.str().find("# nThread"); at != std::string::npos; at = text.str().find("# nThread", at + 1)) ++tables;
        EXPECT_EQ(tables, 3u) << op;
        EXPECT_EQ(bench_rows(text.str()).size(), 9u) << op;
        EXPECT_NE(text.str().find("median over calls"), std::string::npos) << op;
    }
    RunResult unsynced = mpirun(2, run + " --bench-between-steps " + prefix);
    EXPECT_EQ(unsynced.code, 2) << unsynced.out;
    EXPECT_NE(unsynced.out.find("--bench-between-steps"), std::string::npos) << unsynced.out;
}

// --fresh-buffers (issue 20): every timed call gets buffers allocated, zeroed and filled just
// before it, as a step's op does, with no warm-up call; the header says so, and the results are
// still checked. Only with --fenced.
TEST(Bench, FreshBuffersAreCheckedAndSaySo) {
    for (const char* op : {"reduce_scatter", "all_reduce", "broadcast", "all_gather"}) {
        SCOPED_TRACE(op);
        RunResult r = mpirun(3, std::string("bench --op ") + op + " --min 1K --max 64K -f 8 -n 2 -w 3 --fenced --evict 1M --fresh-buffers");
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_NE(r.out.find("warmup iters: 0 iters: 2"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("caches evicted with 1 MiB between calls; buffers allocated, zeroed and filled before each call"),
                  std::string::npos)
            << r.out;
        expect_checked_rows(r.out, 3);
    }
    RunResult unfenced = mpirun(2, "bench --fresh-buffers");
    EXPECT_EQ(unfenced.code, 2) << unfenced.out;
    EXPECT_NE(unfenced.out.find("zerorun: error: field '--fresh-buffers': needs --fenced"), std::string::npos) << unfenced.out;
}

// The main job's timed run (issue 20): --evict-before-op before each op, fresh-buffer rounds between
// steps; every collective's result still checked, and the flag refused without --sync-each-op.
TEST(Bench, EvictBeforeOpRunsCheckedWithFreshRounds) {
    const std::string prefix = ::testing::TempDir() + "zerorun-fresh-rounds";
    const std::string json = ::testing::TempDir() + "zerorun-evicted.json";
    const std::string run = "--ds-config " + std::string(ZERORUN_FIXTURES_DIR) + "/configs/z3.json --model " +
                            std::string(ZERORUN_FIXTURES_DIR) + "/tiny_model.json --steps 2 --compute-scale 0 -o /dev/null";
    RunResult r = mpirun(2, run + " --json " + json + " --sync-each-op --evict-before-op 1M --bench-between-steps " + prefix +
                                " --bench-min 1K --bench-max 4K --bench-evict 1M --bench-fresh-buffers");
    ASSERT_EQ(r.code, 0) << r.out;
    std::ifstream in(json);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"check\": \"ok\""), std::string::npos);
    EXPECT_EQ(text.str().find("\"check\": \"wrong\""), std::string::npos);
    std::ifstream rounds(prefix + "-reduce_scatter.txt");
    std::stringstream rt;
    rt << rounds.rdbuf();
    EXPECT_NE(rt.str().find("buffers allocated, zeroed and filled before each call"), std::string::npos) << rt.str();
    RunResult unsynced = mpirun(2, run + " --evict-before-op 1M");
    EXPECT_EQ(unsynced.code, 2) << unsynced.out;
    EXPECT_NE(unsynced.out.find("field '--evict-before-op': needs --sync-each-op"), std::string::npos) << unsynced.out;
    RunResult bad = mpirun(2, run + " --sync-each-op --evict-before-op lots");
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find("--evict-before-op"), std::string::npos) << bad.out;
}

TEST(Bench, BadOptionsExitTwo) {
    RunResult r = mpirun(2, "bench --op all_to_all");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("zerorun: error: field '--op': expected all_reduce"), std::string::npos) << r.out;
    r = mpirun(2, "bench --max 12X");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("unknown size unit 'X'"), std::string::npos) << r.out;
}

}  // namespace
