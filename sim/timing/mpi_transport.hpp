// MPI collectives on one host as OpenMPI runs them (zerorun's MPI backend on CPUs): OpenMPI 4.1's
// coll/tuned component picks an algorithm per call from fixed decision rules on the rank count and
// the message size (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, v4.1.4 as Debian 12 ships
// it), and each algorithm has its own number of sequential steps and bytes on the busiest rank.
// A topology whose intra_node says "collectives": "openmpi-4.1-tuned" is planned here instead of by
// NCCL's tuner (its collective model, registered by that name: timing/collective_model.hpp); calibration then fits its step latency and copy bandwidth
// to the transport actually used. docs/mpi-collectives.md lists the rules.
#pragma once

#include <cstdint>
#include <string>

#include "timing/collectives.hpp"

namespace zerosim::mpi {

// One algorithm's cost shape: sequential message steps on the critical path, and bytes the
// busiest rank moves (sends, receives into place, or reduces) on it.
struct AlgorithmCost {
    const char* name = "";
    double steps = 0;
    double bytes = 0;
};

// The algorithm coll/tuned's fixed rules choose for `kind` with `buffer_bytes` (nccl-tests' size
// S: the whole buffer) on `world` ranks, and its cost. Commutative reductions (sum), as ZeRO's.
AlgorithmCost openmpi_tuned_algorithm(OpKind kind, double buffer_bytes, int64_t world);

// The plan: base latency plus steps x step latency (the topology's, latency-scaled), and the
// bytes at the shared-memory bandwidth (bandwidth-scaled), per collective's calibrated scales.
CollectivePlan plan_openmpi_tuned(const Topology& t, OpKind kind, double logged_bytes, int64_t world);

}  // namespace zerosim::mpi
