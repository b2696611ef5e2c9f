// Writers for a schedule (no timing yet): DeepSpeed comms_logger lines, a table for people, and
// the IR as JSON (docs/schedule-ir.md), plus the JSON reader the runtime uses.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "formats/comms_log.hpp"

namespace zerosim {

// The collectives of a schedule as the comms logger would log them on rank 0, with zero times.
std::vector<LoggedOp> logged_ops(const Schedule& s);

struct DeepSpeedLogOptions {
    bool header = true;          // a first line saying where the log came from
    bool log_summary = false;    // end with deepspeed.comm.log_summary(): barrier, table, barrier
};
void write_schedule_deepspeed(std::ostream& out, const Schedule& s, const DeepSpeedLogOptions& opt);

struct TableOptions {
    bool compute = false;        // include compute segments
};
void write_schedule_table(std::ostream& out, const Schedule& s, const TableOptions& opt);

void write_schedule_json(std::ostream& out, const Schedule& s);
Result<Schedule> read_schedule_json(const std::string& path);

}  // namespace zerosim
