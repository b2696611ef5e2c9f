// DeepSpeed's comms_logger conventions (deepspeed/utils/comms_logging.py), checked against values
// worked out by hand from Python's rules and against lines of the real reference logs.
#include <gtest/gtest.h>

#include <sstream>

#include "formats/comms_log.hpp"

using namespace zerosim;

TEST(SizeString, ZeroBytesIsSpecial) { EXPECT_EQ(ds_size_string(0), "0B"); }

TEST(SizeString, PrintsLikePythonFloats) {
    EXPECT_EQ(ds_size_string(1), "1.0 B");
    EXPECT_EQ(ds_size_string(512), "512.0 B");
    EXPECT_EQ(ds_size_string(1023), "1023.0 B");
    EXPECT_EQ(ds_size_string(1024), "1.0 KB");
    EXPECT_EQ(ds_size_string(10240), "10.0 KB");
    EXPECT_EQ(ds_size_string(1536), "1.5 KB");
    EXPECT_EQ(ds_size_string(1048576), "1.0 MB");
    EXPECT_EQ(ds_size_string(1073741824), "1.0 GB");
}

TEST(SizeString, RoundsTheBinaryValue) {
    // 49536 / 1024 = 48.375 exactly; Python's round(48.375, 2) gives 48.38 (the double 48.375 is
    // exact and round-half-even keeps 8). The reference z3 log prints this size as "48.38 KB".
    EXPECT_EQ(ds_size_string(49536), "48.38 KB");
    // 1152 / 1024 = 1.125 exactly: half to even gives 1.12.
    EXPECT_EQ(ds_size_string(1152), "1.12 KB");
    // 1048575 B is just under 1 MB: floor(log1024) = 1, and 1023.999 KB rounds to 1024.0 KB.
    EXPECT_EQ(ds_size_string(1048575), "1024.0 KB");
    // 667136 fp32 parameters: 2668544 B = 2.5449... MB -> "2.54 MB" (reference z1 log).
    EXPECT_EQ(ds_size_string(2668544), "2.54 MB");
    // 16512 B = 16.125 KB exactly -> half to even -> 16.12 KB (reference z3 log).
    EXPECT_EQ(ds_size_string(16512), "16.12 KB");
    // 66048 B = 64.5 KB; 65664 B = 64.125 KB -> 64.12 KB (reference z3 log).
    EXPECT_EQ(ds_size_string(66048), "64.5 KB");
    EXPECT_EQ(ds_size_string(65664), "64.12 KB");
}

TEST(Bandwidth, FollowsCalcBwLog) {
    // S = 1e6 bytes in 1 ms on 4 ranks. all_reduce: algbw = 2S/t, busbw = (S/t) 2(n-1)/n,
    // in Gbps: 2e6 B/ms * 8 / 1e6 = 16; 1e6 * 1.5 * 8 / 1e6 = 12.
    auto ar = ds_bandwidth("all_reduce", 1000000, 1.0, 4);
    EXPECT_DOUBLE_EQ(ar.algbw_gbps, 16.0);
    EXPECT_DOUBLE_EQ(ar.busbw_gbps, 12.0);
    // all_gather_into_tensor counts the shard times n: 4e6 B/ms -> 32 Gbps, busbw 24.
    auto ag = ds_bandwidth("all_gather_into_tensor", 1000000, 1.0, 4);
    EXPECT_DOUBLE_EQ(ag.algbw_gbps, 32.0);
    EXPECT_DOUBLE_EQ(ag.busbw_gbps, 24.0);
    // reduce_scatter_tensor is counted the same way (over-counted n-fold, as DeepSpeed does).
    EXPECT_DOUBLE_EQ(ds_bandwidth("reduce_scatter_tensor", 1000000, 1.0, 4).algbw_gbps, 32.0);
    // broadcast: S/t both.
    auto bc = ds_bandwidth("broadcast", 1000000, 2.0, 4);
    EXPECT_DOUBLE_EQ(bc.algbw_gbps, 4.0);
    EXPECT_DOUBLE_EQ(bc.busbw_gbps, 4.0);
    // No time, no bandwidth.
    EXPECT_EQ(ds_bandwidth("all_reduce", 1000, 0.0, 4).algbw_gbps, 0.0);
}

TEST(Bandwidth, ReproducesAReferenceLine) {
    // z1_seed_w4: all_gather_into_tensor of 651.5 KB (667136 B) on 4 ranks in 12.73 ms logged
    // algbw 1.68 and busbw 1.26. 667136*4/12.73*8/1e6 = 1.677 -> 1.68; *3/4 = 1.258 -> 1.26.
    auto bw = ds_bandwidth("all_gather_into_tensor", 667136, 12.73, 4);
    EXPECT_EQ(fixed2(bw.algbw_gbps), "1.68");
    EXPECT_EQ(fixed2(bw.busbw_gbps), "1.26");
}

TEST(TrimMean, UsesPythonRounding) {
    // n = 10: k = round(1.0) = 1, mean of the middle 8 of 1..10 = 5.5.
    EXPECT_DOUBLE_EQ(ds_trim_mean({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.1), 5.5);
    // n = 5: k = round(0.5) = 0 (half to even): plain mean of 1,2,3,4,100 = 22.
    EXPECT_DOUBLE_EQ(ds_trim_mean({1, 2, 3, 4, 100}, 0.1), 22.0);
    // n = 15: 15 * 0.1 = 1.5000000000000002 in binary -> k = 2; mean of 3..13 = 8.
    std::vector<double> v;
    for (int i = 1; i <= 15; ++i) v.push_back(i);
    EXPECT_DOUBLE_EQ(ds_trim_mean(v, 0.1), 8.0);
    EXPECT_DOUBLE_EQ(ds_trim_mean({}, 0.1), 0.0);
}

TEST(VerboseLine, HasTheComms_loggerShape) {
    LoggedOp op;
    op.record = "all_reduce";
    op.caller = "allreduce_bucket";
    op.bytes = 2668544;
    op.time_ms = 8.72;
    op.algbw_gbps = 4.89;
    op.busbw_gbps = 3.67;
    op.timestamp_s = 86400.0 + 3661.5;  // 1970-01-02 01:01:01,500
    std::ostringstream out;
    write_ds_verbose_line(out, op);
    EXPECT_EQ(out.str(),
              "[1970-01-02 01:01:01,500] [INFO] [logging.py:96:log_dist] [Rank 0] comm op: all_reduce | "
              "[Caller Func: allreduce_bucket] | time (ms): 8.72 | msg size: 2.54 MB | algbw (Gbps): 4.89 | "
              "busbw (Gbps): 3.67\n");
}

TEST(Summary, GroupsByRecordThenSize) {
    std::vector<LoggedOp> ops;
    auto add = [&](const char* rec, const char* caller, int64_t bytes, double t) {
        LoggedOp o;
        o.record = rec;
        o.caller = caller;
        o.bytes = bytes;
        o.time_ms = t;
        ops.push_back(o);
    };
    add("broadcast", "_broadcast_model", 2048, 1.0);
    add("broadcast", "_broadcast_model", 512, 2.0);
    add("all_reduce", "allreduce_bucket", 4, 0.5);
    add("broadcast", "_broadcast_model", 512, 4.0);
    std::ostringstream out;
    write_ds_summary(out, ops);
    std::string pad(20, ' ');
    auto col = [](const std::string& s) { return s + std::string(20 - s.size(), ' '); };
    std::string expected =
        col("Comm. Op") + col("Message Size") + col("Count") + col("Total Latency(ms)") + col("Avg Latency(ms)") +
        col("tput_avg (Gbps)") + col("busbw_avg (Gbps)") + "\n" + "broadcast | [Caller Func: _broadcast_model]\n" +
        pad + col("512.0 B") + col("2") + col("6.00") + col("3.00") + col("0.00") + col("0.00") + "\n" + pad +
        col("2.0 KB") + col("1") + col("1.00") + col("1.00") + col("0.00") + col("0.00") + "\n" +
        "all_reduce | [Caller Func: allreduce_bucket]\n" + pad + col("4.0 B") + col("1") + col("0.50") +
        col("0.50") + col("0.00") + col("0.00") + "\n";
    EXPECT_EQ(out.str(), expected);
}
