#include "collbench/bench.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <unistd.h>

#include "backends/dtype.hpp"

namespace zerorun {

using zerosim::Error;
using zerosim::Result;

namespace {

// Input element i of rank r: small integers, so sums over any number of ranks up to ~50 are
// exact in every type (bf16 holds integers exactly up to 256), whatever order MPI adds them in.
// #wrong is then an exact comparison, as nccl-tests' is for integer-valued data.
double input_value(DType t, int r, int64_t i) {
    int64_t v = (static_cast<int64_t>(r) * 7 + i * 3) % 11;
    return t == DType::UINT8 ? static_cast<double>(v % 5) : static_cast<double>(v - 5);
}

struct Collective {
    const char* name;
    bool reduces;          // prints a redop
    bool rooted;           // prints the root
    double bus_factor(int n) const {
        std::string s = name;
        if (s == "all_reduce") return 2.0 * (n - 1) / n;
        if (s == "all_gather" || s == "reduce_scatter") return static_cast<double>(n - 1) / n;
        return 1.0;
    }
    // Per-rank element counts of the send and receive buffers for a total of `count` elements
    // (nccl-tests' GetCollByteCount): all_gather sends count/n, reduce_scatter receives count/n.
    std::function<void(int64_t count, int n, int64_t& send, int64_t& recv)> sizes;
};

const std::vector<Collective>& collectives() {
    static const std::vector<Collective> table = {
        {"all_reduce", true, false, [](int64_t c, int, int64_t& s, int64_t& r) { s = r = c; }},
        {"all_gather", false, false, [](int64_t c, int n, int64_t& s, int64_t& r) { s = c / n; r = s * n; }},
        {"reduce_scatter", true, false, [](int64_t c, int n, int64_t& s, int64_t& r) { r = c / n; s = r * n; }},
        {"broadcast", false, true, [](int64_t c, int, int64_t& s, int64_t& r) { s = r = c; }},
        {"reduce", true, true, [](int64_t c, int, int64_t& s, int64_t& r) { s = r = c; }},
    };
    return table;
}

const Collective* find(const std::string& op) {
    for (const auto& c : collectives())
        if (op == c.name) return &c;
    return nullptr;
}

// Expected element i of rank `me`'s output.
double expected_value(const std::string& op, DType t, ReduceOp redop, int n, int me, int root, int64_t recv_count, int64_t i) {
    auto combine = [&](int64_t idx) {
        double acc = redop == ReduceOp::Max ? -1e300 : 0.0;
        for (int r = 0; r < n; ++r) {
            double v = input_value(t, r, idx);
            acc = redop == ReduceOp::Max ? std::max(acc, v) : acc + v;
        }
        return acc;
    };
    if (op == "all_reduce") return combine(i);
    if (op == "reduce") return combine(i);
    if (op == "broadcast") return input_value(t, root, i);
    if (op == "all_gather") {
        int64_t chunk = recv_count / n;   // rank r's input lands at r * chunk
        return input_value(t, static_cast<int>(i / chunk), i % chunk);
    }
    if (op == "reduce_scatter") return combine(static_cast<int64_t>(me) * recv_count + i);
    return 0.0;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Between two ops of a training step the rank's compute walks through far more memory than its
// caches hold, so an op finds its buffers (and the MPI library's own) cold. Writing one byte per
// cache line of a large buffer puts a bench call in the same state; plain stores, not memset,
// which may bypass the caches for large sizes.
void evict_caches(std::vector<unsigned char>& scratch) {
    for (size_t i = 0; i < scratch.size(); i += 64) scratch[i] = static_cast<unsigned char>(scratch[i] + 1);
}

double sum_over_ranks(Backend& be, double v) {
    double out = v;
    be.all_reduce(&out, &out, 1, DType::FP64, ReduceOp::Sum);
    return out;
}

}  // namespace

bool bench_op_known(const std::string& op) { return find(op) != nullptr; }

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

std::vector<BenchRow> run_bench(Backend& be, const BenchOptions& opt, std::ostream& out) {
    const Collective& coll = *find(opt.op);
    const int n = be.world(), me = be.rank();
    const int es = zerosim::dtype_size(opt.dtype);
    const bool print = me == 0;
    char line[512];
    if (print) {
        std::snprintf(line, sizeof line,
                      "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d iters: %d "
                      "agg iters: 1 validation: %d graph: 0\n#\n",
                      static_cast<long long>(opt.min_bytes), static_cast<long long>(opt.max_bytes),
                      static_cast<long long>(opt.factor), opt.warmup, opt.iters, opt.check ? 1 : 0);
        out << line;
        out << "# zerorun bench: backend " << be.name() << ", " << n << " ranks, host memory";
        if (opt.fenced) {
            out << "; fenced calls (a barrier before each; time = shortest over ranks, mean over calls)";
            if (opt.evict_bytes > 0) out << "; caches evicted with " << (opt.evict_bytes >> 20) << " MiB between calls";
        }
        out << "\n#\n";
        out << "#                                                              out-of-place                       in-place          \n";
        out << "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
        out << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
        out.flush();
    }
    std::vector<unsigned char> evict(opt.fenced ? static_cast<size_t>(std::max<int64_t>(0, opt.evict_bytes)) : 0, 0);
    std::vector<BenchRow> rows;
    double bw_sum = 0;
    int bw_count = 0;
    for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
         bytes = opt.factor > 1 ? bytes * opt.factor : bytes + std::max<int64_t>(1, -opt.factor)) {
        // Whole elements, and a multiple of the rank count where the op splits the buffer.
        int64_t count = bytes / es;
        if (coll.name == std::string("all_gather") || coll.name == std::string("reduce_scatter")) count = count / n * n;
        if (count == 0) continue;
        int64_t send_n = 0, recv_n = 0;
        coll.sizes(count, n, send_n, recv_n);
        const size_t send_b = static_cast<size_t>(send_n) * es, recv_b = static_cast<size_t>(recv_n) * es;
        // In-place buffers follow torch/NCCL: all_gather's input is the rank's chunk of the output,
        // reduce_scatter's output is the rank's chunk of the input.
        const size_t big = std::max(send_b, recv_b);
        char* sendbuf = static_cast<char*>(be.alloc(send_b));
        char* recvbuf = static_cast<char*>(be.alloc(big));
        BenchRow row;
        row.bytes = static_cast<int64_t>(std::max(send_b, recv_b));
        row.count = count;
        for (int ip = 0; ip < 2; ++ip) {
            char* in = sendbuf;
            char* outp = recvbuf;
            if (ip) {
                if (coll.name == std::string("all_gather")) in = recvbuf + static_cast<size_t>(me) * send_b;
                else if (coll.name == std::string("reduce_scatter")) { in = recvbuf; outp = recvbuf + static_cast<size_t>(me) * recv_b; }
                else in = outp = recvbuf;
            }
            auto fill = [&] {
                for (int64_t i = 0; i < send_n; ++i) store_element(in, opt.dtype, i, input_value(opt.dtype, me, i));
                if (coll.name == std::string("broadcast") && me != opt.root && !ip)
                    std::memset(recvbuf, 0xff, recv_b);   // a broadcast must overwrite this
            };
            auto launch = [&] {
                const std::string op = coll.name;
                if (op == "all_reduce") be.all_reduce(in, outp, count, opt.dtype, opt.redop);
                else if (op == "all_gather") be.all_gather(in, outp, send_n, opt.dtype);
                else if (op == "reduce_scatter") be.reduce_scatter(in, outp, recv_n, opt.dtype, opt.redop);
                else if (op == "reduce") be.reduce(in, outp, count, opt.dtype, opt.redop, opt.root);
                else if (op == "broadcast") {
                    // Out-of-place broadcast: the root's input is copied to its output first, as
                    // ncclBroadcast does with distinct buffers.
                    if (!ip && me == opt.root) std::memcpy(outp, in, send_b);
                    be.broadcast(outp, count, opt.dtype, opt.root);
                }
            };
            // Check first (one call on fresh inputs), then time back-to-back calls.
            int64_t wrong = 0;
            if (opt.check) {
                fill();
                launch();
                if (me == opt.test_corrupt_rank && recv_n > 0) store_element(outp, opt.dtype, 0, 99.0);
                bool has_output = !(coll.name == std::string("reduce") && me != opt.root);
                if (has_output)
                    for (int64_t i = 0; i < recv_n; ++i) {
                        double want = round_to(opt.dtype, expected_value(opt.op, opt.dtype, opt.redop, n, me, opt.root, recv_n, i));
                        if (load_element(outp, opt.dtype, i) != want) ++wrong;
                    }
                wrong = static_cast<int64_t>(sum_over_ranks(be, static_cast<double>(wrong)));
            }
            fill();
            for (int w = 0; w < opt.warmup; ++w) launch();
            double dt = 0.0;
            if (opt.fenced) {
                // Per call, the shortest time over ranks: the rank that left the barrier last waited
                // for nobody, so its time is the collective's own (see zerorun --op-time).
                std::vector<double> neg(static_cast<size_t>(opt.iters));
                for (int it = 0; it < opt.iters; ++it) {
                    evict_caches(evict);
                    be.barrier();
                    double t0 = now_s();
                    launch();
                    neg[static_cast<size_t>(it)] = t0 - now_s();
                }
                be.all_reduce(neg.data(), neg.data(), opt.iters, DType::FP64, ReduceOp::Max);
                for (double v : neg) dt -= v;
                dt /= opt.iters;
            } else {
                be.barrier();
                double t0 = now_s();
                for (int it = 0; it < opt.iters; ++it) launch();
                dt = (now_s() - t0) / opt.iters;
            }
            double us = opt.fenced ? dt * 1e6 : sum_over_ranks(be, dt * 1e6) / n;
            row.time_us[ip] = us;
            row.algbw[ip] = us > 0 ? static_cast<double>(row.bytes) / (us * 1e-6) / 1e9 : 0.0;
            row.busbw[ip] = row.algbw[ip] * coll.bus_factor(n);
            row.wrong[ip] = opt.check ? wrong : -1;
            bw_sum += row.busbw[ip];
            ++bw_count;
        }
        be.release(sendbuf, send_b);
        be.release(recvbuf, big);
        rows.push_back(row);
        if (print) {
            auto fmt_time = [](double us) {
                char b[32];
                std::snprintf(b, sizeof b, us >= 10000 ? "%8.0f" : us >= 100 ? "%8.1f" : "%8.2f", us);
                return std::string(b);
            };
            auto wrong_s = [&](int64_t w) { return w < 0 ? std::string("   N/A") : std::to_string(w); };
            std::snprintf(line, sizeof line, "%12lld  %12lld  %8s  %6s  %6d  %s  %6.2f  %6.2f  %5s  %s  %6.2f  %6.2f  %5s\n",
                          static_cast<long long>(row.bytes), static_cast<long long>(row.count), nccl_type_name(opt.dtype),
                          coll.reduces ? zerosim::reduce_op_name(opt.redop) : "none", coll.rooted ? opt.root : -1,
                          fmt_time(row.time_us[0]).c_str(), row.algbw[0], row.busbw[0], wrong_s(row.wrong[0]).c_str(),
                          fmt_time(row.time_us[1]).c_str(), row.algbw[1], row.busbw[1], wrong_s(row.wrong[1]).c_str());
            out << line;
            out.flush();
        }
    }
    if (print) {
        int64_t total_wrong = 0;
        for (const auto& r : rows) total_wrong += std::max<int64_t>(0, r.wrong[0]) + std::max<int64_t>(0, r.wrong[1]);
        out << "# Out of bounds values : " << total_wrong << (total_wrong ? " FAILED" : " OK") << "\n";
        std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %g \n#\n", bw_count ? bw_sum / bw_count : 0.0);
        out << line;
        out.flush();
    }
    return rows;
}

}  // namespace zerorun
