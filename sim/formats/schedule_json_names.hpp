// Private to the schedule JSON writer and reader: how the JSON names an op's rule and group and a
// process group. Every use of Op::rule, Op::group and ProcessGroup::name in the two files goes
// through these, so a change of those fields' types (issue 27 part 2: ids as enums) is made here.
#pragma once

#include <string>

#include "core/json_input.hpp"
#include "schedule/ir.hpp"

namespace zerosim::schedule_json {

inline std::string rule_name(const Op& op) { return op.rule; }
// The config keys of the op's rule, as the rule table lists them (comma separated).
inline std::string rule_config_keys(const Op& op) { return rule_info(op.rule).config_keys; }
// Op::rule from the JSON field: a rule of the table, else the field's error with the nearest id.
inline void set_rule(Op& op, const JsonField& f) {
    const std::string id = f.as_string();
    std::vector<std::string> ids;
    for (const Rule& r : all_rules()) {
        if (id == r.id) {
            op.rule = r.id;
            return;
        }
        ids.push_back(r.id);
    }
    const std::string near = closest_key(id, ids);
    f.fail_here("unknown rule \"" + id + "\"" + (near.empty() ? "" : " (did you mean \"" + near + "\"?)") +
                "; expected a rule of docs/zero-comm.md");
}

inline std::string group_name(const Op& op) { return op.group; }
inline bool on_world_group(const Op& op) { return op.group == "dp"; }
// Op::group from the JSON; check_schedule then refuses a name meta.process_groups does not hold.
inline void set_group(Op& op, const JsonField& f) { op.group = f.as_string(); }

inline std::string process_group_name(const ProcessGroup& g) { return g.name; }
inline ProcessGroup process_group_named(const std::string& name) { return ProcessGroup{name, {}}; }

}  // namespace zerosim::schedule_json
