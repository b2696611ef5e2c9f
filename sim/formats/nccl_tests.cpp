#include "formats/nccl_tests.hpp"

#include "core/json_input.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace zerosim {

std::string strip_launcher_prefix(const std::string& line) {
    size_t i = 0;
    if (i < line.size() && line[i] == '[') {
        auto close = line.find("]<stdout>:");
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

std::vector<NcclTestsTable> parse_nccl_tests(const std::string& text) {
    std::vector<NcclTestsTable> tables;
    std::istringstream in(text);
    std::string raw, title;
    bool has_root = true;
    bool open = false;
    while (std::getline(in, raw)) {
        std::string line = strip_launcher_prefix(raw);
        std::istringstream ls(line);
        std::vector<std::string> tok;
        std::string t;
        while (ls >> t) tok.push_back(t);
        if (tok.empty()) continue;
        if (tok[0][0] == '#' || tok[0][0] == '=') {
            // "#  size  count  type  redop  root  time ..." starts a table.
            if (line.find("size") != std::string::npos && line.find("count") != std::string::npos &&
                line.find("type") != std::string::npos) {
                has_root = line.find("root") != std::string::npos;
                tables.push_back(NcclTestsTable{title, {}});
                open = true;
            } else if (line.find("(B)") == std::string::npos && line.find("out-of-place") == std::string::npos) {
                title = line;
            }
            continue;
        }
        if (!open) continue;
        // size count type redop [root] time algbw busbw #wrong [time algbw busbw #wrong]
        size_t need = has_root ? 9 : 8;
        double size = 0, count = 0;
        if (tok.size() < need || !number(tok[0], size) || !number(tok[1], count)) continue;
        NcclTestsRow r;
        r.bytes = static_cast<int64_t>(size);
        r.count = static_cast<int64_t>(count);
        r.type = tok[2];
        r.redop = tok[3];
        if (has_root) r.root = count_or(tok[4], -1);
        size_t k = has_root ? 5 : 4;
        if (!number(tok[k], r.time_us) || !number(tok[k + 1], r.algbw_gbs) || !number(tok[k + 2], r.busbw_gbs)) continue;
        r.wrong = count_or(tok[k + 3], -1);
        double ip = 0;
        if (tok.size() >= k + 5 && number(tok[k + 4], ip)) {
            r.inplace_time_us = ip;
            double alg = 0, bus = 0;
            if (tok.size() >= k + 7 && number(tok[k + 5], alg) && number(tok[k + 6], bus)) {
                r.inplace_algbw_gbs = alg;
                r.inplace_busbw_gbs = bus;
            }
            if (tok.size() >= k + 8) r.inplace_wrong = count_or(tok[k + 7], -1);
        }
        tables.back().rows.push_back(r);
    }
    std::vector<NcclTestsTable> nonempty;
    for (auto& t : tables)
        if (!t.rows.empty()) nonempty.push_back(std::move(t));
    return nonempty;
}

Result<std::vector<NcclTestsTable>> read_nccl_tests(const std::string& path) {
    auto text = read_text_file(path, "nccl-tests output");
    if (!text) return text.error();
    auto tables = parse_nccl_tests(text.value());
    if (tables.empty()) return Error{path, "", "no nccl-tests table found (expected a '#  size  count  type ...' header)"};
    return tables;
}

}  // namespace zerosim
