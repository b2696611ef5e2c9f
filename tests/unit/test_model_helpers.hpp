// Shared by the model tests (test_model.cpp, test_hf_config.cpp): loading a model that must load
// or must fail, and finding parameters, modules and calls by name.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inputs/model.hpp"
#include "test_helpers.hpp"

namespace zerosim::model_test {

inline Model load_ok(const std::string& path) {
    auto r = load_model(path);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
    if (!r.ok()) return Model{};
    return std::move(r).value();
}

inline Model hf_inline(const std::string& name, const std::string& json) { return load_ok(zerosim::test::temp_file(name, json)); }

inline std::string load_error(const std::string& path) {
    auto r = load_model(path);
    EXPECT_FALSE(r.ok()) << path << " loaded but should not have";
    return r.ok() ? std::string() : r.error().what();
}

inline int param_index(const Model& m, const std::string& name) {
    for (size_t i = 0; i < m.params.size(); ++i)
        if (m.params[i].name == name) return static_cast<int>(i);
    return -1;
}

inline int module_index(const Model& m, const std::string& name) {
    for (size_t i = 0; i < m.modules.size(); ++i)
        if (m.modules[i].name == name) return static_cast<int>(i);
    return -1;
}

inline const CallNode* call_named(const Model& m, const std::string& name) {
    for (const auto& c : m.calls)
        if (c.name == name) return &c;
    return nullptr;
}

// Module names in forward order, keeping only those whose name starts with `prefix`.
inline std::vector<std::string> forward_names(const Model& m, const std::string& prefix) {
    std::vector<std::string> out;
    for (int mi : m.forward_order)
        if (m.modules[mi].name.rfind(prefix, 0) == 0) out.push_back(m.modules[mi].name.substr(prefix.size()));
    return out;
}

inline std::vector<std::string> call_names(const Model& m) {
    std::vector<std::string> out;
    for (const auto& c : m.calls) out.push_back(c.name);
    return out;
}

}  // namespace zerosim::model_test
