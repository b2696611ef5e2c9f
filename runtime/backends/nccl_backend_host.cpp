// Host-side parts of the NCCL backend: no CUDA, no NCCL, always built (nccl_backend.hpp).
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "backends/nccl_backend.hpp"

namespace zerorun {

int select_device(int local_rank, int device_count) {
    if (device_count <= 0) throw std::runtime_error("no CUDA device visible");
    if (local_rank < 0) throw std::runtime_error("invalid local rank " + std::to_string(local_rank));
    if (local_rank >= device_count)
        throw std::runtime_error("local rank " + std::to_string(local_rank) + " has no GPU: this node shows " +
                                 std::to_string(device_count) + " device" + (device_count == 1 ? "" : "s") +
                                 " (one process per GPU; start at most that many ranks per node)");
    return local_rank;
}

std::optional<int> parse_local_rank(const char* value) {
    if (!value || !*value) return std::nullopt;
    char* end = nullptr;
    long v = std::strtol(value, &end, 10);
    if (*end != '\0' || v < 0 || v > 1 << 20) return std::nullopt;
    return static_cast<int>(v);
}

int local_rank(MPI_Comm comm) {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
        if (auto r = parse_local_rank(std::getenv(var))) return *r;
    MPI_Comm node = MPI_COMM_NULL;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return local;
}

void broadcast_unique_id(void* id, int root, MPI_Comm comm) {
    MPI_Bcast(id, kNcclUniqueIdBytes, MPI_BYTE, root, comm);
}

#ifndef ZERORUN_HAVE_NCCL
std::string gpu_unavailable_reason() { return "built without NCCL"; }
std::unique_ptr<Backend> make_nccl_backend(Backend& mpi, double) {
    throw NcclInitError(mpi.rank() == 0 ? "built without NCCL (CMake found no CUDA toolkit or no nccl.h/libnccl)" : "");
}
#endif

}  // namespace zerorun
