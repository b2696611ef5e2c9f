// Readers for the logs the validator compares: DeepSpeed comms_logger output (verbose lines and the
// log_summary table, with the variants of docs/zero-comm.md), nccl-tests tables, and zerosim's and
// zerorun's JSON logs. Errors carry the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "formats/nccl_tests.hpp"

namespace zerosim {

enum class LogFormat { DeepSpeed, NcclTests, ZerosimJson };
const char* log_format_name(LogFormat f);

struct LogOp {
    std::string record;       // all_reduce, ...
    std::string caller;       // "" without debug
    std::string size_text;    // as printed ("134.33 MB")
    double bytes = 0;         // from the printed size (approximate)
    double time_ms = 0;
    int line = 0;             // in the file
    std::string phase;        // "step0.micro0.forward" from "##### PHASE" markers, "" if none
};

struct SummaryRow {
    std::string record_key;   // "all_reduce | [Caller Func: allreduce_bucket]"
    std::string size_text;
    int64_t count = 0;
    double total_ms = 0, avg_ms = 0, tput_gbps = 0, busbw_gbps = 0;
    int line = 0;
};

struct MeasuredLog {
    std::string path;
    LogFormat format = LogFormat::DeepSpeed;
    std::vector<LogOp> ops;              // in order, log_summary's own barriers left out
    std::vector<SummaryRow> summary;
    std::vector<NcclTestsTable> tables;  // nccl-tests
};

Result<MeasuredLog> parse_log(const std::string& text, const std::string& name);
Result<MeasuredLog> read_log(const std::string& path);

}  // namespace zerosim
