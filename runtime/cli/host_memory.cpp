// Why zerorun keeps the host memory it frees.
//
// OpenMPI 4.1's tuned collectives allocate their scratch per call (ompi/mca/coll/base/
// coll_base_reduce_scatter_block.c and coll_base_allreduce.c: malloc of the message's extent, freed
// on return). glibc serves such blocks by mmap above its mmap threshold and returns the top of the
// heap to the kernel above its trim threshold, so whether the scratch comes back as mapped pages
// depends on what the process allocated and freed before. A bench round calls each size twice
// (warm-up, then timed), so its timed call reuses the warm-up's pages; a step's op follows other
// ops' buffers being freed and trimmed, and its scratch is fresh pages. Measured (stage 3 of the
// tiny GPT, 4 ranks on 2 cores, getrusage per call): each 2,668,544 B reduce_scatter took 978
// minor page faults on every rank inside the call and 6.9-12 ms, against 0 faults and 1.5-2.7 ms
// for the bench's 2 MiB call in the same run. On a GPU neither happens: NCCL's buffers are
// allocated once per communicator and torch's caching allocator keeps freed device memory, so
// DeepSpeed's comms logger never times a page fault. Keeping freed memory in the process (as
// torch's allocator does on the device) makes the run and its bench rounds time the transport.
#include "host_memory.hpp"

#include <cstdlib>   // defines __GLIBC__ with the C library
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zerorun {

bool keep_freed_host_memory() {
#if defined(__GLIBC__)
    // 32 MiB: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); larger
    // blocks (a bench round's 64 MiB cache-eviction buffer) are still mapped per use.
    bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
    ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && ok;   // never give the heap's top back
    return ok;
#else
    return false;
#endif
}

}  // namespace zerorun
