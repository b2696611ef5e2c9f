#include <map>
#include "formats/measured_logs.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <limits>
#include <sstream>

#include "core/json_input.hpp"
#include "formats/comms_log.hpp"
#include "formats/reader_limits.hpp"

namespace zerosim {

const char* log_format_name(LogFormat f) {
    switch (f) {
        case LogFormat::DeepSpeed: return "DeepSpeed comms_logger";
        case LogFormat::NcclTests: return "nccl-tests";
        case LogFormat::ZerosimJson: return "zerosim/zerorun JSON";
    }
    return "?";
}

namespace {

Error at(const std::string& name, int line, const std::string& msg) {
    return Error{name + ":" + std::to_string(line), "", msg};
}

// N of "[logging.py:N:log_dist]" in the line, 0 if it has none.
int log_dist_line_of(const std::string& line) {
    size_t at = line.find("[logging.py:");
    if (at == std::string::npos) return 0;
    size_t digits = at + 12, end = line.find(":log_dist]", digits);
    if (end == std::string::npos || end == digits || end - digits > 6) return 0;
    int n = 0;
    for (size_t i = digits; i < end; ++i) {
        if (line[i] < '0' || line[i] > '9') return 0;
        n = n * 10 + (line[i] - '0');
    }
    return n;
}

bool looks_like_nccl_row(const std::string& raw) {
    std::istringstream in(strip_launcher_prefix(raw));
    std::string a, b, type;
    if (!(in >> a >> b >> type)) return false;
    auto digits = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
    return digits(a) && digits(b) && (type == "float" || type == "half" || type == "bfloat16" || type == "double" ||
                                       type == "int8" || type == "uint8" || type == "int32" || type == "int64");
}

// The JSON logs zerosim and zerorun write, and the versions of each this reader knows:
// "zerorun-log" (runtime/executor/run_log.cpp, version 1), "zerosim-prediction"
// (prediction/predict_outputs.cpp, no version field yet) and "zerosim-schedule"
// (formats/schedule_outputs.cpp, version 1).
// A log without a version is read as version 1 (the prediction writes none). The schedule's
// version 2 (the whole IR, formats/schedule_json_write.cpp) keeps version 1's op fields, which are
// all this reader takes.
struct KnownJsonLog {
    const char* format;
    int64_t newest_version;
};
constexpr KnownJsonLog kJsonLogs[] = {{"zerorun-log", 1}, {"zerosim-prediction", 1}, {"zerosim-schedule", 2}};

// What a JSON log says about its own run, checked before any op is compared: a zerorun run whose
// results failed their check (runtime/executor/run_log.cpp writes "wrong" per op, per rank and in
// total), a rank outside the log's world, an op that ends before it starts.
Status json_log_run_checks(const Json& j, const std::string& name, int64_t world) {
    auto whole = [](const Json& o, const char* key) { return o.is_object() && o.contains(key) && o[key].is_number(); };
    auto fail = [&](const std::string& field, const std::string& msg) { return Status{Error{name, field, msg}}; };
    const Json empty = Json::array();
    const Json& ranks = j.contains("ranks") && j["ranks"].is_array() ? j["ranks"] : empty;
    for (size_t r = 0; r < ranks.size(); ++r) {
        const std::string at_rank = "ranks[" + std::to_string(r) + "]";
        if (whole(ranks[r], "rank") && (ranks[r]["rank"].get<double>() < 0 || ranks[r]["rank"].get<double>() >= static_cast<double>(world)))
            return fail(at_rank + ".rank", "rank " + ranks[r]["rank"].dump() + " is outside the log's world of " + std::to_string(world) + " ranks");
        const Json& ops = ranks[r].is_object() && ranks[r].contains("ops") && ranks[r]["ops"].is_array() ? ranks[r]["ops"] : empty;
        for (size_t i = 0; i < ops.size(); ++i) {
            const std::string at_op = at_rank + ".ops[" + std::to_string(i) + "]";
            if (whole(ops[i], "wrong") && ops[i]["wrong"].get<double>() > 0)
                return fail(at_op + ".wrong", ops[i]["wrong"].dump() + " wrong values: the run's own result check failed; a failed run is "
                                                                       "no measurement to validate against");
            if (whole(ops[i], "start_us") && whole(ops[i], "end_us") && ops[i]["end_us"].get<double>() < ops[i]["start_us"].get<double>())
                return fail(at_op + ".end_us", "the op ends (" + ops[i]["end_us"].dump() + " us) before it starts (" +
                                                   ops[i]["start_us"].dump() + " us)");
        }
    }
    if (whole(j, "wrong") && j["wrong"].get<double>() > 0)
        return fail("wrong", j["wrong"].dump() + " wrong values: the run's own result check failed; a failed run is no measurement to validate against");
    for (size_t i = 0; i < j["ops"].size(); ++i) {
        const Json& o = j["ops"][i];
        if (whole(o, "start_ms") && whole(o, "end_ms") && o["end_ms"].get<double>() < o["start_ms"].get<double>())
            return fail("ops[" + std::to_string(i) + "].end_ms",
                        "the op ends (" + o["end_ms"].dump() + " ms) before it starts (" + o["start_ms"].dump() + " ms)");
    }
    return std::nullopt;
}

Result<MeasuredLog> parse_json_log(const std::string& text, const std::string& name) {
    auto parsed = parse_json_text(text, name);
    if (!parsed) return parsed.error();
    Json& j = parsed.value();
    MeasuredLog log;
    log.path = name;
    log.format = LogFormat::ZerosimJson;
    if (!j.is_object() || !j.contains("ops") || !j["ops"].is_array())
        return Error{name, "ops", "expected a zerosim JSON log with an \"ops\" array"};
    // The header: a format this reader knows, a version it knows, a world of one rank or more.
    std::string known;
    for (const auto& k : kJsonLogs) known += std::string(known.empty() ? "" : ", ") + "\"" + k.format + "\"";
    const KnownJsonLog* kind = nullptr;
    if (!j.contains("format") || !j["format"].is_string())
        return Error{name, "format", "expected one of " + known};
    for (const auto& k : kJsonLogs)
        if (j["format"].get<std::string>() == k.format) kind = &k;
    if (!kind) return Error{name, "format", "expected one of " + known + ", found " + j["format"].dump()};
    if (j.contains("version") && (!j["version"].is_number_integer() || j["version"].get<int64_t>() < 1 ||
                                  j["version"].get<int64_t>() > kind->newest_version))
        return Error{name, "version",
                     (kind->newest_version == 1 ? std::string("expected 1 (the version this zerosim reads)")
                                                : "expected 1 to " + std::to_string(kind->newest_version) + " (the versions this zerosim reads)") +
                         ", found " + j["version"].dump()};
    const Json* meta = j.contains("meta") && j["meta"].is_object() ? &j["meta"] : &j;
    const std::string meta_prefix = meta == &j ? "" : "meta.";
    for (const char* key : {"world", "total_params"}) {
        if (!meta->contains(key)) continue;
        const Json& v = (*meta)[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 1)
            return Error{name, meta_prefix + key, std::string("expected a whole number, 1 or more, found ") + v.dump()};
        (std::string(key) == "world" ? log.world : log.total_params) = v.get<int64_t>();
    }
    if (auto failed = json_log_run_checks(j, name, log.world > 0 ? log.world : std::numeric_limits<int64_t>::max())) return *failed;
    int i = 0;
    try {
    for (const auto& o : j["ops"]) {
        ++i;
        const std::string at_op = "ops[" + std::to_string(i - 1) + "]";
        if (!o.is_object() || !o.contains("kind")) return Error{name, at_op, "expected an op object"};
        std::string kind_name = o["kind"].get<std::string>();
        if (kind_name == "forward" || kind_name == "backward" || kind_name == "optimizer_step" || kind_name == "compute") continue;
        LoggedOp op;
        op.record = std::move(kind_name);
        op.caller = o.value("caller", "");
        double bytes = o.value("bytes", 0.0);
        if (!(bytes >= 0 && bytes < 9e18))
            return Error{name, at_op + ".bytes", "expected a size in bytes, 0 or more"};
        op.bytes = static_cast<int64_t>(bytes);
        op.size_text = ds_size_string(op.bytes);
        // The time the log holds for the op: a missing time is an error, not 0 (an op that was
        // never timed must not count as an instant one).
        // A schedule has no times (its ops compare by structure only).
        const char* time_key = o.contains("logged_ms") ? "logged_ms" : "time_ms";
        bool untimed = std::string(kind->format) == "zerosim-schedule" && !o.contains(time_key);
        if (!untimed && (!o.contains(time_key) || !o[time_key].is_number()))
            return Error{name, at_op + "." + time_key, "expected the op's time in ms (a number)"};
        op.time_ms = untimed ? 0.0 : o[time_key].get<double>();
        if (const char* problem = time_problem(op.time_ms))
            return Error{name, at_op + "." + time_key, time_error("time", op.time_ms, problem)};
        op.line = i;
        int step = o.value("step", -1);
        op.phase = step < 0 ? "initialize"
                            : "step" + std::to_string(step) + ".micro" + (o.value("phase", "") == "step" ? std::string("*")
                                                                                                          : std::to_string(o.value("micro", 0))) +
                                  "." + o.value("phase", "");
        log.ops.push_back(std::move(op));
    }
    } catch (const nlohmann::json::exception& e) {
        // A field of the wrong type (found by fuzzing): an error naming the op, never an abort.
        return Error{name, "ops[" + std::to_string(i - 1) + "]", std::string("unexpected value: ") + e.what()};
    }
    return log;
}

// What the reader has seen of a text log so far: the phase the lines are in, how many lines of
// each format and where each began, and the log_summary table it may be in.
struct TextLogScan {
    std::string phase, record;
    int nccl_rows = 0, ds_lines = 0, first_ds = 0, first_nccl = 0;
    bool in_summary = false;
    int record_line = 0;
    size_t rows_under_record = 0;

    // A summary record whose table ends before any of its rows: the file was cut short.
    bool record_has_no_rows() const { return record_line && rows_under_record == 0; }
    Error no_rows_error(const std::string& name) const {
        return at(name, record_line, "summary record '" + record + "' has no rows (truncated table?)");
    }
};

// A number written with a decimal comma ("0,02", as a locale prints it), or "" if the text has
// none: named in the error, since strtod would read it as 0 and the op as instant.
std::string decimal_comma_number(const std::string& text) {
    for (size_t c = text.find(','); c != std::string::npos; c = text.find(',', c + 1)) {
        if (c == 0 || c + 1 >= text.size() || !std::isdigit(static_cast<unsigned char>(text[c - 1])) ||
            !std::isdigit(static_cast<unsigned char>(text[c + 1])))
            continue;
        size_t b = c, e = c + 1;
        while (b > 0 && std::isdigit(static_cast<unsigned char>(text[b - 1]))) --b;
        while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e]))) ++e;
        return text.substr(b, e - b);
    }
    return "";
}

Error decimal_comma_error(const std::string& name, int n, const std::string& number) {
    std::string point = number;
    point[point.find(',')] = '.';
    return at(name, n, "the number '" + number + "' has a decimal comma: expected a decimal point (" + point +
                           "), as DeepSpeed prints it");
}

// A "comm op:" line: one op of the phase, timed within reason (a barrier of log_summary is none).
Status scan_comm_op_line(const std::string& line, int n, const std::string& name, TextLogScan& scan, MeasuredLog& log) {
    auto p = parse_ds_verbose_line(line);
    // The caller found "comm op" in the line, not necessarily "comm op: " (a fuzzed line has no colon after it).
    const size_t from = line.find("comm op: ");
    const std::string rest = from == std::string::npos ? line : line.substr(from);
    if (!p && !decimal_comma_number(rest).empty()) return decimal_comma_error(name, n, decimal_comma_number(rest));
    if (!p) return at(name, n, "malformed comm op line: expected 'comm op: <op> | ... | msg size: <size> | ...'");
    if (!scan.first_ds) scan.first_ds = n;
    ++scan.ds_lines;
    if (scan.in_summary) {
        if (scan.record_has_no_rows()) return scan.no_rows_error(name);
        scan.in_summary = false;
    }
    if (p->op.record == "log_summary_barrier") return std::nullopt;
    if (!p->rank_named) {
        if (!log.unranked_line) log.unranked_line = n;
    } else if (auto it = std::lower_bound(log.ranks.begin(), log.ranks.end(), p->op.rank); it == log.ranks.end() || *it != p->op.rank) {
        log.ranks.insert(it, p->op.rank);
    }
    if (const char* problem = time_problem(p->op.time_ms))
        return at(name, n, time_error("comm op time (ms)", p->op.time_ms, problem));
    for (double bw : {p->op.algbw_gbps, p->op.busbw_gbps})
        if (const char* problem = rate_problem(bw))
            return at(name, n, std::string("comm op bandwidth ") + problem + ": expected a finite rate, 0 or more");
    LoggedOp op = std::move(p->op);
    op.line = n;
    op.phase = scan.phase;
    log.ops.push_back(std::move(op));
    return std::nullopt;
}

// A row of a log_summary table under `record`: size, count, total, average, tput, busbw.
Result<SummaryRow> parse_summary_row(const std::string& line, const std::string& record, int n, const std::string& name) {
    std::istringstream ls(line);
    std::vector<std::string> tok;
    std::string t;
    while (ls >> t) tok.push_back(t);
    SummaryRow r;
    r.record_key = record;
    r.line = n;
    size_t k = 0;
    if (!tok.empty() && tok[0] == "0B") {
        r.size_text = "0B";
        k = 1;
    } else if (tok.size() >= 2) {
        r.size_text = tok[0] + " " + tok[1];
        k = 2;
    }
    if (record.empty() || tok.size() != k + 5 || !parse_ds_size_string(r.size_text))
        return at(name, n, "malformed log_summary row: expected size, count, total, average, tput and busbw columns");
    for (size_t c = k; c < tok.size(); ++c)
        if (auto comma = decimal_comma_number(tok[c]); !comma.empty()) return decimal_comma_error(name, n, comma);
    try {
        r.count = std::stoll(tok[k]);
        r.total_ms = std::stod(tok[k + 1]);
        r.avg_ms = std::stod(tok[k + 2]);
        r.tput_gbps = std::stod(tok[k + 3]);
        r.busbw_gbps = std::stod(tok[k + 4]);
    } catch (const std::exception&) {
        return at(name, n, "malformed log_summary row: a column is not a number");
    }
    // The row summarises `count` ops: at least one, each timed within reason.
    if (r.count < 1) return at(name, n, "log_summary row: count " + std::to_string(r.count) + " is not 1 or more");
    if (const char* problem = time_problem(r.avg_ms))
        return at(name, n, time_error("log_summary average latency (ms)", r.avg_ms, problem));
    if (const char* problem = time_problem(r.total_ms, kMaxOpTimeMs * static_cast<double>(r.count)))
        return at(name, n, time_error("log_summary total latency (ms)", r.total_ms, problem));
    for (double bw : {r.tput_gbps, r.busbw_gbps})
        if (const char* problem = rate_problem(bw))
            return at(name, n, std::string("log_summary bandwidth ") + problem + ": expected a finite rate, 0 or more");
    return r;
}

// A line inside a log_summary table: a record's name, one of its rows, or the table's end.
Status scan_summary_line(const std::string& line, int n, const std::string& name, TextLogScan& scan, MeasuredLog& log) {
    if (line.empty()) return std::nullopt;
    if (line[0] != ' ') {
        if (scan.record_has_no_rows()) return scan.no_rows_error(name);
        if (line.rfind("#", 0) == 0 || line.rfind("[", 0) == 0) {  // the table has ended
            scan.in_summary = false;
            return std::nullopt;
        }
        scan.record = line;
        while (!scan.record.empty() && scan.record.back() == ' ') scan.record.pop_back();
        scan.record_line = n;
        scan.rows_under_record = 0;
        return std::nullopt;
    }
    auto r = parse_summary_row(line, scan.record, n, name);
    if (!r) return r.error();
    log.summary.push_back(r.value());
    ++scan.rows_under_record;
    return std::nullopt;
}

// The text log read to its end: DeepSpeed's lines or nccl-tests' rows, never both; nccl-tests'
// tables read whole.
Result<MeasuredLog> finish_text_log(MeasuredLog& log, const TextLogScan& scan, const std::string& text, const std::string& name) {
    if (scan.in_summary && scan.record_has_no_rows()) return scan.no_rows_error(name);
    if (scan.ds_lines > 0 && scan.nccl_rows > 0)
        return at(name, std::max(scan.first_ds, scan.first_nccl),
                  "mixed formats: DeepSpeed comms_logger lines (from line " + std::to_string(scan.first_ds) +
                      ") and nccl-tests rows (from line " + std::to_string(scan.first_nccl) + ") in one file");
    if (scan.nccl_rows > 0) {
        log.format = LogFormat::NcclTests;
        auto tables = parse_nccl_tests(text, name);
        if (!tables) return tables.error();
        log.tables = std::move(tables).value();
        if (log.tables.empty())
            return at(name, scan.first_nccl, "nccl-tests rows without a '#  size  count  type ...' header");
        if (auto failed = nccl_tests_checks_passed(log.tables, name)) return *failed;
        size_t parsed = 0;
        for (const auto& t : log.tables) parsed += t.rows.size();
        if (parsed < static_cast<size_t>(scan.nccl_rows))
            return Error{name, "", "only " + std::to_string(parsed) + " of " + std::to_string(scan.nccl_rows) +
                                       " nccl-tests rows could be read (truncated or malformed rows)"};
        return std::move(log);
    }
    if (scan.ds_lines == 0 && log.summary.empty())
        return Error{name, "", "no DeepSpeed comms_logger lines ('comm op: ...'), log_summary table or nccl-tests table found"};
    return std::move(log);
}

}  // namespace

Result<MeasuredLog> parse_log(const std::string& text, const std::string& name) {
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return Error{name, "", "the file is empty"};
    if (text[first] == '{') return parse_json_log(text, name);

    MeasuredLog log;
    log.path = name;
    std::string line;
    int n = 0;
    TextLogScan scan;
    // One allocation for the ops (a log of a long run holds millions: growing by doubling would
    // hold the old array beside the new one, and up to twice the room needed).
    {
        size_t comm_ops = 0;
        for (size_t at = text.find("comm op:"); at != std::string::npos; at = text.find("comm op:", at + 8)) ++comm_ops;
        log.ops.reserve(comm_ops);
    }
    // Line by line over the text itself (a stream over it would hold a second copy of the file).
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        line.assign(text, pos, eol == std::string::npos ? std::string::npos : eol - pos);
        pos = eol == std::string::npos ? text.size() : eol + 1;
        ++n;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!log.log_dist_line) log.log_dist_line = log_dist_line_of(line);
        if (line.rfind("##### PHASE ", 0) == 0) {
            auto end = line.find(" #####", 12);
            scan.phase = line.substr(12, end == std::string::npos ? std::string::npos : end - 12);
            continue;
        }
        if (line.find("comm op:") != std::string::npos) {
            if (auto failed = scan_comm_op_line(line, n, name, scan, log)) return *failed;
            continue;
        }
        if (line.rfind("Comm. Op", 0) == 0 && line.find("Message Size") != std::string::npos) {
            scan.in_summary = true;
            scan.record_line = 0;
            continue;
        }
        if (scan.in_summary) {
            if (auto failed = scan_summary_line(line, n, name, scan, log)) return *failed;
            continue;
        }
        if (looks_like_nccl_row(line)) {
            if (!scan.first_nccl) scan.first_nccl = n;
            ++scan.nccl_rows;
        }
    }
    return finish_text_log(log, scan, text, name);
}

Result<MeasuredLog> read_log(const std::string& path) {
    // The one opener reads a regular file straight into one string of its size (a log of a long
    // run is hundreds of MB: no stream buffer and copy holding it twice).
    auto text = read_text_file(path, "log");
    if (!text) return text.error();
    return parse_log(text.value(), path);
}

Result<std::vector<MeasuredLog>> split_by_rank(MeasuredLog log) {
    if (log.ranks.size() < 2) {
        std::vector<MeasuredLog> whole;
        whole.push_back(std::move(log));   // a run's log can hold millions of ops: never copied
        return whole;
    }
    if (log.unranked_line)
        return at(log.path, log.unranked_line,
                  "a comm op line without \"[Rank N]\" among the lines of ranks " + std::to_string(log.ranks.front()) + " to " +
                      std::to_string(log.ranks.back()) + ": cannot tell which rank logged it");
    // One pass over the ops (a run's log can hold millions), each to its rank's log.
    std::vector<MeasuredLog> out;
    std::map<int64_t, size_t> slot;
    for (int64_t rank : log.ranks) {
        MeasuredLog one;
        one.path = log.path;
        one.format = log.format;
        one.world = log.world;
        one.total_params = log.total_params;
        one.log_dist_line = log.log_dist_line;
        one.ranks = {rank};
        slot[rank] = out.size();
        out.push_back(std::move(one));
    }
    for (auto& op : log.ops) {
        auto it = slot.find(op.rank);
        if (it != slot.end()) out[it->second].ops.push_back(std::move(op));
    }
    return out;
}

std::optional<int64_t> rank_in_file_name(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    if (name.rfind("rank", 0) != 0) return std::nullopt;
    size_t end = std::min(name.find_first_not_of("0123456789", 4), name.size());
    if (end == 4 || end - 4 > 9 || (end < name.size() && name[end] != '.')) return std::nullopt;
    return std::stoll(name.substr(4, end - 4));
}

std::vector<std::string> rank_log_files(const std::string& path) {
    std::error_code ec;
    std::vector<std::pair<int64_t, std::string>> found;
    if (!std::filesystem::is_directory(path, ec)) return {};
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        std::error_code kind;
        if (auto rank = rank_in_file_name(entry.path().string()); rank && entry.is_regular_file(kind))
            found.emplace_back(*rank, entry.path().string());
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> files;
    for (auto& f : found) files.push_back(std::move(f.second));
    return files;
}

}  // namespace zerosim
