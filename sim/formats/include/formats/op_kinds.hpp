// A comms log per op kind: what DeepSpeed's log_summary() table holds (per record key and message
// size: count, total and average latency), read from the table itself or summed from per-op lines.
// From v0.17.6 (#7526) a DeepSpeed run at the default logger level prints only the table, so a
// validator that needs per-op lines has nothing to align; this is what it can compare instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/measured_logs.hpp"

namespace zerosim {

struct OpKindTotals {
    std::string key;                          // "all_reduce | [Caller Func: allreduce_bucket]"
    std::map<std::string, int64_t> sizes;     // printed message size -> count ("629.75 KB" -> 3)
    int64_t count = 0;
    double bytes = 0;                         // total, from the printed sizes (2-decimal precision)
    double time_ms = 0;                       // total latency as logged
    bool timed = false;                       // some op of the kind has a time above 0
    double average_bytes() const { return count ? bytes / static_cast<double>(count) : 0.0; }
};

// Where a log's per-kind totals come from.
enum class OpKindSource { OpLines, SummaryTable };

struct OpKinds {
    OpKindSource source = OpKindSource::OpLines;
    std::vector<OpKindTotals> kinds;          // first-seen order; log_summary's own barriers left out
};

// The log's per-op lines when it has any, else its log_summary() table.
OpKinds op_kinds_of(const MeasuredLog& log);
OpKinds op_kinds_from_ops(const std::vector<LoggedOp>& ops);
OpKinds op_kinds_from_summary(const std::vector<SummaryRow>& rows);

// A log that holds log_summary()'s table and no per-op lines.
inline bool summary_only(const MeasuredLog& log) { return log.ops.empty() && !log.summary.empty(); }

}  // namespace zerosim
