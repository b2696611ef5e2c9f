// Small models and configs written inline in a test, and the schedule built from them: the
// hand-derived rule tests start here.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/schedule.hpp"

namespace zerosim::test {

inline Model param_list(const std::string& json) {
    auto m = model_from_param_list_json("inline-model.json", json);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.value();
}

inline DsConfig ds(const std::string& json) {
    auto c = parse_ds_config("inline-ds.json", json);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().what());
    return c.value();
}

inline Schedule build(const Model& m, const DsConfig& c, int64_t world, int steps = 1, std::vector<int> overflow = {}) {
    ScheduleOptions o;
    o.world = world;
    o.steps = steps;
    o.overflow_steps = std::move(overflow);
    auto s = build_schedule(m, c, o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    return s.value();
}

}  // namespace zerosim::test
