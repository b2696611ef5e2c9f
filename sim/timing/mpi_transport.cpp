// OpenMPI 4.1's coll/tuned fixed decision rules (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c,
// v4.1.4) for commutative operations, and each chosen algorithm's steps and bytes as the
// ompi/mca/coll/base algorithms run them with the segment size those rules pass (0: unsegmented).
// Rows of the rules are transcribed for fewer than 32 ranks (one host); larger groups use the
// 16-31 row (docs/mpi-collectives.md says so).
#include "mpi_transport.hpp"

#include <algorithm>
#include <cmath>

#include "timing/collective_model.hpp"

namespace zerosim::mpi {

namespace {

// A threshold row: the first bound the size is below picks its algorithm, else `last`.
struct Rule {
    double below;
    int alg;
};
template <size_t N>
int pick(const Rule (&rules)[N], int last, double size) {
    for (const Rule& r : rules)
        if (size < r.below) return r.alg;
    return last;
}

double log2_ceil(int64_t p) { return std::ceil(std::log2(static_cast<double>(std::max<int64_t>(p, 1)))); }
// The largest power of two not above p (recursive algorithms fold the rest in first).
int64_t pow2_floor(int64_t p) {
    int64_t q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}

// allreduce (total_dsize = the whole buffer). 1 basic_linear, 3 recursive_doubling, 4 ring,
// 5 segmented_ring, 6 rabenseifner.
AlgorithmCost allreduce(double s, int64_t p) {
    int alg;
    if (p < 4) {
        static const Rule r[] = {{8, 4}, {4096, 3}, {8192, 4}, {16384, 3}, {65536, 4}, {262144, 5}};
        alg = pick(r, 6, s);
    } else if (p < 8) {
        static const Rule r[] = {{16, 4}, {8192, 3}};
        alg = pick(r, 6, s);
    } else if (p < 16) {
        static const Rule r[] = {{8192, 3}};
        alg = pick(r, 6, s);
    } else {
        static const Rule r[] = {{64, 5}, {4096, 3}};
        alg = pick(r, 6, s);
    }
    const int64_t q = pow2_floor(p);
    const double fold_steps = q == p ? 0 : 2, fold_bytes = q == p ? 0 : 2 * s;   // extra ranks fold in, then out
    const double pf = static_cast<double>(p), qf = static_cast<double>(q);
    switch (alg) {
        case 3: return {"recursive_doubling", log2_ceil(q) + fold_steps, std::log2(qf) * s + fold_bytes};
        case 4: return {"ring", 2 * (pf - 1), 2 * (pf - 1) / pf * s};
        case 5: return {"segmented_ring", 2 * (pf - 1), 2 * (pf - 1) / pf * s};
        case 6: return {"rabenseifner", 2 * std::log2(qf) + fold_steps, 2 * (qf - 1) / qf * s + fold_bytes};
        default: return {"basic_linear", 2 * (pf - 1), 2 * (pf - 1) * s};
    }
}

// bcast (total_dsize = the buffer), unsegmented. 1 basic_linear, 2 chain, 3 pipeline,
// 5 binary_tree, 6 binomial, 7 knomial (radix 4), 8 scatter_allgather.
AlgorithmCost bcast(double s, int64_t p) {
    int alg;
    if (p < 4) {
        static const Rule r[] = {{32, 3},    {256, 5},    {512, 3},    {1024, 7},    {32768, 1},
                                 {131072, 5}, {262144, 2}, {524288, 1}, {1048576, 6}};
        alg = pick(r, 5, s);
    } else if (p < 8) {
        static const Rule r[] = {{64, 5}, {128, 6}, {2048, 5}, {8192, 6}, {1048576, 1}};
        alg = pick(r, 2, s);
    } else if (p < 16) {
        static const Rule r[] = {{8, 7}, {64, 5}, {4096, 7}, {16384, 5}, {32768, 6}};
        alg = pick(r, 1, s);
    } else {
        static const Rule r[] = {{4096, 7}, {1048576, 6}};
        alg = pick(r, 8, s);
    }
    const double pf = static_cast<double>(p), lg = log2_ceil(p);
    switch (alg) {
        // The root posts its p-1 sends at once; on one host each receiver copies the root's
        // buffer itself (the vader BTL's single copy, CMA), concurrently, so the critical path
        // carries one copy of S. Measured (4 ranks, fenced cold rounds): 512 KiB by linear in
        // 26 us, 1 MiB by chain (p-1 copies in turn) in 200 us; charging linear (p-1) S made the
        // broadcast fit's median residual 25-70% over 8 KiB-4 MiB.
        case 1: return {"basic_linear", pf - 1, s};
        case 2: return {"chain", pf - 1, (pf - 1) * s};      // unsegmented: store and forward
        case 3: return {"pipeline", pf - 1, (pf - 1) * s};
        case 5: return {"binary_tree", lg, lg * s};
        case 6: return {"binomial", lg, lg * s};
        case 7: {
            double rounds = std::ceil(std::log(pf) / std::log(4.0) - 1e-9);
            return {"knomial", rounds * 3, rounds * 3 * s};
        }
        default: return {"scatter_allgather", lg + pf - 1, 2 * (pf - 1) / pf * s};
    }
}

// allgather (total_dsize = one rank's contribution). 2 bruck, 3 recursive_doubling (a power of
// two only: bruck otherwise), 4 ring, 6 two_proc.
// Each rank receives the p-1 other contributions, (p-1)/p of the whole buffer (docs/mpi-collectives.md;
// until 2026-12-01 this charged (p-1)/p of one contribution, p times too few bytes, which each
// calibration hid in all_gather's bandwidth scale: 0.35-0.46 against 0.7-1.1 for the others).
AlgorithmCost allgather(double s, int64_t p) {
    const double pf = static_cast<double>(p), whole = s * pf, share = (pf - 1) / pf * whole;
    if (p == 2) return {"two_proc", 1, share};
    if (p < 32) {
        if (pow2_floor(p) == p) return {"recursive_doubling", log2_ceil(p), share};
        return {"bruck", log2_ceil(p), share + whole};   // and a final rotation of the whole buffer
    }
    return {"ring", pf - 1, share};
}

// reduce_scatter_block (total_dsize = one rank's block). 1 basic_linear (reduce to rank 0, then
// scatter), 2 recursive_doubling, 3 recursive_halving, 4 butterfly.
// basic_linear (coll_base_reduce_scatter_block.c) is the communicator's own reduce to rank 0 and
// then a scatter: whatever tree the reduce takes, every other rank's whole buffer crosses one edge
// ((p-1) S) and the root sends p-1 blocks ((p-1)/p S). Its bytes are charged as that total shared
// by the p ranks, the way the symmetric algorithms' per-rank bytes are their total over p: on one
// host the ranks share the cores and the memory bus, so the root's work is not a critical path the
// others wait on idle. Measured (4 ranks, 2 cores, fenced cold rounds): the 4 MiB call (a 1 MiB
// block: linear) takes 1.8-2.0x the 2 MiB one (recursive halving), where the root-bound cost
// ((p-1) S + (p-1)/p S = 3.75 S against 0.75 S) said 10x; that made calibrate's fit choose between
// the two and predict stage 3's 2,668,544 B reduce_scatter at 0.54 ms against 1.8-2.1 ms measured
// by the same rounds at 2 MiB.
AlgorithmCost reduce_scatter_block(double s, int64_t p) {
    const double pf = static_cast<double>(p), block = s / pf;
    int alg;
    if (p < 4) {
        static const Rule r[] = {{4, 2}, {8, 4}, {16, 3}, {128, 4}, {256, 3}, {4096, 4}, {8192, 3}, {131072, 4}};
        alg = pick(r, 1, block);
    } else if (p < 8) {
        static const Rule r[] = {{8, 3}, {32, 2}, {256, 4}, {8192, 3}, {16384, 4}, {1048576, 3}};
        alg = pick(r, 1, block);
    } else {
        static const Rule r[] = {{4, 1}, {32, 3}, {128, 4}, {524288, 3}, {4194304, 1}};
        alg = pick(r, 4, block);
    }
    const int64_t q = pow2_floor(p);
    const double fold_steps = q == p ? 0 : 2, fold_bytes = q == p ? 0 : s;
    const double lg = std::log2(static_cast<double>(q)), share = (pf - 1) / pf * s;
    switch (alg) {
        case 2: return {"recursive_doubling", lg + fold_steps, lg * s + fold_bytes};
        case 3: return {"recursive_halving", lg + fold_steps, share + fold_bytes};
        case 4: return {"butterfly", lg + fold_steps, share + fold_bytes};
        default: return {"basic_linear", 2 * (pf - 1), ((pf - 1) * s + share) / pf};
    }
}

}  // namespace

AlgorithmCost openmpi_tuned_algorithm(OpKind kind, double s, int64_t world) {
    const int64_t p = std::max<int64_t>(world, 1);
    if (p == 1) return {"local", 0, 0};
    switch (kind) {
        case OpKind::AllReduce: return allreduce(s, p);
        case OpKind::Broadcast: return bcast(s, p);
        case OpKind::AllGather: return allgather(s / static_cast<double>(p), p);
        case OpKind::ReduceScatter: return reduce_scatter_block(s, p);
        default: {
            // reduce: a binomial tree (what the rules pick for most sizes on a few ranks).
            double lg = log2_ceil(p);
            return {"binomial", lg, lg * s};
        }
    }
}

CollectivePlan plan_openmpi_tuned(const Topology& t, OpKind kind, double logged, int64_t world) {
    const CollectiveInfo& info = collective_info(kind);
    const int64_t p = std::max<int64_t>(world, 1);
    CollectivePlan plan;
    plan.buffer_bytes = info.buffer_bytes(logged, p);
    plan.bus_factor = info.bus_factor(p);
    const Topology::Scales sc = t.scales_for(info.name);
    AlgorithmCost c = openmpi_tuned_algorithm(kind, plan.buffer_bytes, p);
    OpenMpiTunedChoice& choice = plan.choice.emplace<OpenMpiTunedChoice>();
    choice.algorithm = c.name;
    plan.latency_s = (t.base_latency_us + c.steps * t.intra_step_latency_us) * 1e-6 * sc.latency;
    // A step whose message (the critical path's bytes over its steps) does not fit an eager
    // fragment with its header goes by rendezvous and single copy (vader: CMA), one handshake more.
    // Measured (2 ranks, cold fenced rounds, 2026-12-01): 3-12 us per call up to 4 KiB buffers,
    // 20-40 us from 8 KiB (all_gather's 4 KiB per-rank message, broadcast's 4 KiB buffer) on.
    const double message = c.steps > 0 ? c.bytes / c.steps : 0;
    if (t.intra_eager_limit_bytes > 0 && message >= t.intra_eager_limit_bytes) {
        choice.rendezvous_s = c.steps * t.intra_rendezvous_latency_us * 1e-6 * sc.rendezvous_or_latency();
        plan.latency_s += choice.rendezvous_s;
    }
    plan.intra_bytes = c.bytes;
    plan.intra_rate = t.intra_bandwidth_gbs * 1e9 * sc.bandwidth;
    // The caches' capacity: when the buffers of the call (as DeepSpeed passes them: all_reduce and
    // broadcast in place, S; all_gather and reduce_scatter out of place, S and a rank's S/p) outgrow
    // a rank's cache, the share of the bytes beyond it goes at the memory's pace. Measured (2 ranks,
    // the main job's rounds, 2026-12-01): all_gather 8% and 16% slower at 2 and 4 MiB than the line
    // through the smaller sizes, where its buffers pass a core's 2 MiB L2.
    if (t.intra_cache_bytes > 0) {
        const double splits = info.splits_buffer ? 1.0 + 1.0 / static_cast<double>(p) : 1.0;
        const double working_set = plan.buffer_bytes * splits;
        const double beyond = working_set > t.intra_cache_bytes ? c.bytes * (1 - t.intra_cache_bytes / working_set) : 0;
        choice.in_cache_bytes = c.bytes - beyond;
        choice.beyond_cache_bytes = beyond;
        plan.intra_bytes = choice.in_cache_bytes + beyond * sc.bandwidth / sc.memory_or_bandwidth();
    }
    return plan;
}

namespace {

// OpenMPI 4.1 coll/tuned over shared memory ("openmpi-4.1-tuned" in the registry): its fixed
// rules choose the algorithm, so there is no NCCL pair to weigh or force.
class OpenMpiTunedCollectiveModel final : public CollectiveModel {
public:
    bool runs_on(const Hardware& h) const override { return h.intra == IntraKind::SharedMemory; }
    std::string choice_text() const override { return std::string(kOpenMpiTunedModelName) + " with kind shared_memory"; }
    std::vector<TunerCandidate> candidates(const Topology&, OpKind, int64_t) const override { return {}; }
    CollectivePlan plan(const Topology& t, OpKind kind, double logged, int64_t world, const TunerChoice&) const override {
        return plan_openmpi_tuned(t, kind, logged, world);
    }
    CollectivePlan plan_with(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm, Protocol) const override {
        return plan_openmpi_tuned(t, kind, logged, world);
    }
};

}  // namespace

}  // namespace zerosim::mpi

namespace zerosim {

const CollectiveModel& openmpi_tuned_collective_model() {
    static const mpi::OpenMpiTunedCollectiveModel model;
    return model;
}

}  // namespace zerosim
