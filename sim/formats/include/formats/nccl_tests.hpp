// Reader for nccl-tests output (all_reduce_perf and friends), as people paste it: rank prefixes
// ("0: ", "[1,0]<stdout>:"), numbers with 0-2 decimals or in scientific notation, "N/A" in
// #wrong, "none" redops, tables with or without the root column (older ones end in an "error"
// column instead of #wrong), header lines of any version. Sections are split at each new table
// header, so a file with several runs yields several tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

struct NcclTestsRow {
    int64_t bytes = 0;
    int64_t count = 0;
    std::string type;
    std::string redop;
    double time_us = 0;          // out-of-place
    double algbw_gbs = 0;
    double busbw_gbs = 0;
    double inplace_time_us = -1; // -1 when the table has no in-place columns
};

struct NcclTestsTable {
    std::string title;           // the nearest preceding comment line that is not a column header
    std::vector<NcclTestsRow> rows;
};

std::vector<NcclTestsTable> parse_nccl_tests(const std::string& text);
// Strips launcher prefixes such as "0: " and "[1,0]<stdout>:".
std::string strip_launcher_prefix(const std::string& line);
Result<std::vector<NcclTestsTable>> read_nccl_tests(const std::string& path);

}  // namespace zerosim
