// The documents state every rule the code follows: each rule id of the IR's rule table appears in
// docs/zero-comm.md, with each config key the table gives it, so a new rule cannot land unstated.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "schedule/ir.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

TEST(Docs, ZeroCommStatesEveryRuleWithItsKeys) {
    const std::string doc = test::read_file(std::string(ZEROSIM_DOCS_DIR) + "/zero-comm.md");
    ASSERT_FALSE(doc.empty()) << "docs/zero-comm.md is missing";
    for (const Rule& r : all_rules()) {
        EXPECT_NE(doc.find(std::string("`") + r.name + "`"), std::string::npos) << "rule " << r.name << " is not in docs/zero-comm.md";
        std::stringstream keys(r.config_keys);
        for (std::string k; std::getline(keys, k, ',');) {
            while (!k.empty() && k.front() == ' ') k.erase(0, 1);
            if (k.empty()) continue;
            // Keys appear as written in a config, with or without their section.
            std::string leaf = k.substr(k.rfind('.') == std::string::npos ? 0 : k.rfind('.') + 1);
            EXPECT_NE(doc.find(leaf), std::string::npos) << "rule " << r.name << ": key " << k << " is not in docs/zero-comm.md";
        }
    }
}
