// zerorun's all_reduce / all_gather / reduce_scatter against a bare MPI call of the same size.
//
// zerorun's path is what the executor runs for every collective: the backend interface (a
// virtual call, dtype and op mapping, in-place detection) plus the per-op timing records. The bare
// path is the MPI call alone. Both use the same buffers and alternate call by call, so drift in
// the machine's load hits both; each sample is the slowest rank's time (a collective is only done
// when every rank is), and the table prints medians. Target: zerorun within 1.05x of bare MPI for
// messages of 1 MiB and more.
//
//   mpirun -np 4 --oversubscribe build/bench/runtime/runtime_bench [--reps N] [--max BYTES]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_args.hpp"
#include "backends/backend.hpp"

using namespace zerorun;

namespace {

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What the executor keeps per op (start, end), so the zerorun path pays for it too.
struct Record {
    double start_us, end_us;
};

}  // namespace

int main(int argc, char** argv) {
    // Read before MPI starts, so that --help and a wrong flag need no mpirun.
    const zerosim::bench::Args args(argc, argv,
                                    "zerorun's all_reduce, all_gather and reduce_scatter against a bare MPI call of the same size\n"
                                    "(alternating calls, the slowest rank's time, medians). Target: within 1.05x of bare MPI\n"
                                    "from 1 MiB. Run under mpirun: mpirun -np 4 --oversubscribe runtime_bench",
                                    {{"--reps", "N", "samples per size and path (default 61)"},
                                     {"--max", "BYTES", "largest message (default 16777216)"}});
    const int reps = static_cast<int>(args.integer("--reps", 61, 1, 100000));
    const int64_t max_bytes = args.integer("--max", 16 << 20, 1, int64_t{1} << 40);
    auto be = make_mpi_backend(&argc, &argv);
    const int n = be->world(), me = be->rank();
    const std::vector<int64_t> sizes = {1024, 64 * 1024, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    if (me == 0) {
        std::printf("# zerorun collectives vs bare MPI, %d ranks, fp32, medians of %d alternating samples (slowest rank each)\n",
                    n, reps);
        std::printf("# %-15s %12s %14s %14s %8s %s\n", "op", "bytes", "bare MPI (us)", "zerorun (us)", "ratio", "target <= 1.05 for >= 1 MiB");
    }
    bool all_ok = true;
    std::vector<Record> records;
    records.reserve(static_cast<size_t>(reps) * 3 * sizes.size());
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
        for (int64_t bytes : sizes) {
            if (bytes > max_bytes) continue;
            const std::string o = op;
            // `bytes` is the whole buffer (nccl-tests' size): all_gather's output and reduce_scatter's
            // input; per-rank pieces are bytes / n.
            int64_t count = bytes / 4 / n * n;
            int64_t piece = count / n;
            size_t in_b = static_cast<size_t>(o == "all_gather" ? piece : count) * 4;
            size_t out_b = static_cast<size_t>(o == "reduce_scatter" ? piece : count) * 4;
            auto* in = static_cast<float*>(be->alloc(in_b));
            auto* out = static_cast<float*>(be->alloc(out_b));
            for (size_t i = 0; i < in_b / 4; ++i) in[i] = static_cast<float>((i + me) % 7);
            auto bare = [&] {
                if (o == "all_reduce") MPI_Allreduce(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else if (o == "all_gather")
                    MPI_Allgather(in, static_cast<int>(piece), MPI_FLOAT, out, static_cast<int>(piece), MPI_FLOAT, MPI_COMM_WORLD);
                else MPI_Reduce_scatter_block(in, out, static_cast<int>(piece), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            };
            auto zero = [&] {
                Record r{now_us(), 0};
                if (o == "all_reduce") be->all_reduce(in, out, count, DType::FP32, ReduceOp::Sum);
                else if (o == "all_gather") be->all_gather(in, out, piece, DType::FP32);
                else be->reduce_scatter(in, out, piece, DType::FP32, ReduceOp::Sum);
                r.end_us = now_us();
                records.push_back(r);
            };
            auto sample = [&](auto&& fn) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now_us();
                fn();
                double dt = now_us() - t0, worst = 0;
                MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                return worst;
            };
            for (int w = 0; w < 3; ++w) {
                bare();
                zero();
            }
            std::vector<double> tb, tz;
            for (int r = 0; r < reps; ++r) {
                if (r % 2) {
                    tb.push_back(sample(bare));
                    tz.push_back(sample(zero));
                } else {
                    tz.push_back(sample(zero));
                    tb.push_back(sample(bare));
                }
            }
            double mb = median(tb), mz = median(tz), ratio = mz / mb;
            bool target = bytes >= (1 << 20);
            if (target && ratio > 1.05) all_ok = false;
            if (me == 0)
                std::printf("  %-15s %12lld %14.1f %14.1f %8.3f %s\n", op, static_cast<long long>(bytes), mb, mz, ratio,
                            target ? (ratio <= 1.05 ? "ok" : "OVER") : "-");
            be->release(in, in_b);
            be->release(out, out_b);
        }
    }
    if (me == 0) std::printf("# %s\n", all_ok ? "all sizes >= 1 MiB within 1.05x" : "some sizes >= 1 MiB over 1.05x");
    std::fflush(stdout);
    finalize_mpi();
    return 0;
}
