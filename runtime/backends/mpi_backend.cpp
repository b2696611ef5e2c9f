// The MPI backend: host memory, one MPI process per rank.
//
// fp16 and bf16 have no MPI datatype, so they are defined here as 2-byte contiguous types with
// user reductions (MPI_Op_create) that add or take the max in fp32 and round back, element by
// element, the way a 16-bit ring reduction on a GPU accumulates.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "backends/backend.hpp"
#include "backends/dtype.hpp"

namespace zerorun {

namespace {

MPI_Datatype g_bf16 = MPI_DATATYPE_NULL;
MPI_Datatype g_fp16 = MPI_DATATYPE_NULL;
MPI_Op g_bf16_sum = MPI_OP_NULL, g_bf16_max = MPI_OP_NULL;
MPI_Op g_fp16_sum = MPI_OP_NULL, g_fp16_max = MPI_OP_NULL;

template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool Max>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
    auto* a = static_cast<const uint16_t*>(in);
    auto* b = static_cast<uint16_t*>(inout);
    for (int i = 0; i < *len; ++i) {
        float x = Load(a[i]), y = Load(b[i]);
        b[i] = Store(Max ? (x > y ? x : y) : x + y);
    }
}

MPI_Datatype mpi_type(DType t) {
    switch (t) {
        case DType::FP32: return MPI_FLOAT;
        case DType::FP64: return MPI_DOUBLE;
        case DType::INT64: return MPI_INT64_T;
        case DType::UINT8: return MPI_UINT8_T;
        case DType::BF16: return g_bf16;
        case DType::FP16: return g_fp16;
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType t, ReduceOp op) {
    bool max = op == ReduceOp::Max;
    if (t == DType::BF16) return max ? g_bf16_max : g_bf16_sum;
    if (t == DType::FP16) return max ? g_fp16_max : g_fp16_sum;
    return max ? MPI_MAX : MPI_SUM;
}

int to_int(int64_t count) {
    // MPI counts are int; the schedule never sends 2^31 elements in one op on host memory.
    if (count < 0 || count > INT_MAX)
        throw std::runtime_error("MPI backend: " + std::to_string(count) + " elements exceed MPI's int count");
    return static_cast<int>(count);
}

// Every MPI error ends up here instead of MPI's default abort: one clear line, then the job ends
// on every rank (MPI_Abort makes mpirun kill the others).
void on_mpi_error(MPI_Comm*, int* code, ...) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(*code, text, &len);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "zerorun: error: rank %d: MPI error: %.*s\n", rank, len, text);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

class MpiBackend final : public Backend {
  public:
    MpiBackend() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &world_);
        crank_ = rank_;
    }
    std::string name() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int world() const override { return world_; }

    void* alloc(size_t bytes) override {
        void* p = nullptr;
        if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) throw std::bad_alloc();
        return p;
    }
    void release(void* p, size_t) override { std::free(p); }

    void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) override {
        MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, to_int(count), mpi_type(t), mpi_op(t, op), comm_);
    }
    void all_gather(const void* send, void* recv, int64_t count, DType t) override {
        const char* mine = static_cast<const char*>(recv) + static_cast<size_t>(count) * crank_ * zerosim::dtype_size(t);
        bool in_place = send == mine;
        MPI_Allgather(in_place ? MPI_IN_PLACE : send, to_int(count), mpi_type(t), recv, to_int(count), mpi_type(t),
                      comm_);
    }
    void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType t, ReduceOp op) override {
        const char* mine = static_cast<const char*>(send) + static_cast<size_t>(recv_count) * crank_ * zerosim::dtype_size(t);
        if (recv == mine) {
            // MPI's in-place form reduces in the whole send buffer and leaves the result at its
            // start; torch's keeps it at the rank's own chunk, so move it there.
            void* buf = const_cast<void*>(send);
            MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, to_int(recv_count), mpi_type(t), mpi_op(t, op), comm_);
            if (crank_ != 0)
                std::memmove(recv, buf, static_cast<size_t>(recv_count) * zerosim::dtype_size(t));
        } else {
            MPI_Reduce_scatter_block(send, recv, to_int(recv_count), mpi_type(t), mpi_op(t, op), comm_);
        }
    }
    void broadcast(void* buf, int64_t count, DType t, int root) override {
        MPI_Bcast(buf, to_int(count), mpi_type(t), root, comm_);
    }
    void reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op, int root) override {
        const void* s = (send == recv && crank_ == root) ? MPI_IN_PLACE : send;
        MPI_Reduce(s, recv, to_int(count), mpi_type(t), mpi_op(t, op), root, comm_);
    }
    void barrier() override { MPI_Barrier(comm_); }
    void all_to_all(const void* send, void* recv, int64_t count, DType t) override {
        MPI_Alltoall(send, to_int(count), mpi_type(t), recv, to_int(count), mpi_type(t), comm_);
    }

    // On the world communicator (peer is a world rank); tag 0, so messages between two ranks
    // match in the order they were sent, as the schedule issues them.
    void send(const void* buf, int64_t count, DType t, int peer) override {
        MPI_Send(buf, to_int(count), mpi_type(t), peer, 0, MPI_COMM_WORLD);
    }
    void recv(void* buf, int64_t count, DType t, int peer) override {
        MPI_Recv(buf, to_int(count), mpi_type(t), peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    int split_group(int color) override {
        MPI_Comm c = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank_, &c);   // key = world rank: ascending members
        groups_.push_back(c);
        return static_cast<int>(groups_.size()) - 1;
    }
    void use_group(int handle) override {
        comm_ = handle < 0 ? MPI_COMM_WORLD : groups_.at(static_cast<size_t>(handle));
        MPI_Comm_rank(comm_, &crank_);
    }

    std::string gather_text_to_root(const std::string& mine) override {
        int n = to_int(static_cast<int64_t>(mine.size()));
        std::vector<int> sizes(world_), displs(world_);
        MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
        int64_t total = 0;
        for (int r = 0; r < world_; ++r) {
            displs[r] = to_int(total);
            total += sizes[r];
        }
        std::string all(rank_ == 0 ? static_cast<size_t>(total) : 0, '\0');
        MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
        return all;
    }

    [[noreturn]] void abort(int code) override {
        std::fflush(stdout);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
        _exit(code);
    }

  private:
    int rank_ = 0;
    int world_ = 1;
    MPI_Comm comm_ = MPI_COMM_WORLD;   // the group the collectives run on (use_group)
    int crank_ = 0;                    // this rank inside it
    std::vector<MPI_Comm> groups_;     // freed by MPI_Finalize
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(int* argc, char*** argv) {
    int provided = 0;
    // The communication thread is the only one calling MPI while the schedule runs, but the
    // watchdog may call MPI_Abort from its own thread: ask for MULTIPLE, accept SERIALIZED.
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
        std::fprintf(stderr, "zerorun: error: this MPI library offers thread level %d; zerorun needs MPI_THREAD_SERIALIZED\n",
                     provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(&on_mpi_error, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Type_contiguous(2, MPI_BYTE, &g_bf16);
    MPI_Type_commit(&g_bf16);
    MPI_Type_contiguous(2, MPI_BYTE, &g_fp16);
    MPI_Type_commit(&g_fp16);
    MPI_Op_create(&half_op<bf16_to_float, float_to_bf16, false>, 1, &g_bf16_sum);
    MPI_Op_create(&half_op<bf16_to_float, float_to_bf16, true>, 1, &g_bf16_max);
    MPI_Op_create(&half_op<fp16_to_float, float_to_fp16, false>, 1, &g_fp16_sum);
    MPI_Op_create(&half_op<fp16_to_float, float_to_fp16, true>, 1, &g_fp16_max);
    return std::make_unique<MpiBackend>();
}

void finalize_mpi() {
    MPI_Op_free(&g_bf16_sum);
    MPI_Op_free(&g_bf16_max);
    MPI_Op_free(&g_fp16_sum);
    MPI_Op_free(&g_fp16_max);
    MPI_Type_free(&g_bf16);
    MPI_Type_free(&g_fp16);
    MPI_Finalize();
}

}  // namespace zerorun
