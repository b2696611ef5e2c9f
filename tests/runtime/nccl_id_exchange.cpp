// Helper of test_nccl_host.cpp, run under mpirun: the NCCL unique-id exchange over real MPI with a
// fake id. The root fills 128 bytes with a pattern of its own, every other rank starts from zeros;
// after broadcast_unique_id every rank checks every byte and prints "rank R: id ok" or the first
// bad byte. Exit 0 only when all bytes match. Usage: nccl_id_exchange ROOT
#include <mpi.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "backends/nccl_backend.hpp"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int root = argc > 1 ? std::atoi(argv[1]) : 0;
    auto pattern = [&](int i) { return static_cast<unsigned char>((i * 37 + root * 11 + 1) & 0xff); };
    std::array<unsigned char, zerorun::kNcclUniqueIdBytes> id{};
    if (rank == root)
        for (int i = 0; i < zerorun::kNcclUniqueIdBytes; ++i) id[i] = pattern(i);
    zerorun::broadcast_unique_id(id.data(), root, MPI_COMM_WORLD);
    int bad = -1;
    for (int i = 0; i < zerorun::kNcclUniqueIdBytes && bad < 0; ++i)
        if (id[i] != pattern(i)) bad = i;
    if (bad < 0) std::printf("rank %d: id ok\n", rank);
    else std::printf("rank %d: id byte %d is %d, expected %d\n", rank, bad, id[bad], pattern(bad));
    std::fflush(stdout);
    int all_bad = bad >= 0, any = 0;
    MPI_Allreduce(&all_bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
