// The seam between the engine and whoever runs the collectives (as SimGrid registers its network
// models by name, and ASTRA-sim's AstraNetworkAPI separates its front ends from its network back
// ends): a collective model plans one collective on a topology, and is found by the name the
// topology file gives (intra_node "collectives"; "nccl" when it gives none). "nccl" (NCCL's tuner,
// nccl_tuner.cpp) and "openmpi-4.1-tuned" (OpenMPI 4.1 coll/tuned over shared memory,
// mpi_transport.cpp) are built in; a third (a calibrated NCCL, RCCL) is one file that defines a
// CollectiveModel and registers it with a CollectiveModelRegistration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim {

class CollectiveModel {
public:
    virtual ~CollectiveModel() = default;
    // Whether a topology can name this model: false refuses the file (OpenMPI's needs shared memory).
    virtual bool runs_on(const Hardware& h) const = 0;
    // How the topology error names this model among the choices ("openmpi-4.1-tuned with kind
    // shared_memory").
    virtual std::string choice_text() const = 0;
    // The NCCL algorithm/protocol pairs the model chooses among for `kind` on `ranks` ranks of `t`
    // (what --algo / --proto may force); none for a model without that choice.
    virtual std::vector<TunerCandidate> candidates(const Topology& t, OpKind kind, int64_t ranks) const = 0;
    // One collective of `logged_bytes` (DeepSpeed's convention: the shard for all_gather) on `ranks`
    // ranks of `t` placed node by node, among the pairs `only` allows.
    virtual CollectivePlan plan(const Topology& t, OpKind kind, double logged_bytes, int64_t ranks,
                                const TunerChoice& only) const = 0;
    // The same with the pair forced (tests, explain); a model without that choice plans as plan().
    virtual CollectivePlan plan_with(const Topology& t, OpKind kind, double logged_bytes, int64_t ranks, Algorithm a,
                                     Protocol p) const = 0;
};

// The model registered under `name`, or null.
const CollectiveModel* collective_model_named(const std::string& name);
// The model the topology names (collective_model); NCCL's when the name is not registered.
const CollectiveModel& collective_model_of(const Topology& t);
// The registered models as the topology error lists them: "nccl, or openmpi-4.1-tuned with kind
// shared_memory".
std::string collective_model_choices();

// Registers `model` under `name` for the registration's lifetime (a file-scope object registers for
// the program's). Built-in models are listed in collective_model.cpp: a static library's linker
// keeps only the objects something refers to, so a registration of its own there would be dropped.
class CollectiveModelRegistration {
public:
    CollectiveModelRegistration(std::string name, const CollectiveModel& model);
    ~CollectiveModelRegistration();
    CollectiveModelRegistration(const CollectiveModelRegistration&) = delete;
    CollectiveModelRegistration& operator=(const CollectiveModelRegistration&) = delete;

private:
    std::string name_;
};

// The built-in models (nccl_tuner.cpp, mpi_transport.cpp).
const CollectiveModel& nccl_collective_model();
const CollectiveModel& openmpi_tuned_collective_model();

}  // namespace zerosim
