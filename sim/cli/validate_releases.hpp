// zerosim validate's handling of DeepSpeed releases (private to the front end): which releases
// wrote the measured log, said on stderr against --deepspeed, and the per-op-kind comparison of a
// log that holds only log_summary()'s table.
#pragma once

#include <string>

#include "formats/measured_logs.hpp"
#include "formats/op_kinds.hpp"

namespace zerosim::cli {

// "zerosim: note: ..." naming the release range the measured log shows and the release assumed
// (--deepspeed if given, else the newest of that range), when --deepspeed is given, the log holds
// only the summary table, or no release of the range is v0.14.2 (a log of v0.14.2's own form needs
// no note); a warning when --deepspeed lies outside the range or the predicted log's prefix names
// other releases. Returns 2 for a bad --deepspeed.
int note_log_releases(const MeasuredLog& pred, const MeasuredLog& meas, const std::string& deepspeed);

// Either log holds only a log_summary() table: compare per op kind, written to `output` never over
// one of `inputs`. Returns the exit code.
int validate_op_kinds(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, const std::string& what,
                      const std::string& format, const std::string& output, const std::vector<std::string>& inputs);

}  // namespace zerosim::cli
