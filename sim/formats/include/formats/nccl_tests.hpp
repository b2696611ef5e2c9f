// nccl-tests tables (all_reduce_perf and friends): one row type, one writer (`zerosim bench`'s
// predicted tables, `zerorun bench`'s measured ones), one reader (validate, calibrate).
//
// The reader takes nccl-tests output (all_reduce_perf and friends), as people paste it: rank prefixes
// ("0: ", "[1,0]<stdout>:", indented or behind a launcher's own tag such as SkyPilot's "(head,
// rank=0, pid=3808) "), numbers with 0-2 decimals or in scientific notation, "N/A" in #wrong,
// "none" redops, tables with or without the root column (older ones end in an "error" column
// instead of #wrong), header lines of any version, pastes without the column headers (a row of
// the full 13-column layout opens a table), and a table trimmed to "size time algbw busbw" (sizes
// with digit groups, "1_073_741_824"); any other bare "size ..." header is an error naming its
// columns. Sections are split at each new table header, so a file with several runs yields
// several tables.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// One row: size count type redop root, then time algbw busbw #wrong out of place and in place.
struct NcclTestsRow {
    int64_t bytes = 0;
    int64_t count = 0;
    std::string type;
    std::string redop;
    int64_t root = -1;           // -1: no root (or a table without the root column)
    double time_us = 0;          // out-of-place
    double algbw_gbs = 0;
    double busbw_gbs = 0;
    int64_t wrong = -1;          // -1: not checked ("N/A")
    double inplace_time_us = -1; // -1 when the table has no in-place columns
    double inplace_algbw_gbs = 0;
    double inplace_busbw_gbs = 0;
    int64_t inplace_wrong = -1;
    int line = 0;                // the line it was read from (0: not read from a file)
};

struct NcclTestsTable {
    std::string title;           // the nearest preceding comment line that is not a column header
    std::vector<NcclTestsRow> rows;
    // nccl-tests checks every result (-c 1, its default) and counts the wrong ones in #wrong; older
    // versions print a max "error" column instead, which is no count (false then).
    bool counts_wrong = true;
    // The footer line "# Out of bounds values : N FAILED" (src/common.cu prints FAILED when any
    // check failed), 0 when the table has none or it says OK.
    int failed_line = 0;
};

// How a program prints its rows. nccl-tests (src/common.cu) prints times as "%7.2f" below 100 µs,
// "%7.1f" below 10000 and "%7.0f" above, and "N/A" in #wrong when it does not check.
struct NcclTestsLayout {
    int time_width = 7;
    double one_decimal_from_us = 100;
    const char* not_checked = "N/A";
};
// The three column-header lines that open a table.
void write_nccl_tests_header(std::ostream& out);
void write_nccl_tests_row(std::ostream& out, const NcclTestsRow& r, const NcclTestsLayout& layout);
// The two summary lines that close a table ("# Out of bounds values : ...", "# Avg bus
// bandwidth    : ..."), with the program's own texts.
void write_nccl_tests_footer(std::ostream& out, const std::string& out_of_bounds, const std::string& avg_bus_bandwidth);

// A row (a line inside a table that starts with two whole numbers) must be whole and possible:
// size and count whole numbers, 0 or more, within int64 (checked, never wrapped); time finite, 0
// or more, at most kMaxOpTimeMs (reader_limits.hpp); bandwidths finite, 0 or more. Otherwise an
// error "NAME:LINE: nccl-tests row: ...". Only tables with rows are returned.
Result<std::vector<NcclTestsTable>> parse_nccl_tests(const std::string& text, const std::string& name);
// The same for text zerosim wrote itself (tests, the bench command's own tables): no tables if any
// row is not valid.
std::vector<NcclTestsTable> parse_nccl_tests(const std::string& text);
// A table whose own check failed is no measurement: a row with #wrong > 0 (out of place or in
// place) or a "FAILED" footer is an error "NAME:LINE: nccl-tests ..." naming the first such line.
// validate and calibrate read tables only through read_nccl_tests and parse_log, which call it.
Status nccl_tests_checks_passed(const std::vector<NcclTestsTable>& tables, const std::string& name);
// Strips launcher prefixes such as "0: " and "[1,0]<stdout>:".
std::string strip_launcher_prefix(const std::string& line);
// The collective a bench table names in its head: zerorun bench's "# zerorun bench: all_gather,
// backend ..." and zerosim bench's "# zerosim bench: predicted all_gather (...)"; "" where the head
// names none (nccl-tests' own tables name it only in the binary's name).
std::string bench_table_collective(const std::string& text);
Result<std::vector<NcclTestsTable>> read_nccl_tests(const std::string& path);

}  // namespace zerosim
