// Each collective of the IR described once: how DeepSpeed's comms logger sizes it, how nccl-tests
// sizes and rates it, how often NCCL's ring carries it round, and whether DeepSpeed calls it in
// place. The timing model (predict, bench, calibrate) and `zerorun bench` read this table; adding
// a collective is one entry here (shaped like nccl-tests' per-collective tables, src/*.cu).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "schedule/ir.hpp"

namespace zerosim {

// Elements one rank sends and receives for a collective of `count` elements in all.
struct CollectiveCounts {
    int64_t send = 0;
    int64_t recv = 0;
};

struct CollectiveInfo {
    OpKind kind;
    const char* name;     // nccl-tests' name (all_reduce, all_gather, ...), as `bench --op` takes it
    // nccl-tests' size S (the whole buffer) from the bytes DeepSpeed logs on n ranks: DeepSpeed
    // logs all_gather_into_tensor's input, one rank's shard (docs/zero-comm.md, "Logged size").
    double (*buffer_bytes)(double logged, int64_t n);
    // nccl-tests' per-rank buffers for `count` elements in all (GetCollByteCount in
    // src/<collective>.cu): all_gather sends count/n, reduce_scatter receives count/n.
    CollectiveCounts (*per_rank_counts)(int64_t count, int64_t n);
    bool splits_buffer;   // one side is count/n elements, so a count is a multiple of n
    // nccl-tests' busbw = algbw * factor (GetBw in src/<collective>.cu).
    double (*bus_factor)(int64_t n);
    // Times the buffer travels round NCCL's ring: all_reduce is a reduce-scatter then an
    // all-gather (src/device/all_reduce.h), so 2(n-1) ring steps; the others n-1.
    int ring_rounds;
    bool reduces;         // carries a reduction (nccl-tests prints its redop; tree and NVLS apply)
    bool rooted;          // has a root rank (nccl-tests prints it)
    // DeepSpeed calls it on one buffer (the bucket's all_reduce, a parameter's broadcast, reduce),
    // not from an input into a separate output (all_gather_into_tensor, reduce_scatter_tensor).
    bool deepspeed_in_place;
};

// Barrier (and any kind that is not a collective) gets the barrier's entry: torch.distributed's
// barrier on NCCL is an all_reduce of one element.
const CollectiveInfo& collective_info(OpKind k);
// The collective with this nccl-tests name (all_reduce, all_gather, reduce_scatter, broadcast,
// reduce), as `bench --op` and `calibrate --op` take it.
std::optional<OpKind> collective_named(const std::string& name);
// The size DeepSpeed logs for a collective over a whole buffer of `buffer_bytes` (nccl-tests'
// size): the inverse of CollectiveInfo::buffer_bytes.
double logged_bytes_of_buffer(OpKind k, double buffer_bytes, int64_t world);

}  // namespace zerosim
