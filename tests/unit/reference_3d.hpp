// The real DeepSpeed v0.14.2 runs of ZeRO inside 3D parallelism
// (../shared/reference/deepspeed-v0.14.2-cpu-3d, one log per rank): builds rank R's schedule for a
// run as `zerosim schedule --ds-config RUN/ds_config.json --model configs/models/reference-3d/KIND.json
// --world 4 ... --steps 3 --rank R` does, and compares its logged ops with RUN/rankR.log op for op
// (record, caller, size as printed, order). Each test file of a kind (test_3d_*.cpp) calls it.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "formats/schedule_outputs.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "reference_log_ops.hpp"
#include "schedule/check.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim::test {

inline const std::string kReference3d = "deepspeed-v0.14.2-cpu-3d/";

// The model file of a kind, as the repository ships it.
inline std::string reference_3d_model(const std::string& kind) {
    return std::string(ZEROSIM_CONFIGS_DIR) + "/models/reference-3d/" + kind + ".json";
}

// The layout a run's run.json records (parallel_layout pp/tp/sp/ep) on its world.
inline ScheduleOptions reference_3d_options(const std::string& run, int64_t rank) {
    auto j = nlohmann::json::parse(read_file(reference(kReference3d + run + "/run.json")));
    const auto& l = j.at("parallel_layout");
    ScheduleOptions o;
    o.world = j.at("world_size").get<int64_t>();
    o.steps = j.at("steps").get<int>();
    o.layout.world = o.world;
    o.layout.pipe = l.at("pp").get<int64_t>();
    o.layout.tensor = l.at("tp").get<int64_t>();
    o.layout.sequence = l.at("sp").get<int64_t>();
    o.layout.expert = l.at("ep").get<int64_t>();
    if (l.value("partition_method", "parameters") == "uniform") o.pp_partition = PipePartition::Uniform;
    o.rank = rank;
    return o;
}

inline Result<Schedule> reference_3d_schedule(const std::string& run, const std::string& kind, int64_t rank) {
    auto cfg = load_ds_config(reference(kReference3d + run + "/ds_config.json"));
    if (!cfg) return cfg.error();
    auto model = load_model(reference_3d_model(kind));
    if (!model) return model.error();
    return build_schedule(model.value(), cfg.value(), reference_3d_options(run, rank));
}

// The ops of one rule, in schedule order (pointers into `s`: keep it alive).
inline std::vector<const Op*> ops_of(const Schedule& s, RuleId rule) {
    std::vector<const Op*> out;
    for (const auto& op : s.ops)
        if (op.rule == rule) out.push_back(&op);
    return out;
}

// Every rank of the run, op for op.
inline void expect_3d_run_matches(const std::string& run, const std::string& kind) {
    const int64_t world = reference_3d_options(run, 0).world;
    for (int64_t r = 0; r < world; ++r) {
        SCOPED_TRACE(run + " rank " + std::to_string(r));
        auto s = reference_3d_schedule(run, kind, r);
        ASSERT_TRUE(s.ok()) << s.error().what();
        EXPECT_FALSE(check_schedule(s.value(), run)) << check_schedule(s.value(), run)->what();
        auto real = real_ops(read_file(reference(kReference3d + run + "/rank" + std::to_string(r) + ".log")));
        auto ours = logged_ops(s.value());
        ASSERT_FALSE(real.empty());
        ASSERT_EQ(ours.size(), real.size());
        for (size_t i = 0; i < real.size(); ++i) {
            SCOPED_TRACE("op " + std::to_string(i));
            EXPECT_EQ(ours[i].record_key() + " " + ours[i].size_text, real[i].key + " " + real[i].size);
        }
    }
}

}  // namespace zerosim::test
