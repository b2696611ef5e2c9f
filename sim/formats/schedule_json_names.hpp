// Private to the schedule JSON writer and reader: how the JSON names an op's rule and group and a
// process group. Every use of Op::rule, Op::group and ProcessGroup::name in the two files goes
// through these, so a change of those fields' types (issue 27 part 2: ids as enums) is made here.
#pragma once

#include <string>
#include <string_view>

#include "core/json_input.hpp"
#include "schedule/ir.hpp"

namespace zerosim::schedule_json {

inline std::string rule_name(const Op& op) { return ::zerosim::rule_name(op.rule); }
// The config keys of the op's rule, as the rule table lists them (comma separated).
inline std::string rule_config_keys(const Op& op) { return rule_info(op.rule).config_keys; }
// Op::rule from the JSON field: a rule of the table, else the field's error with the nearest name.
inline void set_rule(Op& op, const JsonField& f) {
    const std::string name = f.as_string();
    if (auto id = rule_from_name(name)) {
        op.rule = *id;
        return;
    }
    std::vector<std::string> names;
    for (const Rule& r : all_rules()) names.push_back(r.name);
    const std::string near = closest_key(name, names);
    f.fail_here("unknown rule \"" + name + "\"" + (near.empty() ? "" : " (did you mean \"" + near + "\"?)") +
                "; expected a rule of docs/zero-comm.md");
}

// A group kind from its JSON name, else the field's error naming the kinds there are.
inline GroupKind group_kind_of(const JsonField& f, const std::string& name) {
    if (auto k = group_from_name(name)) return *k;
    std::string kinds;
    // The name table is dense from 0 (ir.cpp checks it when it compiles); "?" is past its end.
    for (int i = 0; std::string_view(::zerosim::group_name(static_cast<GroupKind>(i))) != "?"; ++i)
        kinds += std::string(kinds.empty() ? "" : ", ") + ::zerosim::group_name(static_cast<GroupKind>(i));
    f.fail_here("unknown group \"" + name + "\"; expected one of " + kinds);
}

inline std::string group_name(const Op& op) { return ::zerosim::group_name(op.group); }
inline bool on_world_group(const Op& op) { return op.group == GroupKind::Dp; }
// Op::group from the JSON; check_schedule then refuses a kind meta.process_groups does not hold.
inline void set_group(Op& op, const JsonField& f) { op.group = group_kind_of(f, f.as_string()); }

inline std::string process_group_name(const ProcessGroup& g) { return ::zerosim::group_name(g.kind); }
inline ProcessGroup process_group_named(const JsonField& groups, const std::string& name) {
    return ProcessGroup{group_kind_of(groups, name), {}};
}

}  // namespace zerosim::schedule_json
