// Readers for the logs the validator compares: DeepSpeed comms_logger output (verbose lines and the
// log_summary table, with the variants of docs/zero-comm.md), nccl-tests tables, and zerosim's and
// zerorun's JSON logs. Errors carry the file and line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "formats/comms_log.hpp"
#include "formats/nccl_tests.hpp"
#include "formats/reader_limits.hpp"

namespace zerosim {

enum class LogFormat { DeepSpeed, NcclTests, ZerosimJson };
const char* log_format_name(LogFormat f);

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
    std::vector<LoggedOp> ops;           // in order, log_summary's own barriers left out
    std::vector<SummaryRow> summary;
    std::vector<NcclTestsTable> tables;  // nccl-tests
    // What the log states about its run (JSON logs; 0 where it does not say): the validator
    // refuses to compare logs that state different ones.
    int64_t world = 0;
    int64_t total_params = 0;
    // N of the first "[logging.py:N:log_dist]" prefix in the log (0: none), which names the
    // DeepSpeed releases that wrote it (formats/log_release.hpp).
    int log_dist_line = 0;
    // The global ranks its comm op lines name ("[Rank N]", log_dist's prefix), ascending; empty
    // when none names one (a JSON log, or another prefix). Each op's own is LoggedOp::rank.
    std::vector<int64_t> ranks;
    // The first comm op line that names no rank (0: every one does, or none does): in a log of
    // several ranks such a line belongs to no one, and split_by_rank refuses it.
    int unranked_line = 0;
};

Result<MeasuredLog> parse_log(const std::string& text, const std::string& name);
Result<MeasuredLog> read_log(const std::string& path);

// Per-rank logs (docs/validate.md, "One log per rank"). A log whose lines name several ranks
// split into one log per rank, ascending, each with its ops in order and `ranks` = {N}; the
// log_summary table, whose rank the file does not say, goes with none of them. A log of one rank
// or none comes back whole. Refused: a comm op line without a rank among lines of several.
Result<std::vector<MeasuredLog>> split_by_rank(MeasuredLog log);
// N of a file named "rankN" or "rankN.<ext>" (rank0.log, rank12.json), whatever its folder;
// nullopt for any other name.
std::optional<int64_t> rank_in_file_name(const std::string& path);
// The files of a folder named as rank_in_file_name reads them, by rank; empty when `path` is not
// a folder or holds none (the caller then reads it as one file, and says what it is).
std::vector<std::string> rank_log_files(const std::string& path);

}  // namespace zerosim
