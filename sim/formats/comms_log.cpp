#include "formats/comms_log.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace zerosim {

std::string fixed2(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string ds_size_string(int64_t bytes) {
    if (bytes == 0) return "0B";
    static const char* names[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    // math.floor(math.log(size_bytes, 1024)): CPython divides two natural logs; doing the same keeps
    // its behaviour at exact powers of 1024.
    double lg = std::log(static_cast<double>(bytes)) / std::log(1024.0);
    int i = static_cast<int>(std::floor(lg));
    if (i < 0) i = 0;
    if (i > 8) i = 8;
    double p = std::pow(1024.0, i);
    // round(x, 2) then str(): the rounded value's shortest repr. For two decimals that is the %.2f
    // text with trailing zeros dropped, keeping one digit after the point.
    std::string s = fixed2(static_cast<double>(bytes) / p);
    while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
    return s + " " + names[i];
}

Bandwidth ds_bandwidth(const std::string& record, int64_t bytes, double time_ms, int64_t world) {
    Bandwidth bw;
    if (time_ms <= 0.0) return bw;
    double size = static_cast<double>(bytes);
    double n = static_cast<double>(world);
    double tput = 0.0, busbw = 0.0;
    if (record == "all_to_all_single") {
        tput = size / time_ms;
        busbw = (size / time_ms) * ((n - 1) / n);
    } else if (record == "all_gather" || record == "all_gather_into_tensor" || record == "reduce_scatter" ||
               record == "reduce_scatter_tensor") {
        size *= n;
        tput = size / time_ms;
        busbw = (size / time_ms) * ((n - 1) / n);
    } else if (record == "all_reduce" || record == "all_reduce_coalesced" || record == "inference_all_reduce") {
        tput = size * 2 / time_ms;
        busbw = (size / time_ms) * (2 * (n - 1) / n);
    } else {  // broadcast, reduce, send, recv, gather, scatter, barrier
        tput = size / time_ms;
        busbw = tput;
    }
    bw.algbw_gbps = tput * 8 / 1e6;
    bw.busbw_gbps = busbw * 8 / 1e6;
    return bw;
}

std::string ds_record_key(const std::string& record, const std::string& caller) {
    return caller.empty() ? record : record + " | [Caller Func: " + caller + "]";
}

std::string LoggedOp::record_key() const { return ds_record_key(record, caller); }

std::string ds_info_prefix(double timestamp_s, const std::string& origin) {
    // Deterministic synthetic clock: seconds since 1970-01-01 00:00:00 (UTC), millisecond resolution.
    int64_t ms_total = static_cast<int64_t>(std::llround(timestamp_s * 1000.0));
    if (ms_total < 0) ms_total = 0;
    int64_t ms = ms_total % 1000;
    int64_t secs = ms_total / 1000;
    int64_t days = secs / 86400;
    int64_t rem = secs % 86400;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    int64_t z = days + 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) ++y;
    char buf[96];
    std::snprintf(buf, sizeof buf, "[%04lld-%02lld-%02lld %02lld:%02lld:%02lld,%03lld] [INFO] [", static_cast<long long>(y),
                  static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(rem / 3600),
                  static_cast<long long>(rem % 3600 / 60), static_cast<long long>(rem % 60), static_cast<long long>(ms));
    return buf + origin + "] ";
}

std::string ds_line_prefix(double timestamp_s, int log_dist_line, int64_t rank) {
    return ds_info_prefix(timestamp_s, "logging.py:" + std::to_string(log_dist_line) + ":log_dist") + "[Rank " +
           std::to_string(rank) + "] ";
}

std::string ds_verbose_record(const LoggedOp& op) {
    return "comm op: " + op.record_key() + " | time (ms): " + fixed2(op.time_ms) +
           " | msg size: " + ds_size_string(op.bytes) + " | algbw (Gbps): " + fixed2(op.algbw_gbps) +
           " | busbw (Gbps): " + fixed2(op.busbw_gbps);
}

void write_ds_verbose_line(std::ostream& out, const LoggedOp& op, int log_dist_line) {
    out << ds_line_prefix(op.timestamp_s, log_dist_line, op.rank) << ds_verbose_record(op) << '\n';
}

std::optional<double> parse_ds_size_string(const std::string& text) {
    if (text == "0B") return 0.0;
    static const char* names[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    auto space = text.find(' ');
    if (space == std::string::npos) return std::nullopt;
    std::string num = text.substr(0, space), unit = text.substr(space + 1);
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end == num.c_str() || *end != '\0') return std::nullopt;
    // A size is a byte count: never negative, NaN or infinite ("1e400 KB"), and within int64 so
    // that the caller's rounding to bytes is defined.
    if (!std::isfinite(v) || v < 0) return std::nullopt;
    for (int i = 0; i < 9; ++i)
        if (unit == names[i]) {
            double bytes = v * std::pow(1024.0, i);
            if (!(bytes < 9.2e18)) return std::nullopt;
            return bytes;
        }
    return std::nullopt;
}

namespace {

// N of the last "[Rank N]" before `end` (log_dist's prefix; a launcher's own prefix may come
// before it), nullopt when there is none or N is not a whole number 0 or more.
std::optional<int64_t> logged_rank(const std::string& line, size_t end) {
    size_t at = line.rfind("[Rank ", end);
    if (at == std::string::npos) return std::nullopt;
    size_t digits = at + 6, close = line.find(']', digits);
    if (close == std::string::npos || close > end || close == digits || close - digits > 9) return std::nullopt;
    int64_t n = 0;
    for (size_t i = digits; i < close; ++i) {
        if (line[i] < '0' || line[i] > '9') return std::nullopt;
        n = n * 10 + (line[i] - '0');
    }
    return n;
}

// The rank a launcher's own prefix names, where the line itself names none: OpenMPI's
// --tag-output "[J,R]<stdout>:" and srun -l / torchrun's "R: " (strip_launcher_prefix's forms). A
// log of several ranks' lines is then split per rank (validate/per_rank.cpp), not blamed on the
// prediction as extra ops.
std::optional<int64_t> launcher_rank(const std::string& line, size_t end) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || i >= end) return std::nullopt;
    size_t tag = line.find("]<std", i);
    if ((line[i] == '[' || line[i] == '(') && tag != std::string::npos && tag < end) {
        size_t open = line.rfind('[', tag), comma = line.find(',', open);
        if (open == std::string::npos || comma == std::string::npos || comma > tag || tag - comma > 10) return std::nullopt;
        int64_t n = 0;
        for (size_t k = comma + 1; k < tag; ++k) {
            if (line[k] < '0' || line[k] > '9') return std::nullopt;
            n = n * 10 + (line[k] - '0');
        }
        return comma + 1 < tag ? std::optional<int64_t>(n) : std::nullopt;
    }
    size_t j = 0;
    int64_t n = 0;
    while (j < line.size() && j < 10 && line[j] >= '0' && line[j] <= '9') n = n * 10 + (line[j++] - '0');
    if (j > 0 && j + 1 < line.size() && line[j] == ':' && line[j + 1] == ' ' && j < end) return n;
    return std::nullopt;
}

}  // namespace

std::optional<ParsedLogLine> parse_ds_verbose_line(const std::string& line) {
    auto at = line.find("comm op: ");
    if (at == std::string::npos) return std::nullopt;
    std::string rest = line.substr(at + 9);
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.pop_back();
    std::vector<std::string> fields;
    size_t pos = 0;
    while (true) {
        auto bar = rest.find(" | ", pos);
        fields.push_back(rest.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
        if (bar == std::string::npos) break;
        pos = bar + 3;
    }
    ParsedLogLine out;
    out.op.record = fields[0];
    bool have_size = false;
    auto number_after = [](const std::string& f, const std::string& key, double& v) {
        if (f.rfind(key, 0) != 0) return false;
        char* end = nullptr;
        std::string num = f.substr(key.size());
        v = std::strtod(num.c_str(), &end);
        // The whole value: "4,19" (a decimal comma) must not read as 4.
        while (end && (*end == ' ' || *end == '\t')) ++end;
        return end != num.c_str() && *end == '\0';
    };
    for (size_t i = 1; i < fields.size(); ++i) {
        const std::string& f = fields[i];
        if (f.rfind("[Caller Func: ", 0) == 0 && f.back() == ']') {
            out.op.caller = f.substr(14, f.size() - 15);
        } else if (f.rfind("msg size: ", 0) == 0) {
            out.op.size_text = f.substr(10);
            auto b = parse_ds_size_string(out.op.size_text);
            if (!b) return std::nullopt;
            out.op.bytes = static_cast<int64_t>(std::llround(*b));
            have_size = true;
        } else {
            // A known numeric field whose value is not a number makes the line malformed (it
            // used to read as 0); its range is the reader's to check (reader_limits.hpp).
            double v = 0.0;
            const char* keys[] = {"time (ms): ", "algbw (Gbps): ", "busbw (Gbps): "};
            double* dest[] = {&out.op.time_ms, &out.op.algbw_gbps, &out.op.busbw_gbps};
            for (int k = 0; k < 3; ++k)
                if (f.rfind(keys[k], 0) == 0) {
                    if (!number_after(f, keys[k], v)) return std::nullopt;
                    *dest[k] = v;
                }
            // other " | [Key: value]" fields are tolerated and ignored
        }
    }
    if (out.op.record.empty() || !have_size) return std::nullopt;
    if (auto rank = logged_rank(line, at)) {
        out.op.rank = *rank;
        out.rank_named = true;
    } else if (auto tagged = launcher_rank(line, at)) {
        out.op.rank = *tagged;
        out.rank_named = true;
    }
    return out;
}

namespace {

// How many values the trimmed mean leaves out at each end: int(round(n * trim_percent)); Python
// rounds half to even, as nearbyint does by default.
size_t trimmed_each_end(size_t n, double trim_percent) {
    double k_real = static_cast<double>(n) * trim_percent;
    int save = std::fegetround();
    std::fesetround(FE_TONEAREST);
    size_t k = static_cast<size_t>(std::nearbyint(k_real));
    std::fesetround(save);
    return k;
}

}  // namespace

double ds_trim_mean(std::vector<double> data, double trim_percent) {
    size_t n = data.size();
    if (n == 0) return 0.0;
    std::sort(data.begin(), data.end());
    size_t k = trimmed_each_end(n, trim_percent);
    if (2 * k >= n) return 0.0;  // Python's statistics.mean would raise; DeepSpeed never trims that far
    double sum = 0.0;
    for (size_t i = k; i < n - k; ++i) sum += data[i];
    return sum / static_cast<double>(n - 2 * k);
}

namespace {

std::string pad20(const std::string& s) { return s.size() >= 20 ? s : s + std::string(20 - s.size(), ' '); }

// ds_trim_mean of the values a histogram counts: the same sum, term by term, in sorted order.
double trim_mean_of(const std::map<double, int64_t>& counts, int64_t n, double trim_percent) {
    if (n == 0) return 0.0;
    const auto k = static_cast<int64_t>(trimmed_each_end(static_cast<size_t>(n), trim_percent));
    if (2 * k >= n) return 0.0;
    double sum = 0.0;
    int64_t index = 0;
    for (const auto& [value, count] : counts)
        for (int64_t c = 0; c < count; ++c, ++index)
            if (index >= k && index < n - k) sum += value;
    return sum / static_cast<double>(n - 2 * k);
}

}  // namespace

void DsSummary::add(const LoggedOp& op) {
    auto key = op.record_key();
    auto it = rows_.find(key);
    if (it == rows_.end()) {
        order_.push_back(key);
        it = rows_.emplace(std::move(key), std::map<int64_t, Row>{}).first;
    }
    Row& row = it->second[op.bytes];
    ++row.count;
    row.total_ms += op.time_ms;
    ++row.latency[op.time_ms];
    ++row.algbw[op.algbw_gbps];
    ++row.busbw[op.busbw_gbps];
}

void DsSummary::write(std::ostream& out) const {
    out << pad20("Comm. Op") << pad20("Message Size") << pad20("Count") << pad20("Total Latency(ms)")
        << pad20("Avg Latency(ms)") << pad20("tput_avg (Gbps)") << pad20("busbw_avg (Gbps)") << '\n';
    for (const auto& key : order_) {
        out << key << '\n';
        for (const auto& [size, row] : rows_.at(key))
            out << pad20(" ") << pad20(ds_size_string(size)) << pad20(std::to_string(row.count)) << pad20(fixed2(row.total_ms))
                << pad20(fixed2(trim_mean_of(row.latency, row.count, 0.1))) << pad20(fixed2(trim_mean_of(row.algbw, row.count, 0.1)))
                << pad20(fixed2(trim_mean_of(row.busbw, row.count, 0.1))) << '\n';
    }
}

void write_ds_summary(std::ostream& out, const std::vector<LoggedOp>& ops) {
    DsSummary summary;
    for (const auto& op : ops) summary.add(op);
    summary.write(out);
}

}  // namespace zerosim
