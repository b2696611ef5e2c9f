// Writers for a schedule (no timing yet): DeepSpeed comms_logger lines and a table for people; the
// IR as JSON and its one reader are in formats/schedule_json.hpp (included here).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "schedule/stream.hpp"
#include "formats/comms_log.hpp"
#include "formats/schedule_json.hpp"

namespace zerosim {

// Schedule -> comms_logger records, in this one place for the schedule, predicted and measured
// logs and the validator's view of a prediction.
//
// One collective as DeepSpeed's comms logger records it on rank 0 (DeepSpeed v0.14.2
// comm/comm.py timed_op, utils/comms_logging.py append): record, caller, size as logged and as
// printed, its phase label (phase_label) and line = the op's id; given a time, its bandwidths
// (calc_bw_log, ds_bandwidth) and the line's timestamp (the op's end, seconds).
LoggedOp logged_op(const Schedule& s, const Op& op, double time_ms = 0.0, double end_s = 0.0);
LoggedOp logged_op(const ScheduleMeta& meta, const Op& op, double time_ms = 0.0, double end_s = 0.0);

// An op's time as a log reports it and when it ended.
struct OpLogTime {
    double time_ms = 0.0;
    double end_s = 0.0;
};
// The collectives of a schedule in order; `times` is indexed like s.ops (empty: zero times, as
// `zerosim schedule` prints them).
std::vector<LoggedOp> logged_ops(const Schedule& s, const std::vector<OpLogTime>& times = {});

struct DeepSpeedLogOptions {
    bool header = true;          // a first line saying where the log came from
    bool log_summary = false;    // end with deepspeed.comm.log_summary(): barrier, table, barrier
};
// Each writer takes a schedule whole or as a stream (schedule/stream.hpp), writing op by op.
void write_schedule_deepspeed(std::ostream& out, const Schedule& s, const DeepSpeedLogOptions& opt);
void write_schedule_deepspeed(std::ostream& out, const ScheduleStream& s, const DeepSpeedLogOptions& opt);

struct TableOptions {
    bool compute = false;        // include compute segments
};
void write_schedule_table(std::ostream& out, const Schedule& s, const TableOptions& opt);
void write_schedule_table(std::ostream& out, const ScheduleStream& s, const TableOptions& opt);

}  // namespace zerosim
