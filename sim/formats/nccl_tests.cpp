#include "formats/nccl_tests.hpp"

#include "core/json_input.hpp"

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

}  // namespace

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
        size_t k = has_root ? 5 : 4;
        if (!number(tok[k], r.time_us) || !number(tok[k + 1], r.algbw_gbs) || !number(tok[k + 2], r.busbw_gbs)) continue;
        double ip = 0;
        if (tok.size() >= k + 5 && number(tok[k + 4], ip)) r.inplace_time_us = ip;
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
