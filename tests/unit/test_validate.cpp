// The validator: readers on the real reference logs and on broken files, alignment that reports
// exactly what was changed, calibration that recovers known terms and predicts held-out sizes.
// The command line's exit codes and messages are in tests/cli/cases (validate-*, calibrate-*).
#include <filesystem>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "timing/collectives.hpp"
#include "timing/topology.hpp"
#include "test_helpers.hpp"
#include "validate/calibrate.hpp"
#include "validate/diff.hpp"
#include "formats/measured_logs.hpp"

using namespace zerosim;
using zerosim::test::run_zerosim;

namespace {

using zerosim::test::q;

const std::string kRef = test::reference("deepspeed-v0.14.2-cpu");
const char* kRuns[] = {"z1_seed_w4", "z2_smallbucket_w4", "z3_default_w4"};

int count_lines(const std::string& text, const std::string& needle) {
    int n = 0;
    std::istringstream in(text);
    std::string l;
    while (std::getline(in, l))
        if (l.find(needle) != std::string::npos) ++n;
    return n;
}

TEST(Readers, RealDeepSpeedLogsParseCompletely) {
    for (const char* run : kRuns) {
        std::string path = kRef + "/" + run + "/rank0.log";
        std::string text = test::read_file(path);
        auto log = read_log(path);
        ASSERT_TRUE(log.ok()) << log.error().what();
        EXPECT_EQ(log->format, LogFormat::DeepSpeed);
        // Every comm op line is read; log_summary's own two barriers are kept out of the ops.
        EXPECT_EQ(static_cast<int>(log->ops.size()) + 2, count_lines(text, "comm op:")) << run;
        // Every summary row: the lines indented by 20 spaces under the table header.
        int rows = 0;
        bool table = false;
        std::istringstream in(text);
        std::string l;
        while (std::getline(in, l)) {
            if (l.rfind("Comm. Op", 0) == 0) table = true;
            else if (table && l.rfind("                    ", 0) == 0) ++rows;
        }
        EXPECT_EQ(static_cast<int>(log->summary.size()), rows) << run;
        EXPECT_GT(rows, 5);
        // Phase markers are picked up where a log has them.
        EXPECT_EQ(log->ops.front().phase, "initialize");
    }
}

TEST(Readers, NcclTestsTablesParseCompletely) {
    auto log = read_log(test::reference("nccl-tests/a100-8gpu-allreduce.txt"));
    ASSERT_TRUE(log.ok()) << log.error().what();
    EXPECT_EQ(log->format, LogFormat::NcclTests);
    ASSERT_EQ(log->tables.size(), 2u);
    EXPECT_EQ(log->tables[0].rows.size() + log->tables[1].rows.size(), 60u);
    EXPECT_EQ(log->tables[1].rows[0].bytes, 8);
    EXPECT_DOUBLE_EQ(log->tables[1].rows[0].time_us, 20.26);
}

TEST(Readers, VariantsAreAccepted) {
    // No caller (debug off), an extra "[Line Number: n]" field, a "rank=0 | " prefix; nccl-tests
    // rows with launcher prefixes, scientific notation, N/A and no root column.
    std::string ds =
        "rank=0 | comm op: all_reduce | time (ms): 1.50 | msg size: 2.0 KB | algbw (Gbps): 0.02 | busbw (Gbps): 0.02\n"
        "[2024-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] comm op: broadcast | [Caller Func: f] | "
        "[Line Number: 12] | time (ms): 0.10 | msg size: 0B | algbw (Gbps): 0.00 | busbw (Gbps): 0.00\n";
    auto a = parse_log(ds, "variants.log");
    ASSERT_TRUE(a.ok()) << a.error().what();
    ASSERT_EQ(a->ops.size(), 2u);
    EXPECT_EQ(a->ops[0].caller, "");
    EXPECT_EQ(a->ops[1].caller, "f");
    EXPECT_EQ(a->ops[1].size_text, "0B");
    std::string nccl =
        "[1,0]<stdout>:#       size         count      type   redop     time   algbw   busbw  error\n"
        "[1,0]<stdout>:        1024           256     float     sum    1.2e+01    0.09    0.15   0e+00\n"
        "0:         2048           512     float     sum     13    0.16    0.27    N/A\n";
    auto b = parse_log(nccl, "old.txt");
    ASSERT_TRUE(b.ok()) << b.error().what();
    ASSERT_EQ(b->tables.size(), 1u);
    ASSERT_EQ(b->tables[0].rows.size(), 2u);
    EXPECT_DOUBLE_EQ(b->tables[0].rows[0].time_us, 12.0);
}

TEST(Readers, BrokenFilesNameTheLine) {
    std::string good = "comm op: all_reduce | time (ms): 1.00 | msg size: 1.0 KB | algbw (Gbps): 0.01 | busbw (Gbps): 0.01\n";
    auto cut = parse_log(good + "comm op: all_reduce | time (ms): 1.0\n", "cut.log");
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().what().find("cut.log:2"), std::string::npos) << cut.error().what();
    std::string table = "Comm. Op            Message Size        Count\nall_reduce | [Caller Func: f]\n";
    auto trunc = parse_log(good + table, "trunc.log");
    ASSERT_FALSE(trunc.ok());
    EXPECT_NE(trunc.error().what().find("trunc.log:3"), std::string::npos) << trunc.error().what();
    EXPECT_NE(trunc.error().what().find("truncated"), std::string::npos);
    auto row = parse_log(good + "Comm. Op            Message Size\nall_reduce\n                    1.0 KB   3   x\n", "row.log");
    ASSERT_FALSE(row.ok());
    EXPECT_NE(row.error().what().find("row.log:4"), std::string::npos) << row.error().what();
    auto mixed = parse_log(good + "        1024           256     float     sum      -1    12.0    0.09    0.15      0\n", "mixed.log");
    ASSERT_FALSE(mixed.ok());
    EXPECT_NE(mixed.error().what().find("mixed formats"), std::string::npos) << mixed.error().what();
    EXPECT_FALSE(parse_log("", "empty.log").ok());
    EXPECT_FALSE(parse_log("hello\nworld\n", "prose.log").ok());
}

TEST(Alignment, PredictionsMatchTheRealLogs) {
    for (const char* run : kRuns) {
        auto pred = test::temp_file(std::string(run) + ".pred.log", "");
        auto p = run_zerosim("predict --deepspeed 0.14.2 --ds-config " + q(kRef + "/" + run + "/ds_config.json") + " --model " + q(kRef + "/model.json") +
                             " --topology " + q(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json") +
                             " --world 4 --steps 3 -o " + q(pred));
        ASSERT_EQ(p.exit_code, 0) << p.out;
        auto v = run_zerosim("validate " + q(pred) + " " + q(kRef + "/" + run + "/rank0.log") + " --what ops");
        EXPECT_EQ(v.exit_code, 0) << v.out;
        EXPECT_NE(v.out.find("0 missing, 0 extra, 0 resized, 0 swapped"), std::string::npos) << v.out;
    }
}

TEST(Alignment, ReportsExactlyWhatChanged) {
    // From the real z2 log: remove its 40th op line, change the size of the 50th, swap the 60th
    // and 61st (two different ops). Reported: 1 missing, 1 resized, 1 swapped, nothing extra.
    auto real = read_log(kRef + "/z2_smallbucket_w4/rank0.log");
    ASSERT_TRUE(real.ok());
    std::vector<LoggedOp> pred = real->ops, meas = real->ops;
    ASSERT_NE(meas[59].size_text, meas[60].size_text);
    std::swap(meas[59], meas[60]);
    meas[49].size_text = "999.0 KB";
    meas.erase(meas.begin() + 39);
    MeasuredLog a, b;
    a.ops = pred;
    b.ops = meas;
    auto r = diff_logs(a, b, 0.15, DiffScope::Ops);
    EXPECT_EQ(r.missing, 1u);
    EXPECT_EQ(r.resized, 1u);
    EXPECT_EQ(r.swapped, 1u);
    EXPECT_EQ(r.extra, 0u);
    EXPECT_EQ(r.matched, pred.size() - 2);  // all but the removed and the resized
    EXPECT_FALSE(r.pass());
}

// The validator's exit codes and messages: tests/cli/cases/validate-exit-codes.case.

Topology a100() {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-a100.json");
    EXPECT_TRUE(t.ok());
    return t.value();
}

TEST(Calibration, RecoversKnownTermsFromNoisyData) {
    // Times generated by the model itself with latency x1.7 and bandwidth x0.6, then 2% noise:
    // the fit returns both within a few percent.
    Topology truth = a100();
    truth.latency_scale = 1.7;
    truth.bandwidth_scale = 0.6;
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0.0, 0.02);
    std::vector<Measurement> rows;
    for (int64_t s = 8; s <= (1LL << 32); s *= 2) {
        Measurement m{OpKind::AllReduce, s, 0, 8, "synthetic"};
        m.time_us = predicted_time_us(truth, m) * (1 + noise(rng));
        rows.push_back(m);
    }
    auto fit = fit_topology(a100(), rows);
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    EXPECT_NEAR(fit->latency_scale, 1.7, 1.7 * 0.05);
    EXPECT_NEAR(fit->bandwidth_scale, 0.6, 0.6 * 0.05);
    EXPECT_GT(fit->r2, 0.99);
}

TEST(Calibration, HalfTheSizesPredictTheOtherHalf) {
    // Real 8 x A100 nccl-tests (one rank per GPU): fit on every other size, predict the rest.
    auto log = read_log(test::reference("nccl-tests/a100-8gpu-allreduce.txt"));
    ASSERT_TRUE(log.ok());
    const auto& rows = log->tables[1].rows;
    std::vector<Measurement> train, held;
    for (size_t i = 0; i < rows.size(); ++i)
        (i % 2 ? held : train).push_back({OpKind::AllReduce, rows[i].bytes, rows[i].time_us, 8, "row"});
    auto fit = fit_topology(a100(), train);
    ASSERT_TRUE(fit.ok()) << fit.error().what();
    Topology cal = a100();
    cal.latency_scale = fit->latency_scale;
    cal.bandwidth_scale = fit->bandwidth_scale;
    std::vector<double> err;
    std::printf("calibrated on %zu sizes (latency x%.3f, bandwidth x%.3f); held-out sizes:\n", train.size(),
                fit->latency_scale, fit->bandwidth_scale);
    for (const auto& m : held) {
        double p = predicted_time_us(cal, m);
        err.push_back(std::fabs(p - m.time_us) / m.time_us);
        std::printf("%12lld %10.2f %10.2f %6.1f%%\n", static_cast<long long>(m.bytes), m.time_us, p, err.back() * 100);
    }
    std::sort(err.begin(), err.end());
    double med = err[err.size() / 2];
    std::printf("median held-out error %.1f%%\n", med * 100);
    EXPECT_LE(med, 0.05);
}

TEST(Calibration, RefusesAnUnderdeterminedFit) {
    std::vector<Measurement> one = {{OpKind::AllReduce, 1 << 20, 40.0, 8, "a"}, {OpKind::AllReduce, 1 << 20, 41.0, 8, "b"}};
    auto fit = fit_topology(a100(), one);
    ASSERT_FALSE(fit.ok());
    EXPECT_NE(fit.error().what().find("under-determined"), std::string::npos);
}

// calibrate writing a new topology and never its input: tests/cli/cases/calibrate-writes-new-topology.case.

}  // namespace

namespace {

// A table whose in-place calls run at half the bandwidth of its out-of-place ones: the column
// calibrate fits decides the answer. as-deepspeed takes in-place for all_reduce (DeepSpeed reduces
// its gradient bucket in place) and out-of-place for all_gather (all_gather_into_tensor).
TEST(CalibrateCli, FitsTheColumnDeepSpeedCalls) {
    Topology fast = a100(), slow = a100();
    slow.bandwidth_scale = 0.5;
    std::string table = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    for (int64_t s = 1 << 20; s <= (1LL << 32); s *= 2) {
        Measurement m{OpKind::AllReduce, s, 0, 8, "synthetic"};
        char row[256];
        std::snprintf(row, sizeof row, "%12lld %12lld float sum -1 %10.2f 1.00 1.00 0 %10.2f 1.00 1.00 0\n",
                      static_cast<long long>(s), static_cast<long long>(s / 4), predicted_time_us(fast, m),
                      predicted_time_us(slow, m));
        table += row;
    }
    auto file = test::temp_file("inplace-slow.txt", table);
    std::string topo = std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-a100.json";
    auto fitted = [&](const std::string& op, const std::string& column) {
        auto out = test::temp_file("cal-" + op + "-" + column + ".json", "");
        std::filesystem::remove(out);
        auto r = run_zerosim("calibrate --topology " + q(topo) + " --op " + op + " --column " + column + " " + q(file) +
                             " -o " + q(out));
        EXPECT_EQ(r.exit_code, 0) << r.out;
        auto t = load_topology(out);
        EXPECT_TRUE(t.ok()) << r.out;
        return t.ok() ? t->bandwidth_scale : -1.0;
    };
    EXPECT_NEAR(fitted("all_reduce", "out-of-place"), 1.0, 0.02);
    EXPECT_NEAR(fitted("all_reduce", "in-place"), 0.5, 0.01);
    EXPECT_NEAR(fitted("all_reduce", "as-deepspeed"), 0.5, 0.01);
    // Labelled all_gather, the same rows are judged by their out-of-place column (the scale itself
    // differs from all_reduce's: an all_gather moves half the bytes in the same time).
    double ag = fitted("all_gather", "as-deepspeed");
    EXPECT_NEAR(ag, fitted("all_gather", "out-of-place"), 1e-9);
    EXPECT_NEAR(ag, 2 * fitted("all_gather", "in-place"), 0.02 * ag);
    // An unknown --column: tests/cli/cases/calibrate-bad-column.case.
    // --op takes the names bench --op takes, reduce included.
    EXPECT_GT(fitted("reduce", "as-deepspeed"), 0.0);
}

TEST(Calibration, PerCollectiveWhereTheDataTellThemApart) {
    // all_reduce measured at bandwidth x0.5, all_gather at x0.8 (latency x1.2 both): the
    // per-collective fits find each, and a topology carrying them predicts both tables.
    Topology ar_truth = a100(), ag_truth = a100();
    ar_truth.bandwidth_scale = 0.5;
    ag_truth.bandwidth_scale = 0.8;
    ar_truth.latency_scale = ag_truth.latency_scale = 1.2;
    std::vector<Measurement> rows;
    for (int64_t s = 1024; s <= (1LL << 30); s *= 4) {
        Measurement ar{OpKind::AllReduce, s, 0, 8, "ar"}, ag{OpKind::AllGather, s, 0, 8, "ag"};
        ar.time_us = predicted_time_us(ar_truth, ar);
        ag.time_us = predicted_time_us(ag_truth, ag);
        rows.push_back(ar);
        rows.push_back(ag);
    }
    auto cal = calibrate(a100(), rows);
    ASSERT_TRUE(cal.ok()) << cal.error().what();
    ASSERT_EQ(cal->per_collective.size(), 2u);
    EXPECT_NEAR(cal->per_collective["all_reduce"].bandwidth_scale, 0.5, 0.01);
    EXPECT_NEAR(cal->per_collective["all_gather"].bandwidth_scale, 0.8, 0.016);
    EXPECT_NEAR(cal->per_collective["all_reduce"].latency_scale, 1.2, 0.03);
    Topology t = a100();
    for (const auto& [name, f] : cal->per_collective) t.collective_scales[name] = {f.bandwidth_scale, f.latency_scale};
    for (const auto& r : rows) EXPECT_NEAR(predicted_time_us(t, r), r.time_us, r.time_us * 0.02) << r.source << " " << r.bytes;
}

}  // namespace
