#include "formats/wall_clock_log.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/json_input.hpp"

namespace zerosim {

namespace {

// A plain decimal as Python prints a float ("2433.78", "123.43176651486503", "1e-05"), nothing
// after it.
bool read_decimal(const std::string& text, double& out) {
    if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) return false;
    errno = 0;
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);
    return errno == 0 && end && *end == '\0' && std::isfinite(out);
}

bool read_count(const std::string& text, int64_t& out) {
    if (text.empty() || text.size() > 18) return false;
    for (char c : text)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = std::stoll(text);
    return true;
}

std::string ms_text(double ms) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", ms);
    return buf;
}

// Python's repr of a float: the shortest text that reads back as the same double, with ".0"
// on a whole number.
std::string py_float(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    std::string s(buf, r.ptr);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
}

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

struct TimerField {
    std::string name;
    double ms = 0;
};

// "time (ms) | name: value | ..." into its fields; an error names the line and the field.
Result<std::vector<TimerField>> timer_fields(const std::string& file, int line_no, const std::string& fields) {
    const std::string where = "line " + std::to_string(line_no);
    std::vector<TimerField> out;
    std::istringstream in(fields);
    std::string part;
    while (std::getline(in, part, '|')) {
        part = trim(part);
        if (part.empty() || part == "time (ms)") continue;
        const size_t colon = part.find(':');
        if (colon == std::string::npos) return Error{file, where, "expected 'name: milliseconds', found '" + part + "'"};
        TimerField f{trim(part.substr(0, colon)), 0};
        if (!read_decimal(trim(part.substr(colon + 1)), f.ms) || f.ms < 0)
            return Error{file, where + " " + f.name, "expected a finite, non-negative number of milliseconds, found '" +
                                                         trim(part.substr(colon + 1)) + "'"};
        out.push_back(f);
    }
    return out;
}

void note_other(WallClockLog& log, const std::string& name) {
    for (const auto& n : log.other_timers)
        if (n == name) return;
    log.other_timers.push_back(name);
}

// A micro-step line's fields; fwd and bwd required, the parts of backward within it.
Status read_micro_fields(const std::string& file, int line_no, const std::vector<TimerField>& fields, WallClockMicroStep& m,
                         WallClockLog& log) {
    const std::string where = "line " + std::to_string(line_no);
    bool fwd = false, bwd = false;
    for (const auto& f : fields) {
        if (f.name == "fwd_microstep") m.fwd_ms = f.ms, fwd = true;
        else if (f.name == "bwd_microstep") m.bwd_ms = f.ms, bwd = true;
        else if (f.name == "bwd_inner_microstep") m.bwd_inner_ms = f.ms;
        else if (f.name == "bwd_allreduce_microstep") m.bwd_allreduce_ms = f.ms;
        else if (f.name == "step_microstep") m.step_ms = f.ms;
        else note_other(log, f.name);
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

Status read_step_fields(const std::string& file, int line_no, const std::vector<TimerField>& fields, WallClockStep& s,
                        WallClockLog& log) {
    for (const auto& f : fields) {
        if (f.name == "fwd") s.fwd_ms = f.ms;
        else if (f.name == "bwd") s.bwd_ms = f.ms;
        else if (f.name == "bwd_inner") s.bwd_inner_ms = f.ms;
        else if (f.name == "bwd_allreduce") s.bwd_allreduce_ms = f.ms;
        else if (f.name == "step") s.step_ms = f.ms;
        else note_other(log, f.name);
    }
    if (s.bwd_ms >= 0 && (s.bwd_inner_ms > s.bwd_ms + 0.02 || s.bwd_allreduce_ms > s.bwd_ms + 0.02))
        return Error{file, "line " + std::to_string(line_no), "a part of bwd exceeds bwd, of which it is a part"};
    return std::nullopt;
}

// "epoch=0/micro_step=3/global_step=3, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...,
// MemAllocated=0.28GB, MaxMemAllocated=0.28GB" from `at` on.
Status read_throughput(const std::string& file, int line_no, const std::string& text, ThroughputLine& t) {
    const std::string where = "line " + std::to_string(line_no);
    auto value = [&](const std::string& key, const std::string& stop) -> std::optional<std::string> {
        size_t a = text.find(key + "=");
        if (a == std::string::npos) return std::nullopt;
        a += key.size() + 1;
        size_t b = text.find_first_of(stop, a);
        return trim(text.substr(a, b == std::string::npos ? std::string::npos : b - a));
    };
    struct Count {
        const char* key;
        int64_t* out;
    };
    for (Count c : {Count{"epoch", &t.epoch}, Count{"micro_step", &t.micro_step}, Count{"global_step", &t.global_step}}) {
        auto v = value(c.key, "/,");
        if (!v || !read_count(*v, *c.out))
            return Error{file, where + " " + c.key, "expected a whole number, found '" + v.value_or("") + "'"};
    }
    struct Figure {
        const char* key;
        double* out;
        bool gb;
    };
    for (Figure f : {Figure{"RunningAvgSamplesPerSec", &t.running_avg_samples_per_s, false},
                     Figure{"CurrSamplesPerSec", &t.samples_per_s, false}, Figure{"MemAllocated", &t.mem_allocated_gib, true},
                     Figure{"MaxMemAllocated", &t.max_mem_allocated_gib, true}}) {
        auto v = value(f.key, ",");
        std::string s = v.value_or("");
        if (f.gb && s.size() > 2 && s.compare(s.size() - 2, 2, "GB") == 0) s.resize(s.size() - 2);
        else if (f.gb) s = "?" + s;   // the unit is part of the field
        if (!read_decimal(s, *f.out) || *f.out < 0)
            return Error{file, where + " " + f.key, std::string("expected a finite, non-negative number") + (f.gb ? " of GB" : "") +
                                                        ", found '" + v.value_or("") + "'"};
    }
    if (t.max_mem_allocated_gib + 0.01 < t.mem_allocated_gib)
        return Error{file, where + " MaxMemAllocated", "is below MemAllocated, of which it is the peak"};
    return std::nullopt;
}

// "steps: 10 loss: 2.3456 [name: value ...] iter time (s): 1.234 samples/sec: 414.911".
Status read_pipe_progress(const std::string& file, int line_no, const std::string& text, PipeProgressLine& p) {
    const std::string where = "line " + std::to_string(line_no);
    auto after = [&](const std::string& key) -> std::string {
        const size_t a = text.find(key);
        if (a == std::string::npos) return "";
        std::istringstream in(text.substr(a + key.size()));
        std::string v;
        in >> v;
        return v;
    };
    const std::string steps = after("steps: "), iter = after("iter time (s): "), sps = after("samples/sec: ");
    if (!read_count(steps, p.step)) return Error{file, where + " steps", "expected a whole number, found '" + steps + "'"};
    if (!read_decimal(iter, p.iter_s) || p.iter_s < 0)
        return Error{file, where + " iter time (s)", "expected a finite, non-negative number, found '" + iter + "'"};
    if (!read_decimal(sps, p.samples_per_s) || p.samples_per_s < 0)
        return Error{file, where + " samples/sec", "expected a finite, non-negative number, found '" + sps + "'"};
    return std::nullopt;
}

// A profiler number: "76.67 ms", "1.2 s", "34.09 us" (durations, to ms), "6.28 T", "336.23 M".
bool read_scaled(const std::string& text, bool duration, double& out) {
    std::istringstream in(text);
    std::string num, unit;
    if (!(in >> num)) return false;
    in >> unit;
    std::string rest;
    if (in >> rest) return false;
    if (!read_decimal(num, out) || out < 0) return false;
    std::string mag = unit;
    if (duration) {
        if (mag.empty() || mag.back() != 's') return false;
        mag.pop_back();
    }
    static const struct {
        const char* p;
        double f;
    } kMagnitudes[] = {{"T", 1e12}, {"G", 1e9}, {"B", 1e9}, {"M", 1e6}, {"K", 1e3}, {"", 1}, {"m", 1e-3}, {"u", 1e-6}};
    for (const auto& m : kMagnitudes)
        if (mag == m.p) {
            out *= m.f * (duration ? 1e3 : 1.0);
            return true;
        }
    return false;
}

// One line of the profiler's summary into p; false when the line is none of its figures.
Status read_profile_line(const std::string& file, int line_no, const std::string& line, FlopsProfile& p, bool& ended) {
    const std::string where = "line " + std::to_string(line_no);
    struct Field {
        const char* label;
        double* out;
        bool duration;
    };
    const Field fields[] = {{"fwd latency:", &p.fwd_ms, true},       {"bwd latency:", &p.bwd_ms, true},
                            {"step latency:", &p.step_ms, true},     {"iter latency:", &p.iter_ms, true},
                            {"fwd flops per GPU:", &p.fwd_flops_per_gpu, false}, {"params per GPU:", &p.params_per_gpu, false}};
    // A label heads its line (after a launcher's prefix, if any); the derived lines name it after
    // an '=' ("fwd FLOPS per GPU = fwd flops per GPU / fwd latency:").
    auto heads = [&](size_t at) { return at != std::string::npos && line.find('=') > at; };
    for (const Field& f : fields) {
        const size_t at = line.find(f.label);
        if (!heads(at)) continue;
        const std::string v = trim(line.substr(at + std::string(f.label).size()));
        if (!read_scaled(v, f.duration, *f.out))
            return Error{file, where + " " + f.label, std::string("expected ") + (f.duration ? "a duration such as '76.67 ms'" : "a number such as '6.28 T'") +
                                                           ", found '" + v + "'"};
        return std::nullopt;
    }
    struct Count {
        const char* label;
        int64_t* out;
    };
    for (Count c : {Count{"world size:", &p.world}, Count{"batch size per GPU:", &p.batch_per_gpu}}) {
        const size_t at = line.find(c.label);
        if (!heads(at)) continue;
        const std::string v = trim(line.substr(at + std::string(c.label).size()));
        if (!read_count(v, *c.out)) return Error{file, where + " " + c.label, "expected a whole number, found '" + v + "'"};
        return std::nullopt;
    }
    const size_t sps = line.find("samples/second:");
    if (heads(sps)) {
        const std::string v = trim(line.substr(sps + 15));
        if (!read_decimal(v, p.samples_per_s) || p.samples_per_s < 0)
            return Error{file, where + " samples/second", "expected a finite, non-negative number, found '" + v + "'"};
        ended = true;   // the summary's last figure
    }
    if (line.find("Aggregated Profile per GPU") != std::string::npos) ended = true;
    return std::nullopt;
}

}  // namespace

Result<WallClockLog> parse_deepspeed_figures(const std::string& file, const std::string& text) {
    WallClockLog log;
    log.source = file;
    std::istringstream in(text);
    std::string line;
    int n = 0;
    bool in_profile = false;
    while (std::getline(in, line)) {
        ++n;
        if (line.find("DeepSpeed Flops Profiler") != std::string::npos && line.find("-----") != std::string::npos) {
            log.profiles.emplace_back();
            log.profiles.back().line = n;
            in_profile = true;
            continue;
        }
        if (in_profile) {
            FlopsProfile& p = log.profiles.back();
            const size_t at = line.find("Profile Summary at step ");
            if (at != std::string::npos) {
                std::string v = trim(line.substr(at + 24));
                if (!v.empty() && v.back() == ':') v.pop_back();
                if (!read_count(v, p.step)) return Error{file, "line " + std::to_string(n), "expected 'Profile Summary at step N:'"};
                continue;
            }
            bool ended = false;
            if (auto e = read_profile_line(file, n, line, p, ended)) return *e;
            if (ended) in_profile = false;
            continue;
        }
        const size_t at = line.find("time (ms) |");
        if (at != std::string::npos) {
            auto fields = timer_fields(file, n, line.substr(at));
            if (!fields) return fields.error();
            bool micro = false, global = false;
            for (const auto& f : *fields) {
                micro = micro || f.name == "fwd_microstep" || f.name == "bwd_microstep";
                global = global || f.name == "fwd" || f.name == "bwd" || f.name == "step";
            }
            if (micro) {
                WallClockMicroStep m;
                m.line = n;
                if (auto e = read_micro_fields(file, n, *fields, m, log)) return *e;
                log.micro.push_back(m);
            } else if (global) {
                WallClockStep s;
                s.line = n;
                if (auto e = read_step_fields(file, n, *fields, s, log)) return *e;
                log.steps.push_back(s);
            } else {
                for (const auto& f : *fields) note_other(log, f.name);
            }
            continue;
        }
        if (line.find("steps: ") != std::string::npos && line.find("iter time (s): ") != std::string::npos &&
            line.find("samples/sec: ") != std::string::npos) {
            PipeProgressLine p;
            p.line = n;
            if (auto e = read_pipe_progress(file, n, line, p)) return *e;
            log.pipe_progress.push_back(p);
            continue;
        }
        const size_t tp = line.find("RunningAvgSamplesPerSec=");
        if (tp != std::string::npos) {
            const size_t ep = line.rfind("epoch=", tp);
            ThroughputLine t;
            t.line = n;
            if (auto e = read_throughput(file, n, line.substr(ep == std::string::npos ? 0 : ep), t)) return *e;
            log.throughput.push_back(t);
        }
    }
    return log;
}

Result<WallClockLog> read_deepspeed_figures(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed log");
    if (!text) return text.error();
    return parse_deepspeed_figures(path, text.value());
}

Result<WallClockLog> parse_wall_clock_log(const std::string& file, const std::string& text) {
    auto log = parse_deepspeed_figures(file, text);
    if (!log) return log;
    if (log->micro.empty())
        return Error{file, "", "no wall_clock_breakdown line ('time (ms) | fwd_microstep: ... | bwd_microstep: ...'); run "
                               "DeepSpeed with \"wall_clock_breakdown\": true in its config"};
    return log;
}

Result<WallClockLog> read_wall_clock_log(const std::string& path) {
    auto text = read_text_file(path, "DeepSpeed log");
    if (!text) return text.error();
    return parse_wall_clock_log(path, text.value());
}

std::string wall_clock_micro_text(const WallClockMicroStep& m) {
    std::string s = "time (ms) | fwd_microstep: " + ms_text(m.fwd_ms) + " | bwd_microstep: " + ms_text(m.bwd_ms);
    if (m.bwd_inner_ms >= 0) s += " | bwd_inner_microstep: " + ms_text(m.bwd_inner_ms);
    if (m.bwd_allreduce_ms >= 0) s += " | bwd_allreduce_microstep: " + ms_text(m.bwd_allreduce_ms);
    if (m.step_ms >= 0) s += " | step_microstep: " + ms_text(m.step_ms);
    return s;
}

std::string wall_clock_step_text(const WallClockStep& st) {
    std::string s = "time (ms)";
    const struct {
        const char* name;
        double ms;
    } parts[] = {{"fwd", st.fwd_ms}, {"bwd", st.bwd_ms}, {"bwd_inner", st.bwd_inner_ms}, {"bwd_allreduce", st.bwd_allreduce_ms},
                 {"step", st.step_ms}};
    for (const auto& p : parts)
        if (p.ms >= 0) s += std::string(" | ") + p.name + ": " + ms_text(p.ms);
    return s;
}

std::string throughput_text(const ThroughputLine& t) {
    auto gib = [](double v) { return py_float(std::round(v * 100.0) / 100.0); };
    return "epoch=" + std::to_string(t.epoch) + "/micro_step=" + std::to_string(t.micro_step) + "/global_step=" +
           std::to_string(t.global_step) + ", RunningAvgSamplesPerSec=" + py_float(t.running_avg_samples_per_s) +
           ", CurrSamplesPerSec=" + py_float(t.samples_per_s) + ", MemAllocated=" + gib(t.mem_allocated_gib) +
           "GB, MaxMemAllocated=" + gib(t.max_mem_allocated_gib) + "GB";
}

std::string pipe_progress_text(const PipeProgressLine& p) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "steps: %lld loss: nan iter time (s): %.3f samples/sec: %.3f", static_cast<long long>(p.step),
                  p.iter_s, p.samples_per_s);
    return buf;
}

}  // namespace zerosim
