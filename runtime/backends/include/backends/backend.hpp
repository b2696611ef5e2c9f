// The communication backend: what zerorun needs from a collective library, nothing more.
//
// One implementation today (MPI on host memory, mpi_backend.cpp); an NCCL backend implements the
// same calls on device buffers and a CUDA stream. Calls are blocking from the caller's point of
// view: when one returns, its output is complete and readable through host_view(). The executor
// issues every call from one communication thread, in schedule order, so a backend never sees two
// calls at once (MPI_THREAD_SERIALIZED is enough).
//
// Conventions follow torch.distributed's *_into_tensor calls (what DeepSpeed issues):
//  - all_gather: `count` elements in per rank; `recv` holds world*count, rank r's part at r*count.
//  - reduce_scatter: `recv_count` elements out per rank; `send` holds world*recv_count, rank r's
//    part at r*recv_count.
//  - send == recv (all_reduce, reduce, all_gather with send == recv + rank*count,
//    reduce_scatter with recv == send + rank*recv_count) is the in-place form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "schedule/ir.hpp"

namespace zerorun {

using zerosim::DType;
using zerosim::ReduceOp;

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    virtual int rank() const = 0;
    virtual int world() const = 0;

    // Buffers the backend can communicate from (host memory for MPI, device memory for NCCL).
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* p, size_t bytes) = 0;
    // Host-readable address of a buffer (identity for host backends; NCCL would stage a copy).
    virtual void* host_view(void* p) { return p; }

    virtual void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) = 0;
    virtual void all_gather(const void* send, void* recv, int64_t count, DType t) = 0;
    virtual void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType t, ReduceOp op) = 0;
    virtual void broadcast(void* buf, int64_t count, DType t, int root) = 0;
    virtual void reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op, int root) = 0;
    virtual void barrier() = 0;
    // all_to_all (ZeRO++ qgZ; torch.distributed.all_to_all_single without split sizes): `send`
    // holds one block of `count` elements per group member, block j for member j; `recv` gets
    // member j's block for this rank at block j.
    virtual void all_to_all(const void* send, void* recv, int64_t count, DType t) = 0;
    // Point-to-point (the pipeline engine's p2p.py send/recv; issue 29): `count` elements to or
    // from `peer`, a WORLD rank whatever group use_group chose. Blocking, as torch.distributed's
    // send/recv are: send returns when the buffer may be reused, recv when the data is in.
    virtual void send(const void* buf, int64_t count, DType t, int peer) = 0;
    virtual void recv(void* buf, int64_t count, DType t, int peer) = 0;

    // Process groups (ZeRO++ hpZ, MiCS; issue 17). split_group is collective over the world:
    // every rank calls it once per group kind, at start, with the index of the rank set it is in
    // (torch.distributed.new_group per set, as DeepSpeed v0.14.2 groups.py / mics_utils.py
    // create them). It returns a handle, or -1 where the backend has no sub-communicators.
    // use_group makes the following collectives (and barrier) run on that group, with rank
    // numbers (root, in-place positions) inside it; -1 is the world again.
    virtual int split_group(int color) { (void)color; return -1; }
    virtual void use_group(int handle) { (void)handle; }

    // Outside the schedule: the runtime's own bookkeeping after the last op (collecting the
    // per-rank JSON logs on rank 0). Never logged, never timed. `recv` is only read on rank 0.
    virtual std::string gather_text_to_root(const std::string& mine) = 0;

    // Ends every rank's process now, with this exit code (a peer failed, a check is impossible).
    [[noreturn]] virtual void abort(int code) = 0;
};

// Sets up MPI (MPI_Init_thread), installs an error handler that reports and aborts, and defines
// the 16-bit float types and their reductions. `argc/argv` as given to main.
std::unique_ptr<Backend> make_mpi_backend(int* argc, char*** argv);
// The NCCL backend over an MPI one: backends/nccl_backend.hpp (make_nccl_backend).
// MPI_Finalize, for a clean exit.
void finalize_mpi();

}  // namespace zerorun
