// The NCCL backend: one process per GPU, collectives on a dedicated CUDA stream (nccl_backend.hpp).
//
// Callers (the executor, bench) hand host buffers: they are copied to device scratch buffers on the
// same stream, reduced there, and copied back before the call returns, so every call is blocking as
// backend.hpp requires. Device buffers are used in place. The wait polls the stream's completion
// event and ncclCommGetAsyncError; an NCCL error or a wait longer than the timeout aborts the
// communicator and ends the job (exit 3) with one line.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends/nccl_backend.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

namespace {

[[noreturn]] void throw_at(const char* file, int line, const char* call, const char* text) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + text);
}

#define ZR_CUDA_CHECK(call)                                                           \
    do {                                                                              \
        cudaError_t zr_e_ = (call);                                                   \
        if (zr_e_ != cudaSuccess) throw_at(__FILE__, __LINE__, #call, cudaGetErrorString(zr_e_)); \
    } while (0)

#define ZR_NCCL_CHECK(call)                                                           \
    do {                                                                              \
        ncclResult_t zr_r_ = (call);                                                  \
        if (zr_r_ != ncclSuccess && zr_r_ != ncclInProgress)                          \
            throw_at(__FILE__, __LINE__, #call, ncclGetErrorString(zr_r_));           \
    } while (0)

// Every rank passes its own error (empty: fine). Returns when all are fine; otherwise throws
// NcclInitError on every rank, with the cause on the lowest failing rank only.
void agree(Backend& mpi, const std::string& err) {
    int world = mpi.world(), me = mpi.rank();
    int mine = err.empty() ? world : me, first = world;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == world) return;
    std::string text;
    if (me == first) text = (world > 1 ? "rank " + std::to_string(me) + ": " : std::string()) + err;
    throw NcclInitError(text);
}

struct Scratch {
    void* p = nullptr;
    size_t n = 0;
};

class NcclBackend final : public Backend {
  public:
    NcclBackend(Backend& mpi, int device, ncclComm_t comm, double timeout_s)
        : mpi_(mpi), device_(device), comm_(comm), timeout_s_(timeout_s), cur_(comm), cur_rank_(mpi.rank()),
          cur_size_(mpi.world()) {
        ZR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        ZR_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    }
    ~NcclBackend() override {
        if (!aborted_) {
            cudaStreamSynchronize(stream_);
            for (ncclComm_t g : groups_) ncclCommDestroy(g);
            ncclCommDestroy(comm_);
        }
        for (Scratch* s : {&send_, &recv_})
            if (s->p) cudaFree(s->p);
        if (done_) cudaEventDestroy(done_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    NcclBackend(const NcclBackend&) = delete;
    NcclBackend& operator=(const NcclBackend&) = delete;

    std::string name() const override { return "nccl"; }
    int rank() const override { return mpi_.rank(); }
    int world() const override { return mpi_.world(); }

    // Pinned host memory: host-writable like the MPI backend's, and fast to stage.
    void* alloc(size_t bytes) override {
        void* p = nullptr;
        if (cudaMallocHost(&p, bytes ? bytes : 64) != cudaSuccess) {
            cudaGetLastError();
            throw std::bad_alloc();
        }
        return p;
    }
    void release(void* p, size_t) override {
        if (p) cudaFreeHost(p);
    }

    void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) override {
        guard("all_reduce", [&] {
            size_t b = bytes(count, t);
            const void* ds = dev_in(send, b, send_);
            void* dr = dev_out(recv, b, recv_);
            launch([&] { return ncclAllReduce(ds, dr, to_size(count), nccl_dtype(t), nccl_redop(op), cur_, stream_); });
            dev_back(recv, dr, b);
        });
    }
    void all_gather(const void* send, void* recv, int64_t count, DType t) override {
        guard("all_gather", [&] {
            size_t b = bytes(count, t);
            const void* ds = dev_in(send, b, send_);
            void* dr = dev_out(recv, b * cur_size_, recv_);
            launch([&] { return ncclAllGather(ds, dr, to_size(count), nccl_dtype(t), cur_, stream_); });
            dev_back(recv, dr, b * cur_size_);
        });
    }
    void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType t, ReduceOp op) override {
        guard("reduce_scatter", [&] {
            size_t b = bytes(recv_count, t);
            const void* ds = dev_in(send, b * cur_size_, send_);
            void* dr = dev_out(recv, b, recv_);
            launch([&] {
                return ncclReduceScatter(ds, dr, to_size(recv_count), nccl_dtype(t), nccl_redop(op), cur_, stream_);
            });
            dev_back(recv, dr, b);
        });
    }
    void broadcast(void* buf, int64_t count, DType t, int root) override {
        guard("broadcast", [&] {
            size_t b = bytes(count, t);
            void* d = dev_out(buf, b, recv_);
            if (d != buf && cur_rank_ == root)
                ZR_CUDA_CHECK(cudaMemcpyAsync(d, buf, b, cudaMemcpyHostToDevice, stream_));
            launch([&] { return ncclBroadcast(d, d, to_size(count), nccl_dtype(t), root, cur_, stream_); });
            dev_back(buf, d, b);
        });
    }
    void reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op, int root) override {
        guard("reduce", [&] {
            size_t b = bytes(count, t);
            const void* ds = dev_in(send, b, send_);
            bool out = cur_rank_ == root && recv;
            void* dr = out ? dev_out(recv, b, recv_) : scratch(recv_, b);
            launch([&] { return ncclReduce(ds, dr, to_size(count), nccl_dtype(t), nccl_redop(op), root, cur_, stream_); });
            if (out) dev_back(recv, dr, b);
        });
    }
    void barrier() override {
        if (cur_ != comm_) {
            // A sub-group's barrier: MPI's is the world's, so a one-element all_reduce on the group.
            guard("barrier", [&] {
                void* d = scratch(recv_, sizeof(float));
                launch([&] { return ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, cur_, stream_); });
            });
            return;
        }
        guard("barrier", [&] { ZR_CUDA_CHECK(cudaEventRecord(done_, stream_)); });
        mpi_.barrier();
    }
    // NCCL has no all_to_all call: one grouped send and receive per member (what torch's
    // ProcessGroupNCCL does for all_to_all_single).
    void all_to_all(const void* send, void* recv, int64_t count, DType t) override {
        guard("all_to_all", [&] {
            size_t b = bytes(count, t);
            const char* ds = static_cast<const char*>(dev_in(send, b * cur_size_, send_));
            char* dr = static_cast<char*>(dev_out(recv, b * cur_size_, recv_));
            ZR_NCCL_CHECK(ncclGroupStart());
            for (int j = 0; j < cur_size_; ++j) {
                ZR_NCCL_CHECK(ncclSend(ds + j * b, to_size(count), nccl_dtype(t), j, cur_, stream_));
                ZR_NCCL_CHECK(ncclRecv(dr + j * b, to_size(count), nccl_dtype(t), j, cur_, stream_));
            }
            ZR_NCCL_CHECK(ncclGroupEnd());
            dev_back(recv, dr, b * cur_size_);
        });
    }

    // Point-to-point on the world communicator (peer is a world rank), as torch's
    // ProcessGroupNCCL runs dist.send/recv: ncclSend/ncclRecv on the stream, waited for.
    void send(const void* buf, int64_t count, DType t, int peer) override {
        guard("send", [&] {
            size_t b = bytes(count, t);
            const void* ds = dev_in(buf, b, send_);
            launch([&] { return ncclSend(ds, to_size(count), nccl_dtype(t), peer, comm_, stream_); });
        });
    }
    void recv(void* buf, int64_t count, DType t, int peer) override {
        guard("recv", [&] {
            size_t b = bytes(count, t);
            void* dr = dev_out(buf, b, recv_);
            launch([&] { return ncclRecv(dr, to_size(count), nccl_dtype(t), peer, comm_, stream_); });
            dev_back(buf, dr, b);
        });
    }

    // Sub-communicators (hpZ, MiCS, qgZ groups): ncclCommSplit of the world communicator, key =
    // world rank so members keep ascending order (as the MPI backend's MPI_Comm_split).
    int split_group(int color) override {
        ncclComm_t c = nullptr;
        guard("ncclCommSplit", [&] { ZR_NCCL_CHECK(ncclCommSplit(comm_, color, rank(), &c, nullptr)); });
        groups_.push_back(c);
        return static_cast<int>(groups_.size()) - 1;
    }
    void use_group(int handle) override {
        cur_ = handle < 0 ? comm_ : groups_.at(static_cast<size_t>(handle));
        ZR_NCCL_CHECK(ncclCommUserRank(cur_, &cur_rank_));
        ZR_NCCL_CHECK(ncclCommCount(cur_, &cur_size_));
    }

    std::string gather_text_to_root(const std::string& mine) override { return mpi_.gather_text_to_root(mine); }

    [[noreturn]] void abort(int code) override {
        if (!aborted_) {
            aborted_ = true;
            for (ncclComm_t g : groups_) ncclCommAbort(g);
            ncclCommAbort(comm_);
        }
        mpi_.abort(code);
        std::_Exit(code);   // not reached: MPI's abort ends the process
    }

  private:
    static size_t bytes(int64_t count, DType t) {
        if (count < 0) throw std::runtime_error("negative element count " + std::to_string(count));
        return static_cast<size_t>(count) * zerosim::dtype_size(t);
    }
    static size_t to_size(int64_t count) { return static_cast<size_t>(count); }

    static bool is_device(const void* p) {
        if (!p) return false;
        cudaPointerAttributes a{};
        if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
    }
    void* scratch(Scratch& s, size_t b) {
        if (b == 0) b = 1;
        if (s.n < b) {
            if (s.p) ZR_CUDA_CHECK(cudaFree(s.p));
            s.p = nullptr;
            s.n = 0;
            size_t n = 1 << 20;
            while (n < b) n *= 2;
            ZR_CUDA_CHECK(cudaMalloc(&s.p, n));
            s.n = n;
        }
        return s.p;
    }
    const void* dev_in(const void* p, size_t b, Scratch& s) {
        if (is_device(p)) return p;
        void* d = scratch(s, b);
        if (b) ZR_CUDA_CHECK(cudaMemcpyAsync(d, p, b, cudaMemcpyHostToDevice, stream_));
        return d;
    }
    void* dev_out(void* p, size_t b, Scratch& s) { return is_device(p) ? p : scratch(s, b); }
    void dev_back(void* host, const void* dev, size_t b) {
        if (host != dev && b) ZR_CUDA_CHECK(cudaMemcpyAsync(host, dev, b, cudaMemcpyDeviceToHost, stream_));
    }
    template <class F>
    void launch(F call) {
        ZR_NCCL_CHECK(call());
    }

    // Runs one call's enqueues, then waits for the stream; any failure ends the job.
    template <class F>
    void guard(const char* what, F body) {
        try {
            body();
            ZR_CUDA_CHECK(cudaEventRecord(done_, stream_));
            wait(what);
        } catch (const std::exception& e) {
            fail(std::string(what) + ": " + e.what());
        }
    }

    void wait(const char* what) {
        auto t0 = std::chrono::steady_clock::now();
        for (int spin = 0;; ++spin) {
            cudaError_t q = cudaEventQuery(done_);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady) throw_at(__FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(q));
            ncclResult_t async = ncclSuccess;
            ZR_NCCL_CHECK(ncclCommGetAsyncError(cur_, &async));
            if (async != ncclSuccess && async != ncclInProgress)
                throw std::runtime_error(std::string("NCCL asynchronous error: ") + ncclGetErrorString(async) + " (" +
                                         ncclGetLastError(cur_) + ")");
            double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (timeout_s_ > 0 && waited > timeout_s_)
                throw std::runtime_error("timed out after " + std::to_string(static_cast<int>(waited)) +
                                         " s waiting for " + what + " (a peer is missing or stuck)");
            if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
            else std::this_thread::yield();
        }
    }

    [[noreturn]] void fail(const std::string& what) {
        std::fprintf(stderr, "zerorun: error: rank %d: NCCL backend (device %d): %s\n", rank(), device_, what.c_str());
        std::fflush(stderr);
        abort(3);
    }

    Backend& mpi_;
    int device_ = -1;
    ncclComm_t comm_ = nullptr;
    double timeout_s_ = 0;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t done_ = nullptr;
    Scratch send_, recv_;
    bool aborted_ = false;
    // The communicator the collectives run on (use_group): comm_ or one of groups_; this rank in it.
    ncclComm_t cur_ = nullptr;
    int cur_rank_ = 0, cur_size_ = 1;
    std::vector<ncclComm_t> groups_;
};

}  // namespace

ncclDataType_t nccl_dtype(DType t) {
    switch (t) {
        case DType::FP32: return ncclFloat32;
        case DType::BF16: return ncclBfloat16;
        case DType::FP16: return ncclFloat16;
        case DType::FP64: return ncclFloat64;
        case DType::INT64: return ncclInt64;
        case DType::UINT8: return ncclUint8;
    }
    throw std::invalid_argument("no NCCL type for this dtype");
}

ncclRedOp_t nccl_redop(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return ncclSum;
        case ReduceOp::Max: return ncclMax;
        case ReduceOp::None: break;
    }
    throw std::invalid_argument("a reducing collective needs a reduce op (sum or max)");
}

std::string gpu_unavailable_reason() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (e == cudaSuccess && n > 0) return "";
    if (e == cudaSuccess || e == cudaErrorNoDevice) return "no CUDA device visible";
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cudaGetLastError();
    auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    if (e == cudaErrorInsufficientDriver) {
        if (driver == 0) return "no CUDA device visible: no NVIDIA driver (libcuda) found";
        return "CUDA driver too old: it supports CUDA " + ver(driver) + ", this build needs " + ver(runtime);
    }
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
}

std::unique_ptr<Backend> make_nccl_backend(Backend& mpi, double timeout_s) {
    const int me = mpi.rank(), world = mpi.world();
    int lr = local_rank(MPI_COMM_WORLD);   // collective when the launcher sets no variable
    int device = -1;
    std::string err;
    try {
        err = gpu_unavailable_reason();
        if (err.empty()) {
            int n = 0;
            ZR_CUDA_CHECK(cudaGetDeviceCount(&n));
            device = select_device(lr, n);
            ZR_CUDA_CHECK(cudaSetDevice(device));
            ZR_CUDA_CHECK(cudaFree(nullptr));   // creates the context now, not in the first op
        }
    } catch (const std::exception& e) {
        err = e.what();
    }
    agree(mpi, err);

    ncclUniqueId id{};
    err.clear();
    if (me == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) err = std::string("NCCL init error: ncclGetUniqueId: ") + ncclGetErrorString(r);
    }
    agree(mpi, err);
    broadcast_unique_id(&id, 0, MPI_COMM_WORLD);

    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, world, id, me);
    if (r != ncclSuccess)
        err = std::string("NCCL init error: ncclCommInitRank: ") + ncclGetErrorString(r) +
              (comm ? std::string(" (") + ncclGetLastError(comm) + ")" : std::string());
    try {
        agree(mpi, err);
        return std::make_unique<NcclBackend>(mpi, device, comm, timeout_s);
    } catch (...) {
        if (comm) ncclCommAbort(comm);
        throw;
    }
}

}  // namespace zerorun
