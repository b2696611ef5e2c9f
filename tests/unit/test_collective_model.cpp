// The collective-model seam (timing/collective_model.hpp): a model registered by name is what a
// topology file picks and what the engine runs; the node count of a group of ranks; NCCL's
// MAXCHANNELS by release. Expectations derived by hand.
#include <gtest/gtest.h>

#include "core/json_input.hpp"
#include "timing/collective_model.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

// A test double: a latency of 1 ns per logged byte and nothing on the links, recording its calls.
class RecordingModel final : public CollectiveModel {
public:
    mutable int plans = 0;
    mutable int64_t last_ranks = 0;
    mutable double last_bytes = 0;
    bool runs_on(const Hardware&) const override { return true; }
    std::string choice_text() const override { return "test-double"; }
    std::vector<TunerCandidate> candidates(const Topology&, OpKind, int64_t) const override { return {}; }
    CollectivePlan plan(const Topology&, OpKind, double logged_bytes, int64_t ranks, const TunerChoice&) const override {
        ++plans;
        last_ranks = ranks;
        last_bytes = logged_bytes;
        CollectivePlan p;
        p.latency_s = logged_bytes * 1e-9;
        return p;
    }
    CollectivePlan plan_with(const Topology& t, OpKind k, double b, int64_t n, Algorithm, Protocol) const override {
        return plan(t, k, b, n, {});
    }
};

Json h100_json() {
    auto text = read_text_file(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json", "topology");
    EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().what());
    return Json::parse(text.ok() ? text.value() : "{}");
}

}  // namespace

// One registered file is a new model: the topology names it, plan_collective and the engine call it.
// 1 MiB logged on 8 ranks: the double's latency is 1,048,576 ns, the engine's time the same.
TEST(CollectiveModel, ARegisteredModelIsWhatTheTopologyPicksAndTheEngineRuns) {
    RecordingModel model;
    CollectiveModelRegistration registration("test-double", model);
    Json j = h100_json();
    j["intra_node"]["collectives"] = "test-double";
    auto t = parse_topology("double.json", j.dump());
    ASSERT_TRUE(t.ok()) << t.error().what();
    EXPECT_EQ(t.value().collective_model, "test-double");
    EXPECT_EQ(&collective_model_of(t.value()), &model);
    CollectivePlan plan;
    double s = simulate_single_collective(t.value(), OpKind::AllReduce, 1048576, 8, &plan);
    EXPECT_EQ(model.plans, 1);
    EXPECT_EQ(model.last_ranks, 8);
    EXPECT_EQ(model.last_bytes, 1048576);
    EXPECT_NEAR(s, 1.048576e-3, 1e-12);
    EXPECT_EQ(collective_model_choices(), "nccl, openmpi-4.1-tuned with kind shared_memory, or test-double");
}

// Without the registration the name is refused with the message the file format has always given.
TEST(CollectiveModel, AnUnregisteredNameIsRefused) {
    Json j = h100_json();
    j["intra_node"]["collectives"] = "test-double";
    auto t = parse_topology("double.json", j.dump());
    ASSERT_FALSE(t.ok());
    EXPECT_NE(std::string(t.error().what())
                  .find("double.json: field 'intra_node.collectives': expected nccl, or openmpi-4.1-tuned with kind shared_memory"),
              std::string::npos)
        << t.error().what();
    j["intra_node"]["collectives"] = "openmpi-4.1-tuned";   // needs shared memory; dgx-h100 is NVSwitch
    EXPECT_FALSE(parse_topology("double.json", j.dump()).ok());
    EXPECT_EQ(collective_model_named("test-double"), nullptr);
}

// NCCL's plans carry NCCL's pair; OpenMPI's its own algorithm and no NCCL pair, and --algo is
// refused for it (OpenMPI's rules choose). localhost.json: all_reduce of 64 B on 4 ranks is
// coll/tuned's recursive doubling (4-7 ranks, below 8192 B).
TEST(CollectiveModel, EachModelsPlanCarriesItsOwnChoice) {
    auto h100 = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json");
    auto local = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/localhost.json");
    ASSERT_TRUE(h100.ok() && local.ok());
    CollectivePlan nccl = plan_collective(h100.value(), OpKind::AllReduce, 64, 8);
    ASSERT_NE(nccl.nccl(), nullptr);
    EXPECT_EQ(nccl.openmpi(), nullptr);
    CollectivePlan mpi = plan_collective(local.value(), OpKind::AllReduce, 64, 4);
    EXPECT_EQ(mpi.nccl(), nullptr);
    ASSERT_NE(mpi.openmpi(), nullptr);
    EXPECT_EQ(mpi.openmpi()->algorithm, "recursive_doubling");
    EXPECT_TRUE(tuner_candidates(local.value(), OpKind::AllReduce, 4).empty());
    EXPECT_FALSE(tuner_choice_named("ring", "", local.value(), OpKind::AllReduce, "all_reduce", 4).ok());
    EXPECT_TRUE(tuner_choice_named("", "", local.value(), OpKind::AllReduce, "all_reduce", 4).ok());
}

// ceil(ranks / gpus_per_node), at least one node.
TEST(CollectiveModel, NodesSpannedByRanksPlacedNodeByNode) {
    Hardware h;
    h.gpus_per_node = 8;
    EXPECT_EQ(nodes_spanned(h, 0), 1);
    EXPECT_EQ(nodes_spanned(h, 1), 1);
    EXPECT_EQ(nodes_spanned(h, 8), 1);
    EXPECT_EQ(nodes_spanned(h, 9), 2);
    EXPECT_EQ(nodes_spanned(h, 16), 2);
    EXPECT_EQ(nodes_spanned(h, 17), 3);
    h.gpus_per_node = 1;
    EXPECT_EQ(nodes_spanned(h, 5), 5);
}

// MAXCHANNELS is 32 through NCCL v2.24 and 64 since v2.25 (src/include/device.h). dgx-h100 has 18
// NVLink channels, 36 at run time, so v2.24 runs 32. A 1 MiB ring Simple all_reduce on 8 ranks keeps
// 1 MiB / (512 threads x 64 B) = 32 channels: all of v2.24's, 32 of v2.28's 36, so v2.28 runs
// at 32/36 of the rate v2.24 does.
TEST(CollectiveModel, MaxChannelsFollowsTheRelease) {
    auto t = load_topology(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-h100.json");
    ASSERT_TRUE(t.ok());
    Topology old = t.value();
    old.nccl_version = NcclVersion{2, 24};
    Topology now = t.value();
    now.nccl_version = NcclVersion{2, 28};
    const double mib = 1048576;
    CollectivePlan a = plan_collective_with(old, OpKind::AllReduce, mib, 8, Algorithm::Ring, Protocol::Simple);
    CollectivePlan b = plan_collective_with(now, OpKind::AllReduce, mib, 8, Algorithm::Ring, Protocol::Simple);
    EXPECT_NEAR(b.intra_rate / a.intra_rate, 32.0 / 36.0, 1e-12);
}
