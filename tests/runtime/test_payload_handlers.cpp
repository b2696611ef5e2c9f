// The executor's handler table (runtime/executor/handlers.cpp) covers every payload the schedule
// generators can put on an op: each rule's payload in sim/schedule's rule table, and every payload
// of the schedules the stage and ZeRO++/MiCS generators build for the runtime's test configs
// (qwZ's int8 gathers take their payload from the variant, not from a rule of their own).
// No mpirun: the table is asked directly (executor_serves).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "executor/executor.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "schedule/schedule.hpp"

namespace {

using zerosim::Payload;

TEST(PayloadHandlers, EveryRulePayloadHasAHandler) {
    const auto& rules = zerosim::all_rules();
    ASSERT_GE(rules.size(), 30u);   // the stage, ZeRO++, MiCS, what-if and compute rules
    // The 3D rules' payloads (activations, scalars) run in no executor yet: zerorun refuses 3D schedules.
    for (const auto& r : rules) {
        if (r.payload != Payload::Activations && r.payload != Payload::Scalars) {
            EXPECT_TRUE(zerorun::executor_serves(r.payload)) << r.id << ": " << zerosim::payload_name(r.payload);
        }
    }
}

// The payloads the IR names, by their written names (docs/schedule-ir.md "Payloads"): each must
// read back and have a handler, so a payload added to the IR without one fails here.
TEST(PayloadHandlers, EveryNamedPayloadHasAHandler) {
    const char* names[] = {"compute",          "gradient_bucket", "gradient_slices",  "gradient_shards",
                           "parameter_shards", "parameter_partitions", "parameter_broadcast", "overflow_flag",
                           "gradient_norm",    "trace_check",     "barrier",          "quantized_shards",
                           "quant_scales",     "quantized_gradient", "gradient_partitions"};
    for (const char* n : names) {
        auto p = zerosim::payload_from_name(n);
        ASSERT_TRUE(p.has_value()) << n;
        EXPECT_TRUE(zerorun::executor_serves(*p)) << n;
    }
}

// Every op of the schedules zerorun's tests run (stages 0-3, hpZ, MiCS, qwZ, qgZ at 4 ranks, 2 per
// node) carries a payload the table serves; between them they carry every ZeRO++ and MiCS payload
// and those of the plain stages listed at the end (so the loop above saw them).
TEST(PayloadHandlers, EveryPayloadOfTheTestSchedulesHasAHandler) {
    std::set<Payload> seen;
    for (const char* cfg : {"z0.json", "z1.json", "z2.json", "z3.json", "z3-hpz2.json", "z3-mics2.json", "z3-qwz.json", "z3-qgz.json"}) {
        const std::filesystem::path dir(ZERORUN_FIXTURES_DIR);
        auto c = zerosim::load_ds_config((dir / "configs" / cfg).string());
        auto m = zerosim::load_model((dir / "quant_model.json").string());
        ASSERT_TRUE(c.ok() && m.ok()) << cfg;
        zerosim::ScheduleOptions o;
        o.world = 4;
        o.steps = 1;
        o.gpus_per_node = 2;
        auto s = zerosim::build_schedule(m.value(), c.value(), o);
        ASSERT_TRUE(s.ok()) << cfg << ": " << (s.ok() ? "" : s.error().what());
        for (const auto& op : s.value().ops) {
            seen.insert(op.payload);
            EXPECT_TRUE(zerorun::executor_serves(op.payload)) << cfg << " op " << op.id << ": " << zerosim::payload_name(op.payload);
        }
    }
    for (Payload p : {Payload::QuantizedShards, Payload::QuantScales, Payload::QuantizedGradient, Payload::GradientPartitions,
                      Payload::ParameterShards, Payload::GradientShards, Payload::GradientSlices, Payload::ParameterPartitions,
                      Payload::ParameterBroadcast, Payload::Compute})
        EXPECT_TRUE(seen.count(p)) << zerosim::payload_name(p) << " is in none of the test schedules";
}

}  // namespace
