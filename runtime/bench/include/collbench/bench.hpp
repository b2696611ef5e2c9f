// `zerorun bench`: one collective swept over sizes, printed as nccl-tests prints it.
//
// Shaped like nccl-tests: each collective is one entry of a table (bytes moved for a count, how
// to fill inputs and compute the expected output, the bus-bandwidth factor, how to launch it);
// one harness does the sweep, the timing, the result check (#wrong) and the printing.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/error.hpp"

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
    int test_corrupt_rank = -1;      // hidden: this rank damages its results (the check must see it)
};

// "float", "half", "bfloat16", "double", "int64", "uint8" (nccl-tests names) or fp32/bf16/...
zerosim::Result<DType> parse_bench_dtype(const std::string& text);
const char* nccl_type_name(DType t);
bool bench_op_known(const std::string& op);

struct BenchRow {
    int64_t bytes = 0;
    int64_t count = 0;
    double time_us[2] = {0, 0};      // out-of-place, in-place (mean per call, averaged over ranks)
    double algbw[2] = {0, 0};
    double busbw[2] = {0, 0};
    int64_t wrong[2] = {0, 0};       // wrong elements, summed over ranks
};

// Runs the sweep on every rank; rank 0 prints the table to `out`. Returns the rows (every rank)
// and the total of #wrong.
std::vector<BenchRow> run_bench(Backend& be, const BenchOptions& opt, std::ostream& out);

}  // namespace zerorun
