#include "formats/wall_clock_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/json_input.hpp"

namespace zerosim {

namespace {

// "2433.78" as timer.py prints it ("{:.2f}"): a plain decimal, nothing after it.
bool read_ms(const std::string& text, double& out) {
    if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) return false;
    errno = 0;
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);
    return errno == 0 && end && *end == '\0' && std::isfinite(out);
}

std::string ms_text(double ms) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", ms);
    return buf;
}

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// One "time (ms) | name: value | ..." line into micro-step figures; an error names the field.
Status read_micro_line(const std::string& file, int line_no, const std::string& fields, WallClockMicroStep& m) {
    const std::string where = "line " + std::to_string(line_no);
    std::istringstream in(fields);
    std::string part;
    bool fwd = false, bwd = false;
    while (std::getline(in, part, '|')) {
        part = trim(part);
        if (part.empty() || part == "time (ms)") continue;
        const size_t colon = part.find(':');
        if (colon == std::string::npos) return Error{file, where, "expected 'name: milliseconds', found '" + part + "'"};
        const std::string name = trim(part.substr(0, colon));
        double v = 0;
        if (!read_ms(trim(part.substr(colon + 1)), v) || v < 0)
            return Error{file, where + " " + name, "expected a finite, non-negative number of milliseconds, found '" +
                                                       trim(part.substr(colon + 1)) + "'"};
        if (name == "fwd_microstep") m.fwd_ms = v, fwd = true;
        else if (name == "bwd_microstep") m.bwd_ms = v, bwd = true;
        else if (name == "bwd_inner_microstep") m.bwd_inner_ms = v;
        else if (name == "bwd_allreduce_microstep") m.bwd_allreduce_ms = v;
        else if (name == "step_microstep") m.step_ms = v;
    }
    if (!fwd || !bwd) return Error{file, where, std::string("a micro-step timer line without ") + (fwd ? "bwd_microstep" : "fwd_microstep")};
    // timer.py rounds each to 0.01 ms: a part of backward may exceed it by that, not more.
    if (m.bwd_inner_ms > m.bwd_ms + 0.02)
        return Error{file, where, "bwd_inner_microstep " + ms_text(m.bwd_inner_ms) + " ms exceeds bwd_microstep " +
                                      ms_text(m.bwd_ms) + " ms, of which it is a part"};
    if (m.bwd_allreduce_ms > m.bwd_ms + 0.02)
        return Error{file, where, "bwd_allreduce_microstep exceeds bwd_microstep, of which it is a part"};
    return std::nullopt;
}

}  // namespace

Result<WallClockLog> parse_wall_clock_log(const std::string& file, const std::string& text) {
    WallClockLog log;
    log.source = file;
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        ++n;
        const size_t at = line.find("time (ms) |");
        if (at == std::string::npos || line.find("fwd_microstep", at) == std::string::npos) continue;
        WallClockMicroStep m;
        m.line = n;
        if (auto e = read_micro_line(file, n, line.substr(at), m)) return *e;
        log.micro.push_back(m);
    }
    if (log.micro.empty())
        return Error{file, "", "no wall_clock_breakdown line ('time (ms) | fwd_microstep: ... | bwd_microstep: ...'); run "
                               "DeepSpeed with \"wall_clock_breakdown\": true in its config"};
    return log;
}

Result<WallClockLog> read_wall_clock_log(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed log");
    if (!text) return text.error();
    return parse_wall_clock_log(path, text.value());
}

}  // namespace zerosim
