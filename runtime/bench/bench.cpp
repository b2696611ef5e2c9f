#include "collbench/bench.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <unistd.h>

#include "backends/dtype.hpp"
#include "backends/host_cache.hpp"
#include "schedule/collective_table.hpp"

namespace zerorun {

using zerosim::Error;
using zerosim::OpKind;
using zerosim::Result;

namespace {

// Expected element i of rank `me`'s output, every rank's input being check_pattern_value (its
// sums are exact, so #wrong is an exact comparison, as nccl-tests' is for integer-valued data).
double expected_value(OpKind op, DType t, ReduceOp redop, int n, int me, int root, int64_t recv_count, int64_t i) {
    auto combine = [&](int64_t idx) {
        double acc = redop == ReduceOp::Max ? -1e300 : 0.0;
        for (int r = 0; r < n; ++r) {
            double v = check_pattern_value(t, r, idx);
            acc = redop == ReduceOp::Max ? std::max(acc, v) : acc + v;
        }
        return acc;
    };
    switch (op) {
        case OpKind::AllReduce:
        case OpKind::Reduce: return combine(i);
        case OpKind::Broadcast: return check_pattern_value(t, root, i);
        case OpKind::AllGather: {
            int64_t chunk = recv_count / n;   // rank r's input lands at r * chunk
            return check_pattern_value(t, static_cast<int>(i / chunk), i % chunk);
        }
        case OpKind::ReduceScatter: return combine(static_cast<int64_t>(me) * recv_count + i);
        default: return 0.0;
    }
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double sum_over_ranks(Backend& be, double v) {
    double out = v;
    be.all_reduce(&out, &out, 1, DType::FP64, ReduceOp::Sum);
    return out;
}

}  // namespace

bool bench_op_known(const std::string& op) { return zerosim::collective_named(op).has_value(); }

int64_t bench_wrong_total(const std::vector<zerosim::NcclTestsRow>& rows) {
    int64_t total = 0;
    for (const auto& r : rows) total += std::max<int64_t>(0, r.wrong) + std::max<int64_t>(0, r.inplace_wrong);
    return total;
}

Result<DType> parse_bench_dtype(const std::string& text) {
    if (text == "float") return DType::FP32;
    if (text == "half") return DType::FP16;
    if (text == "bfloat16") return DType::BF16;
    if (text == "double") return DType::FP64;
    if (text == "int64") return DType::INT64;
    if (text == "uint8") return DType::UINT8;
    if (auto t = zerosim::dtype_from_name(text)) return *t;
    return Error{"", "--dtype", "expected float, half, bfloat16, double, int64 or uint8, found '" + text + "'"};
}

const char* nccl_type_name(DType t) {
    switch (t) {
        case DType::FP32: return "float";
        case DType::FP16: return "half";
        case DType::BF16: return "bfloat16";
        case DType::FP64: return "double";
        case DType::INT64: return "int64";
        case DType::UINT8: return "uint8";
    }
    return "?";
}

// zerorun's rows as earlier releases printed them: one column wider than nccl-tests' times, one
// decimal from 100 µs, "   N/A" when results are not checked. Kept so that scripts reading them
// by column do not break.
const zerosim::NcclTestsLayout kZerorunLayout{.time_width = 8, .one_decimal_from_us = 100, .not_checked = "   N/A"};

namespace {

// One column of one size (out of place, or in place): its buffers and the calls on them.
struct BenchColumn {
    Backend& be;
    const BenchOptions& opt;
    const OpKind kind;
    const int me;
    const int64_t count, send_n, recv_n;
    const size_t send_b, recv_b, big;
    const int ip;          // 1: in place
    char*& sendbuf;        // the size's buffers (fresh buffers: allocated anew before each call)
    char*& recvbuf;
    char* in = nullptr;
    char* outp = nullptr;

    // In-place buffers follow torch/NCCL: all_gather's input is the rank's chunk of the output,
    // reduce_scatter's output is the rank's chunk of the input.
    void place() {
        in = sendbuf;
        outp = recvbuf;
        if (!ip) return;
        if (kind == OpKind::AllGather) in = recvbuf + static_cast<size_t>(me) * send_b;
        else if (kind == OpKind::ReduceScatter) { in = recvbuf; outp = recvbuf + static_cast<size_t>(me) * recv_b; }
        else in = outp = recvbuf;
    }
    void fill() {
        for (int64_t i = 0; i < send_n; ++i) store_element(in, opt.dtype, i, check_pattern_value(opt.dtype, me, i));
        if (kind == OpKind::Broadcast && me != opt.root && !ip)
            std::memset(recvbuf, 0xff, recv_b);   // a broadcast must overwrite this
    }
    void launch() {
        switch (kind) {
            case OpKind::AllReduce: be.all_reduce(in, outp, count, opt.dtype, opt.redop); break;
            case OpKind::AllGather: be.all_gather(in, outp, send_n, opt.dtype); break;
            case OpKind::ReduceScatter: be.reduce_scatter(in, outp, recv_n, opt.dtype, opt.redop); break;
            case OpKind::Reduce: be.reduce(in, outp, count, opt.dtype, opt.redop, opt.root); break;
            case OpKind::Broadcast:
                // Out-of-place broadcast: the root's input is copied to its output first, as
                // ncclBroadcast does with distinct buffers.
                if (!ip && me == opt.root) std::memcpy(outp, in, send_b);
                be.broadcast(outp, count, opt.dtype, opt.root);
                break;
            default: break;
        }
        if (opt.on_call) opt.on_call(static_cast<int64_t>(send_b));
    }
    // One call on fresh inputs, its result compared element by element; #wrong summed over ranks.
    int64_t wrong_elements(int n) {
        int64_t wrong = 0;
        fill();
        launch();
        if (me == opt.test_corrupt_rank && recv_n > 0) store_element(outp, opt.dtype, 0, 99.0);
        bool has_output = !(kind == OpKind::Reduce && me != opt.root);
        if (has_output)
            for (int64_t i = 0; i < recv_n; ++i) {
                double want = round_to(opt.dtype, expected_value(kind, opt.dtype, opt.redop, n, me, opt.root, recv_n, i));
                if (load_element(outp, opt.dtype, i) != want) ++wrong;
            }
        return static_cast<int64_t>(sum_over_ranks(be, static_cast<double>(wrong)));
    }
    // As zerorun's executor gives each op of a step its buffers (executor/memory.cpp Buffer):
    // allocated, zeroed, then filled just before the call. Zero only what the call uses, as the
    // executor allocates only that: an in-place call its one buffer, an out-of-place one its input
    // and output (a reduce_scatter's output is S/p, not S). Lines written and unused would be
    // written back during the call.
    void fresh_buffers() {
        be.release(sendbuf, send_b);
        be.release(recvbuf, big);
        sendbuf = static_cast<char*>(be.alloc(send_b));
        recvbuf = static_cast<char*>(be.alloc(big));
        if (ip) {
            std::memset(recvbuf, 0, big);
        } else {
            std::memset(sendbuf, 0, send_b);
            std::memset(recvbuf, 0, recv_b);
        }
        place();
        fill();
    }
    // Per call, the shortest time over ranks: the rank that left the barrier last waited for
    // nobody, so its time is the collective's own (see zerorun --op-time). Seconds per call.
    double fenced_seconds(HostCacheEvictor& evict) {
        std::vector<double> neg(static_cast<size_t>(opt.iters));
        for (int it = 0; it < opt.iters; ++it) {
            evict.evict();
            if (opt.fresh_buffers) fresh_buffers();
            be.barrier();
            double t0 = now_s();
            launch();
            neg[static_cast<size_t>(it)] = t0 - now_s();
        }
        be.all_reduce(neg.data(), neg.data(), opt.iters, DType::FP64, ReduceOp::Max);
        double dt = 0.0;
        if (opt.median_of_calls) {
            std::sort(neg.begin(), neg.end());
            size_t k = neg.size() / 2;
            dt = -(neg.size() % 2 ? neg[k] : (neg[k - 1] + neg[k]) / 2);
        } else {
            for (double v : neg) dt -= v;
            dt /= opt.iters;
        }
        return dt;
    }
    // nccl-tests' loop: back-to-back calls after one barrier. Seconds per call on this rank.
    double back_to_back_seconds() {
        be.barrier();
        double t0 = now_s();
        for (int it = 0; it < opt.iters; ++it) launch();
        return (now_s() - t0) / opt.iters;
    }
};

// The table's head: nccl-tests' parameter line, then how zerorun ran it.
void print_bench_header(std::ostream& out, Backend& be, const BenchOptions& opt, int warmups) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d iters: %d "
                  "agg iters: 1 validation: %d graph: 0\n#\n",
                  static_cast<long long>(opt.min_bytes), static_cast<long long>(opt.max_bytes),
                  static_cast<long long>(opt.factor), warmups, opt.iters, opt.check ? 1 : 0);
    out << line;
    // The collective first: calibrate reads it from here (formats/nccl_tests.hpp bench_table_collective).
    out << "# zerorun bench: " << opt.op << ", backend " << be.name() << ", " << be.world() << " ranks, host memory";
    if (opt.fenced) {
        out << "; fenced calls (a barrier before each; time = shortest over ranks, "
            << (opt.median_of_calls ? "median" : "mean") << " over calls)";
        if (opt.evict_bytes > 0) out << "; caches evicted with " << (opt.evict_bytes >> 20) << " MiB between calls";
        if (opt.fresh_buffers) out << "; buffers allocated, zeroed and filled before each call";
    }
    out << "\n#\n";
    zerosim::write_nccl_tests_header(out);
    out.flush();
}

// The sweep's state across sizes: the evictor and the bus bandwidth averaged in the footer.
struct BenchSweep {
    Backend& be;
    const BenchOptions& opt;
    const zerosim::CollectiveInfo& coll;
    HostCacheEvictor evict;
    int warmups = 0;
    double bw_sum = 0;
    int bw_count = 0;

    // One row: both columns of `count` elements.
    zerosim::NcclTestsRow row_of(int64_t count) {
        const int n = be.world(), me = be.rank();
        const int es = zerosim::dtype_size(opt.dtype);
        const zerosim::CollectiveCounts per_rank = coll.per_rank_counts(count, n);
        const size_t send_b = static_cast<size_t>(per_rank.send) * es, recv_b = static_cast<size_t>(per_rank.recv) * es;
        const size_t big = std::max(send_b, recv_b);
        char* sendbuf = static_cast<char*>(be.alloc(send_b));
        char* recvbuf = static_cast<char*>(be.alloc(big));
        zerosim::NcclTestsRow row;
        row.bytes = static_cast<int64_t>(big);
        row.count = count;
        row.type = nccl_type_name(opt.dtype);
        row.redop = coll.reduces ? zerosim::reduce_op_name(opt.redop) : "none";
        row.root = coll.rooted ? opt.root : -1;
        double time_us[2] = {0, 0}, algbw[2] = {0, 0}, busbw[2] = {0, 0};
        int64_t wrong_of[2] = {-1, -1};
        // With fresh buffers, the column DeepSpeed calls (schedule/collective_table.hpp) is timed
        // first, so that it is the first call at its size, as a step's op is: OpenMPI's first call
        // at a size allocates its scratch anew (coll_base_reduce_scatter_block.c, coll_base_allreduce.c)
        // and measured 1.2-1.5x the second (2 ranks, stage 3's 2-4 MiB reduce_scatter).
        const int first = opt.fenced && opt.fresh_buffers && coll.deepspeed_in_place ? 1 : 0;
        for (int ip : {first, 1 - first}) {
            BenchColumn col{be, opt, coll.kind, me, count, per_rank.send, per_rank.recv, send_b, recv_b, big, ip, sendbuf, recvbuf};
            col.place();
            // Check first (one call on fresh inputs), then time back-to-back calls.
            const int64_t wrong = opt.check ? col.wrong_elements(n) : 0;
            col.fill();
            for (int w = 0; w < warmups; ++w) col.launch();
            const double dt = opt.fenced ? col.fenced_seconds(evict) : col.back_to_back_seconds();
            double us = opt.fenced ? dt * 1e6 : sum_over_ranks(be, dt * 1e6) / n;
            time_us[ip] = us;
            algbw[ip] = us > 0 ? static_cast<double>(row.bytes) / (us * 1e-6) / 1e9 : 0.0;
            busbw[ip] = algbw[ip] * coll.bus_factor(n);
            wrong_of[ip] = opt.check ? wrong : -1;
            bw_sum += busbw[ip];
            ++bw_count;
        }
        be.release(sendbuf, send_b);
        be.release(recvbuf, big);
        row.time_us = time_us[0];
        row.algbw_gbs = algbw[0];
        row.busbw_gbs = busbw[0];
        row.wrong = wrong_of[0];
        row.inplace_time_us = time_us[1];
        row.inplace_algbw_gbs = algbw[1];
        row.inplace_busbw_gbs = busbw[1];
        row.inplace_wrong = wrong_of[1];
        return row;
    }
};

}  // namespace

std::vector<zerosim::NcclTestsRow> run_bench(Backend& be, const BenchOptions& opt, std::ostream& out) {
    const zerosim::CollectiveInfo& coll = zerosim::collective_info(*zerosim::collective_named(opt.op));
    const int n = be.world();
    const int es = zerosim::dtype_size(opt.dtype);
    const bool print = be.rank() == 0;
    BenchSweep sweep{be, opt, coll, HostCacheEvictor(opt.fenced ? opt.evict_bytes : 0)};
    // Fresh buffers: no warm-up call, so that each timed call is the first at its size (below).
    sweep.warmups = opt.fenced && opt.fresh_buffers ? 0 : opt.warmup;
    if (print) print_bench_header(out, be, opt, sweep.warmups);
    std::vector<zerosim::NcclTestsRow> rows;
    for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
         bytes = opt.factor > 1 ? bytes * opt.factor : bytes + std::max<int64_t>(1, -opt.factor)) {
        // Whole elements, and a multiple of the rank count where the op splits the buffer.
        int64_t count = bytes / es;
        if (coll.splits_buffer) count = count / n * n;
        if (count == 0) continue;
        rows.push_back(sweep.row_of(count));
        if (print) {
            zerosim::write_nccl_tests_row(out, rows.back(), kZerorunLayout);
            out.flush();
        }
    }
    if (print) {
        char line[64];
        int64_t total_wrong = bench_wrong_total(rows);
        std::snprintf(line, sizeof line, "%g", sweep.bw_count ? sweep.bw_sum / sweep.bw_count : 0.0);
        zerosim::write_nccl_tests_footer(out, std::to_string(total_wrong) + (total_wrong ? " FAILED" : " OK"), line);
        out << "#\n";
        out.flush();
    }
    return rows;
}

}  // namespace zerorun
