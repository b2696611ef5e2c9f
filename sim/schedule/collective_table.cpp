#include "schedule/collective_table.hpp"

#include <iterator>

namespace zerosim {

namespace {

double nm1_over_n(int64_t n) { return n > 1 ? static_cast<double>(n - 1) / static_cast<double>(n) : 0.0; }

double whole(double logged, int64_t) { return logged; }
double shards(double logged, int64_t n) { return logged * static_cast<double>(n); }

CollectiveCounts same(int64_t count, int64_t) { return {count, count}; }
CollectiveCounts gather(int64_t count, int64_t n) { return {count / n, count / n * n}; }
CollectiveCounts scatter(int64_t count, int64_t n) { return {count / n * n, count / n}; }

double twice_nm1_over_n(int64_t n) { return 2 * nm1_over_n(n); }
double one(int64_t) { return 1.0; }

double one_element(double, int64_t) { return 1.0; }
CollectiveCounts one_each(int64_t, int64_t) { return {1, 1}; }

// Columns: kind, nccl-tests name, DeepSpeed's logged size -> buffer S, per-rank counts, splits the
// buffer, bus factor, ring rounds, reduces, rooted, DeepSpeed calls it in place.
const CollectiveInfo kTable[] = {
    {OpKind::AllReduce,     "all_reduce",     whole,  same,    false, twice_nm1_over_n, 2, true,  false, true},
    {OpKind::AllGather,     "all_gather",     shards, gather,  true,  nm1_over_n,       1, false, false, false},
    {OpKind::ReduceScatter, "reduce_scatter", whole,  scatter, true,  nm1_over_n,       1, true,  false, false},
    {OpKind::Broadcast,     "broadcast",      whole,  same,    false, one,              1, false, true,  true},
    {OpKind::Reduce,        "reduce",         whole,  same,    false, one,              1, true,  true,  true},
    // all_to_all_single (qgZ): DeepSpeed logs the whole input; nccl-tests' alltoall rates it with
    // busbw = algbw (n-1)/n (src/alltoall.cu).
    {OpKind::AllToAll,      "all_to_all",     whole,  same,    true,  nm1_over_n,       1, false, false, false},
    // torch.distributed's barrier on NCCL: an all_reduce of one element, whatever size is logged
    // (DeepSpeed logs 0 bytes).
    {OpKind::Barrier,       "barrier",        one_element, one_each, false, twice_nm1_over_n, 2, true, false, false},
};

}  // namespace

const CollectiveInfo& collective_info(OpKind k) {
    for (const CollectiveInfo& c : kTable)
        if (c.kind == k) return c;
    return kTable[std::size(kTable) - 1];   // the barrier's
}

std::optional<OpKind> collective_named(const std::string& name) {
    for (const CollectiveInfo& c : kTable)
        if (c.kind != OpKind::Barrier && c.kind != OpKind::AllToAll && name == c.name) return c.kind;
    return std::nullopt;
}

double logged_bytes_of_buffer(OpKind k, double buffer_bytes, int64_t world) {
    return buffer_bytes / collective_info(k).buffer_bytes(1.0, world);
}

}  // namespace zerosim
