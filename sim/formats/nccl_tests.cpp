#include "formats/nccl_tests.hpp"

#include "core/json_input.hpp"
#include "formats/reader_limits.hpp"

#include <algorithm>
#include <charconv>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace zerosim {

std::string strip_launcher_prefix(const std::string& line) {
    // mpirun --tag-output writes "[1,0]<stdout>:", indented in some pastes and behind a job
    // launcher's own tag in others (SkyPilot: "(head, rank=0, pid=3808) [1,0]<stdout>:").
    size_t i = line.find_first_not_of(" \t");
    if (i != std::string::npos && (line[i] == '[' || line[i] == '(')) {
        auto close = line.find("]<stdout>:", i);
        if (close != std::string::npos) return line.substr(close + 10);
    }
    size_t j = 0;
    while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
    if (j > 0 && j + 1 < line.size() && line[j] == ':' && line[j + 1] == ' ') return line.substr(j + 2);
    return line;
}

namespace {

bool number(const std::string& tok, double& v) {
    if (tok.empty()) return false;
    char* end = nullptr;
    v = std::strtod(tok.c_str(), &end);
    return end && *end == '\0';
}

// A count column (#wrong, root): a whole number that fits, else `fallback`.
int64_t count_or(const std::string& tok, int64_t fallback) {
    double v = 0;
    if (!number(tok, v) || !(v >= -1e15 && v <= 1e15)) return fallback;
    return static_cast<int64_t>(v);
}

std::string time_cell(double us, const NcclTestsLayout& layout) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%*.*f", layout.time_width, us >= 10000 ? 0 : us >= layout.one_decimal_from_us ? 1 : 2, us);
    return buf;
}

std::string wrong_cell(int64_t wrong, const NcclTestsLayout& layout) {
    return wrong < 0 ? layout.not_checked : std::to_string(wrong);
}

}  // namespace

void write_nccl_tests_header(std::ostream& out) {
    out << "#                                                              out-of-place                       in-place          \n";
    out << "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    out << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
}

void write_nccl_tests_row(std::ostream& out, const NcclTestsRow& r, const NcclTestsLayout& layout) {
    char line[512];
    std::snprintf(line, sizeof line, "%12lld  %12lld  %8s  %6s  %6lld  %s  %6.2f  %6.2f  %5s  %s  %6.2f  %6.2f  %5s\n",
                  static_cast<long long>(r.bytes), static_cast<long long>(r.count), r.type.c_str(), r.redop.c_str(),
                  static_cast<long long>(r.root), time_cell(r.time_us, layout).c_str(), r.algbw_gbs, r.busbw_gbs,
                  wrong_cell(r.wrong, layout).c_str(), time_cell(r.inplace_time_us, layout).c_str(), r.inplace_algbw_gbs,
                  r.inplace_busbw_gbs, wrong_cell(r.inplace_wrong, layout).c_str());
    out << line;
}

void write_nccl_tests_footer(std::ostream& out, const std::string& out_of_bounds, const std::string& avg_bus_bandwidth) {
    out << "# Out of bounds values : " << out_of_bounds << "\n";
    out << "# Avg bus bandwidth    : " << avg_bus_bandwidth << " \n";
}

namespace {

// "-256", "18446744073709551616", "1024": a whole number with an optional sign (what starts a row).
bool integer_like(const std::string& tok) {
    size_t i = tok[0] == '-' || tok[0] == '+' ? 1 : 0;
    return i < tok.size() && tok.find_first_not_of("0123456789", i) == std::string::npos;
}

// A size or a count: a whole number, 0 or more, within int64 (checked, never wrapped: 2^64 is an
// error, not a negative size). nccl-tests prints 0-byte rows (-b 0), so 0 is a size.
const char* count_problem(const std::string& tok, int64_t& out) {
    if (tok[0] == '-') return "is negative";
    auto r = std::from_chars(tok.data() + (tok[0] == '+' ? 1 : 0), tok.data() + tok.size(), out);
    if (r.ec == std::errc::result_out_of_range) return "does not fit in 64 bits";
    if (r.ec != std::errc() || r.ptr != tok.data() + tok.size()) return "is not a whole number";
    return nullptr;
}

Error row_error(const std::string& name, int line, const std::string& msg) {
    return Error{name + ":" + std::to_string(line), "", "nccl-tests row: " + msg};
}

}  // namespace

namespace {

// A size printed with digit groups ("1_073_741_824", as one author's trimmed table has them).
std::string without_digit_groups(const std::string& tok) {
    if (tok.find('_') == std::string::npos || tok.front() == '_' || tok.back() == '_') return tok;
    std::string out;
    for (char c : tok)
        if (c != '_') out += c;
    return out;
}

// A header line without the leading '#': "size time algbw busbw" opens a trimmed table (an
// author kept only those columns); any other bare "size ..." header is one the reader cannot map.
bool bare_header(const std::vector<std::string>& tok) { return !tok.empty() && tok[0] == "size"; }

// What the reader has found so far: the tables, the title the next one takes, and the columns
// of the table it is in.
struct NcclTestsScan {
    std::vector<NcclTestsTable> tables;
    std::string title;
    bool has_root = true;
    bool trimmed = false;   // size time algbw busbw only
    bool open = false;
    int line = 0;           // the line being read
};

std::vector<std::string> nccl_tests_words(const std::string& line) {
    std::istringstream ls(line);
    std::vector<std::string> tok;
    std::string t;
    while (ls >> t) tok.push_back(t);
    return tok;
}

// A line starting with '#' or '=': a table's header, or the title of the tables after it.
void nccl_tests_comment_line(NcclTestsScan& scan, const std::string& line) {
    // "#  size  count  type  redop  root  time ..." starts a table.
    if (line.find("size") != std::string::npos && line.find("count") != std::string::npos &&
        line.find("type") != std::string::npos) {
        scan.has_root = line.find("root") != std::string::npos;
        scan.trimmed = false;
        scan.tables.push_back(NcclTestsTable{scan.title, {}});
        scan.tables.back().counts_wrong = line.find("#wrong") != std::string::npos;
        scan.open = true;
    } else if (line.find("Out of bounds values") != std::string::npos) {
        // The footer closes the table above it; nccl-tests prints "N FAILED" or "N OK".
        if (!scan.tables.empty() && line.find("FAILED") != std::string::npos && !scan.tables.back().failed_line)
            scan.tables.back().failed_line = scan.line;
    } else if (line.find("(B)") == std::string::npos && line.find("out-of-place") == std::string::npos) {
        scan.title = line;
    }
}

// A row of a trimmed table, its four columns there and its size whole.
Result<NcclTestsRow> nccl_tests_trimmed_row(const std::vector<std::string>& tok, const std::string& name, int n) {
    // size time algbw busbw: the size may carry digit groups; no count, type or in-place.
    NcclTestsRow r;
    std::string size = without_digit_groups(tok[0]);
    if (const char* p = count_problem(size, r.bytes)) return row_error(name, n, "size " + tok[0] + " " + p + ": expected bytes, 0 or more");
    if (!number(tok[1], r.time_us) || !number(tok[2], r.algbw_gbs) || !number(tok[3], r.busbw_gbs))
        return row_error(name, n, "the time, algbw and busbw columns must be numbers");
    if (const char* p = time_problem(r.time_us / 1e3)) return row_error(name, n, time_error("time (us)", r.time_us, p));
    r.line = n;
    return r;
}

// The in-place columns of a full row, from column k + 4 on, where the row has them.
Status nccl_tests_inplace_columns(const std::vector<std::string>& tok, size_t k, NcclTestsRow& r, const std::string& name, int n) {
    double ip = 0;
    if (!(tok.size() >= k + 5 && number(tok[k + 4], ip))) return std::nullopt;
    if (const char* p = time_problem(ip / 1e3)) return row_error(name, n, time_error("in-place time (us)", ip, p));
    r.inplace_time_us = ip;
    double alg = 0, bus = 0;
    if (tok.size() >= k + 7 && number(tok[k + 5], alg) && number(tok[k + 6], bus)) {
        for (double bw : {alg, bus})
            if (const char* p = rate_problem(bw))
                return row_error(name, n, std::string("in-place bandwidth ") + p + ": expected a finite rate, 0 or more");
        r.inplace_algbw_gbs = alg;
        r.inplace_busbw_gbs = bus;
    }
    if (tok.size() >= k + 8) r.inplace_wrong = count_or(tok[k + 7], -1);
    return std::nullopt;
}

// A row of a full table (it starts with two whole numbers); it must be whole and possible.
Result<NcclTestsRow> nccl_tests_full_row(const std::vector<std::string>& tok, bool has_root, const std::string& name, int n) {
    // size count type redop [root] time algbw busbw #wrong [time algbw busbw #wrong]
    size_t need = has_root ? 9 : 8;
    if (tok.size() < need)
        return row_error(name, n, "expected at least " + std::to_string(need) + " columns (size, count, type, redop" +
                                      (has_root ? ", root" : "") + ", time, algbw, busbw, #wrong), found " +
                                      std::to_string(tok.size()) + " (truncated?)");
    NcclTestsRow r;
    if (const char* p = count_problem(tok[0], r.bytes)) return row_error(name, n, "size " + tok[0] + " " + p + ": expected bytes, 0 or more");
    if (const char* p = count_problem(tok[1], r.count)) return row_error(name, n, "count " + tok[1] + " " + p + ": expected elements, 0 or more");
    r.type = tok[2];
    r.redop = tok[3];
    if (has_root) r.root = count_or(tok[4], -1);
    size_t k = has_root ? 5 : 4;
    if (!number(tok[k], r.time_us) || !number(tok[k + 1], r.algbw_gbs) || !number(tok[k + 2], r.busbw_gbs))
        return row_error(name, n, "the time, algbw and busbw columns must be numbers");
    if (const char* p = time_problem(r.time_us / 1e3)) return row_error(name, n, time_error("time (us)", r.time_us, p));
    for (double bw : {r.algbw_gbs, r.busbw_gbs})
        if (const char* p = rate_problem(bw)) return row_error(name, n, std::string("bandwidth ") + p + ": expected a finite rate, 0 or more");
    r.wrong = count_or(tok[k + 3], -1);
    if (auto failed = nccl_tests_inplace_columns(tok, k, r, name, n)) return *failed;
    r.line = n;
    return r;
}

}  // namespace

Result<std::vector<NcclTestsTable>> parse_nccl_tests(const std::string& text, const std::string& name) {
    NcclTestsScan scan;
    std::string raw;
    int n = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        raw.assign(text, pos, eol == std::string::npos ? std::string::npos : eol - pos);
        pos = eol == std::string::npos ? text.size() : eol + 1;
        scan.line = ++n;
        std::string line = strip_launcher_prefix(raw);
        std::vector<std::string> tok = nccl_tests_words(line);
        if (tok.empty()) continue;
        if (tok[0][0] == '#' || tok[0][0] == '=') {
            nccl_tests_comment_line(scan, line);
            continue;
        }
        if (bare_header(tok)) {
            if (tok != std::vector<std::string>{"size", "time", "algbw", "busbw"})
                return row_error(name, n, "a table header with columns '" + line.substr(line.find("size")) +
                                              "': the reader knows nccl-tests' full columns (size count type redop [root] time "
                                              "algbw busbw ...) and the trimmed 'size time algbw busbw'");
            scan.trimmed = true;
            scan.tables.push_back(NcclTestsTable{scan.title, {}});
            scan.open = true;
            continue;
        }
        if (scan.trimmed) {
            if (!scan.open || tok.size() != 4 || !integer_like(without_digit_groups(tok[0]))) continue;
            auto row = nccl_tests_trimmed_row(tok, name, n);
            if (!row) return row.error();
            scan.tables.back().rows.push_back(row.value());
            continue;
        }
        // A row starts with two whole numbers (size, count); any other line inside a table (a
        // launcher's or NCCL's own messages) is not one. A row must be whole and possible.
        if (tok.size() < 2 || !integer_like(tok[0]) || !integer_like(tok[1])) continue;
        // Some pastes leave out the column headers: a row of nccl-tests' full current layout (13
        // columns: size count type redop root, then time algbw busbw #wrong twice) opens a table.
        if (!scan.open && tok.size() == 13) {
            scan.has_root = true;
            scan.tables.push_back(NcclTestsTable{scan.title, {}});
            scan.tables.back().counts_wrong = true;
            scan.open = true;
        }
        if (!scan.open) continue;
        auto row = nccl_tests_full_row(tok, scan.has_root, name, n);
        if (!row) return row.error();
        scan.tables.back().rows.push_back(row.value());
    }
    std::vector<NcclTestsTable> nonempty;
    for (auto& t : scan.tables)
        if (!t.rows.empty()) nonempty.push_back(std::move(t));
    return nonempty;
}

std::vector<NcclTestsTable> parse_nccl_tests(const std::string& text) {
    auto tables = parse_nccl_tests(text, "");
    return tables ? std::move(tables).value() : std::vector<NcclTestsTable>{};
}

Status nccl_tests_checks_passed(const std::vector<NcclTestsTable>& tables, const std::string& name) {
    // A wrong result makes the run's time meaningless (a broken transport can be fast); nccl-tests
    // itself exits non-zero on it (src/common.cu, "Out of bounds values ... FAILED").
    for (const auto& t : tables) {
        if (t.counts_wrong)
            for (const auto& r : t.rows)
                if (r.wrong > 0 || r.inplace_wrong > 0)
                    return row_error(name, r.line,
                                     "#wrong is " + std::to_string(std::max(r.wrong, r.inplace_wrong)) + " (" +
                                         (r.wrong > 0 ? "out of place" : "in place") +
                                         "): the run's own check found wrong results; a failed run is no measurement to "
                                         "validate or calibrate against (rerun nccl-tests until #wrong is 0)");
        if (t.failed_line)
            return Error{name + ":" + std::to_string(t.failed_line), "",
                         "nccl-tests footer says FAILED (values out of bounds): the run's own check failed; a failed run is "
                         "no measurement to validate or calibrate against"};
    }
    return std::nullopt;
}

Result<std::vector<NcclTestsTable>> read_nccl_tests(const std::string& path) {
    auto text = read_text_file(path, "nccl-tests output");
    if (!text) return text.error();
    auto parsed = parse_nccl_tests(text.value(), path);
    if (!parsed) return parsed.error();
    auto tables = std::move(parsed).value();
    if (tables.empty()) return Error{path, "", "no nccl-tests table found (expected a '#  size  count  type ...' header)"};
    if (auto failed = nccl_tests_checks_passed(tables, path)) return *failed;
    return tables;
}

std::string bench_table_collective(const std::string& text) {
    for (const char* head : {"# zerorun bench: ", "# zerosim bench: predicted "}) {
        const size_t at = text.find(head);
        if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) continue;
        const size_t from = at + std::string(head).size();
        const size_t end = text.find_first_of(", (\n", from);
        return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
    }
    return "";
}

}  // namespace zerosim
