// How zerorun's processes hold host memory they free (see host_memory.cpp).
#pragma once

namespace zerorun {

// Keeps freed heap memory in the process and serves blocks up to 32 MiB from the heap, so that a
// collective's per-call scratch (OpenMPI's tuned reduce_scatter_block, allreduce...) reuses pages
// already mapped instead of faulting fresh ones inside the timed call. Returns false where the C
// library has no such setting (then nothing changes).
bool keep_freed_host_memory();

}  // namespace zerorun
