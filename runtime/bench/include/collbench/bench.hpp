// `zerorun bench`: one collective swept over sizes, printed as nccl-tests prints it.
//
// Shaped like nccl-tests: each collective is one entry of the collective table
// (schedule/collective_table.hpp: its buffers for a count, the bus-bandwidth factor, whether it
// reduces or has a root); one harness does the sweep, the fill and expected values, the launch,
// the timing, the result check (#wrong) and the printing.
#pragma once

#include <cstdint>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/error.hpp"
#include "formats/nccl_tests.hpp"

namespace zerorun {

struct BenchOptions {
    std::string op = "all_reduce";   // all_reduce, all_gather, reduce_scatter, broadcast, reduce
    int64_t min_bytes = 8;
    int64_t max_bytes = 32 * 1024 * 1024;
    int64_t factor = 2;
    int iters = 20;
    int warmup = 5;
    DType dtype = DType::FP32;
    ReduceOp redop = ReduceOp::Sum;
    int root = 0;
    bool check = true;
    // Time single calls, each after a barrier (as zerorun --sync-each-op and DeepSpeed's comms
    // logger time an op), instead of nccl-tests' back-to-back loop; the row is the mean over calls of
    // the shortest time over ranks.
    bool fenced = false;
    // With fenced: bytes each rank writes over before every call, so the call finds cold caches
    // as an op inside a training step does (0: warm).
    int64_t evict_bytes = 64ll << 20;
    // With fenced: each call gets its buffers allocated, zeroed and filled just before it, as
    // zerorun's executor gives a step's op (executor/memory.cpp Buffer), so a between-steps round
    // finds the caches in the state the timed ops find them when no compute runs between them.
    bool fresh_buffers = false;
    // With fenced: the row is the median over calls, not the mean (a call the OS preempted on an
    // oversubscribed host would otherwise weigh on every row of a short round).
    bool median_of_calls = false;
    int test_corrupt_rank = -1;      // hidden: this rank damages its results (the check must see it)
    // Called after every call of the collective with its send bytes (zerorun's watchdog: a peer
    // that stops answering leaves this rank inside a call, and no call finishes).
    std::function<void(int64_t)> on_call;
};

// "float", "half", "bfloat16", "double", "int64", "uint8" (nccl-tests names) or fp32/bf16/...
zerosim::Result<DType> parse_bench_dtype(const std::string& text);
const char* nccl_type_name(DType t);
bool bench_op_known(const std::string& op);

// The #wrong of every row, out-of-place and in-place, summed (unchecked rows count 0).
int64_t bench_wrong_total(const std::vector<zerosim::NcclTestsRow>& rows);

// Runs the sweep on every rank; rank 0 prints the table to `out` (formats/nccl_tests.hpp's
// writer). Returns the rows (every rank); time and bandwidth are the mean per call, averaged over
// ranks, #wrong the wrong elements summed over ranks.
std::vector<zerosim::NcclTestsRow> run_bench(Backend& be, const BenchOptions& opt, std::ostream& out);

}  // namespace zerorun
