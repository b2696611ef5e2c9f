// Schedule -> comms_logger records (formats/schedule_outputs.hpp logged_op/logged_ops), worked by
// hand from DeepSpeed v0.14.2's comms logger conventions (shared docs/zero-comm.md).
#include <gtest/gtest.h>

#include <sstream>

#include "formats/comms_log.hpp"
#include "formats/measured_logs.hpp"
#include "formats/schedule_outputs.hpp"

using namespace zerosim;

namespace {

Op op_of(OpKind kind, int micro, Phase phase, const std::string& caller, int64_t elements, DType dtype) {
    Op op;
    op.kind = kind;
    op.step = 0;
    op.micro = micro;
    op.phase = phase;
    op.caller = caller;
    op.elements = elements;
    op.dtype = dtype;
    return op;
}

// Step 0 of two micro-steps on 4 ranks: a parameter all_gather, a forward, the gradient all_reduce.
Schedule small_schedule() {
    Schedule s;
    s.meta.world = 4;
    s.meta.grad_accum = 2;
    s.add(op_of(OpKind::AllGather, 1, Phase::Forward, "all_gather_into_tensor_dp_groups", 1000, DType::FP16));
    Op fwd = op_of(OpKind::Compute, 1, Phase::Forward, "", 0, DType::FP32);
    fwd.compute = ComputeKind::Forward;
    s.add(fwd);
    s.add(op_of(OpKind::AllReduce, 0, Phase::Step, "allreduce_bucket", 262144, DType::FP32));
    return s;
}

}  // namespace

TEST(LoggedOp, OneCollectiveAsTheLoggerRecordsIt) {
    Schedule s = small_schedule();
    LoggedOp l = logged_op(s, s.ops[0], 1.0, 2.5);
    EXPECT_EQ(l.record, "all_gather_into_tensor");
    EXPECT_EQ(l.caller, "all_gather_into_tensor_dp_groups");
    EXPECT_EQ(l.bytes, 2000);                 // one rank's fp16 shard
    EXPECT_EQ(l.size_text, "1.95 KB");        // 2000 / 1024 = 1.953...
    EXPECT_EQ(l.phase, "step0.micro1.forward");
    EXPECT_EQ(l.line, 0);
    EXPECT_DOUBLE_EQ(l.time_ms, 1.0);
    EXPECT_DOUBLE_EQ(l.timestamp_s, 2.5);
    // calc_bw_log for all_gather: S <- S n = 8000 B over 1 ms = 0.064 Gbps; busbw x 3/4.
    EXPECT_NEAR(l.algbw_gbps, 0.064, 1e-12);
    EXPECT_NEAR(l.busbw_gbps, 0.048, 1e-12);
    EXPECT_EQ(l.record_key(), "all_gather_into_tensor | [Caller Func: all_gather_into_tensor_dp_groups]");
}

TEST(LoggedOp, EveryCollectiveInOrderWithItsTime) {
    Schedule s = small_schedule();
    std::vector<OpLogTime> times(s.ops.size());
    times[0] = {1.0, 0.001};
    times[1] = {99.0, 0.1};   // compute: not logged
    times[2] = {4.0, 0.2};
    auto ops = logged_ops(s, times);
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[1].record, "all_reduce");
    EXPECT_EQ(ops[1].bytes, 1048576);
    EXPECT_EQ(ops[1].size_text, "1.0 MB");
    EXPECT_EQ(ops[1].line, 2);
    // The optimizer step belongs to the last micro-step (grad_accum 2).
    EXPECT_EQ(ops[1].phase, "step0.micro1.step");
    // all_reduce: algbw = 2S/t = 2 x 1048576 B / 4 ms -> 4.194304 Gbps; busbw = (S/t) x 2(n-1)/n.
    EXPECT_NEAR(ops[1].algbw_gbps, 4.194304, 1e-9);
    EXPECT_NEAR(ops[1].busbw_gbps, 3.145728, 1e-9);
    // Without times: zeros, as `zerosim schedule` prints them.
    auto plain = logged_ops(s);
    ASSERT_EQ(plain.size(), 2u);
    EXPECT_EQ(plain[0].time_ms, 0.0);
    EXPECT_EQ(plain[0].algbw_gbps, 0.0);
}

TEST(LoggedOp, WrittenLinesReadBackAsTheSameRecords) {
    Schedule s = small_schedule();
    std::vector<OpLogTime> times(s.ops.size(), OpLogTime{12.5, 1.0});
    auto ops = logged_ops(s, times);
    std::ostringstream text;
    for (const auto& l : ops) {
        text << "##### PHASE " << l.phase << " #####\n";
        write_ds_verbose_line(text, l);
    }
    auto log = parse_log(text.str(), "mem.log");
    ASSERT_TRUE(log) << log.error().message;
    ASSERT_EQ(log->ops.size(), ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
        EXPECT_EQ(log->ops[i].record, ops[i].record);
        EXPECT_EQ(log->ops[i].caller, ops[i].caller);
        EXPECT_EQ(log->ops[i].size_text, ops[i].size_text);
        EXPECT_EQ(log->ops[i].phase, ops[i].phase);
        EXPECT_DOUBLE_EQ(log->ops[i].time_ms, 12.5);
        EXPECT_EQ(log->ops[i].line, static_cast<int>(2 * i + 2));
    }
}
