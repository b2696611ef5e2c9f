// The NCCL backend (nccl_backend.cpp) and its host-side helpers (nccl_backend_host.cpp).
//
// One process per GPU: the device is the rank's local rank on its node. MPI stays underneath for
// what NCCL does not do: start-up (the 128-byte ncclUniqueId is broadcast over MPI), the barrier,
// collecting the logs on rank 0 and aborting the job. Collectives run on one dedicated CUDA stream;
// host buffers are staged through device scratch buffers, device buffers are used as they are.
// The helpers below need no GPU and are unit-tested (tests/runtime/test_nccl_host.cpp).
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "backends/backend.hpp"

#ifdef ZERORUN_HAVE_NCCL
#include <nccl.h>
#endif

namespace zerorun {

// ncclUniqueId's size (NCCL_UNIQUE_ID_BYTES); checked against nccl.h where it is available.
constexpr int kNcclUniqueIdBytes = 128;

// The device of a rank with this local rank on a node with `device_count` visible devices.
// Throws std::runtime_error naming the cause (no device, more ranks than devices).
int select_device(int local_rank, int device_count);

// OMPI_COMM_WORLD_LOCAL_RANK (or MPI_LOCALRANKID / SLURM_LOCALID) parsed from `value`; nullopt
// when unset or not a non-negative integer.
std::optional<int> parse_local_rank(const char* value);
// This process's rank on its node: the launcher's environment, else its rank in
// MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED). Collective over `comm` in the second case.
int local_rank(MPI_Comm comm);

// Broadcasts the kNcclUniqueIdBytes bytes at `id` from `root` to every rank of `comm`.
void broadcast_unique_id(void* id, int root, MPI_Comm comm);

// Empty when a CUDA device is usable here, else one phrase naming why not ("no CUDA device
// visible", "CUDA driver missing or too old ...", "built without NCCL").
std::string gpu_unavailable_reason();

// Start-up failed on some rank; every rank throws it (agreed over MPI), so every rank can exit 2.
// what() is the cause on the lowest failing rank and empty on the others (they print nothing).
struct NcclInitError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Builds the NCCL backend over an initialised MPI backend (which must outlive it): picks the
// device, creates the communicator. `timeout_s`: longest wait for one collective before the
// communicator is aborted. Throws NcclInitError (on every rank) when the GPU or NCCL is unusable.
std::unique_ptr<Backend> make_nccl_backend(Backend& mpi, double timeout_s);

#ifdef ZERORUN_HAVE_NCCL
static_assert(NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes);
// The NCCL type of each DType (fp32, bf16, fp16 natively; fp64, int64, uint8).
ncclDataType_t nccl_dtype(DType t);
// Sum and Max; throws std::invalid_argument for ReduceOp::None.
ncclRedOp_t nccl_redop(ReduceOp op);
#endif

}  // namespace zerorun
