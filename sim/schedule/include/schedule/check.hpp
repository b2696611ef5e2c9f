// The one consistency check of a schedule IR: the schedule JSON reader runs it on what it reads,
// the runtime on every schedule before it executes one. A schedule that passes can be executed:
// every op's payload fits its kind, its sizes fit its parameters and the partition layout, and it
// waits only for earlier ops. docs/schedule-ir.md states each rule.
#pragma once

#include <string>

#include "core/error.hpp"
#include "schedule/ir.hpp"

namespace zerosim {

// The first rule the schedule breaks, as an Error for `file`: field "ops[N]" for op N (the message
// names the op's field), "meta.partition..." or "parameters[N]" for the metadata.
Status check_schedule(const Schedule& s, const std::string& file);

}  // namespace zerosim
