// DeepSpeed's comms_logger format, written in one place and shared by the predicted log (sim),
// the measured log (runtime) and read back by the validator. Conventions follow
// deepspeed/utils/comms_logging.py at v0.14.2: convert_size for message sizes, calc_bw_log for
// bandwidths, log_all for the summary table (10% trimmed means).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim {

// convert_size(): 1024-based B/KB/MB/GB..., value rounded to 2 decimals and printed as Python
// prints a float ("1.0 B", "48.38 KB"); 0 bytes prints "0B".
std::string ds_size_string(int64_t bytes);

// Python's "%.2f" (round half to even on the exact binary value, as glibc does).
std::string fixed2(double v);

struct Bandwidth {
    double algbw_gbps = 0.0;
    double busbw_gbps = 0.0;
};
// calc_bw_log(): `record` is DeepSpeed's op name; size in bytes as logged; time in ms; n = world.
// A zero time gives zero bandwidth (DeepSpeed would divide by zero; a schedule has no times).
Bandwidth ds_bandwidth(const std::string& record, int64_t bytes, double time_ms, int64_t world);

// One logged op: what the writers print, what the readers (formats/measured_logs.hpp) give back,
// and what the validator aligns. Made from a schedule by logged_op() (formats/schedule_outputs.hpp).
struct LoggedOp {
    std::string record;     // op name, e.g. "all_reduce"
    std::string caller;     // "" when the logger ran without debug
    int64_t bytes = 0;      // read from a log: from the printed size, so only as precise as it
    double time_ms = 0.0;
    double algbw_gbps = 0.0;
    double busbw_gbps = 0.0;
    double timestamp_s = 0.0;   // seconds since the log's epoch, for the line prefix
    // The size as printed ("134.33 MB"): from a log, its own text (the validator compares sizes at
    // the printed precision); from a schedule, ds_size_string(bytes). The writers print
    // ds_size_string(bytes).
    std::string size_text;
    int line = 0;           // the line of the file it was read from; from a schedule, the op's id
    std::string phase;      // "step0.micro0.forward" (phase_label; "##### PHASE" markers), "" if none
    int64_t rank = 0;       // the "[Rank N]" that logged it (a schedule's ScheduleMeta::rank)

    // The key the logger groups by: "all_reduce | [Caller Func: allreduce_bucket]".
    std::string record_key() const;
};
// The same key from its parts (no caller: the record alone, as the logger prints without debug).
std::string ds_record_key(const std::string& record, const std::string& caller);

// "[2026-11-30 02:19:17,547] [INFO] [origin] ": the prefix of DeepSpeed's logger, at a time on the
// synthetic clock (seconds since 1970-01-01 UTC); origin "timer.py:260:stop" and the like.
std::string ds_info_prefix(double timestamp_s, const std::string& origin);
// "[1970-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] " for t seconds; the line
// number is the release's (schedule/release_rules.hpp log_dist_line; 96 is v0.14.2's).
std::string ds_line_prefix(double timestamp_s, int log_dist_line = 96, int64_t rank = 0);
// "comm op: <record> | time (ms): ... | busbw (Gbps): ..." (no prefix, no newline).
std::string ds_verbose_record(const LoggedOp& op);
void write_ds_verbose_line(std::ostream& out, const LoggedOp& op, int log_dist_line = 96);

// log_summary(): the header, then per record (first-seen order) one row per message size,
// ascending. `ops` must be the ops logged so far, in order.
void write_ds_summary(std::ostream& out, const std::vector<LoggedOp>& ops);

// The same table gathered op by op, for a writer that drops each op once it is written: memory
// grows with the distinct (record, size, value) triples, not with the ops; the same figures, summed
// in the same order (each row's total in log order, its trimmed means over the sorted values).
class DsSummary {
  public:
    void add(const LoggedOp& op);
    void write(std::ostream& out) const;

  private:
    struct Row {
        int64_t count = 0;
        double total_ms = 0.0;
        std::map<double, int64_t> latency, algbw, busbw;   // value -> how many ops had it
    };
    std::vector<std::string> order_;   // record keys, first-seen order
    std::map<std::string, std::map<int64_t, Row>> rows_;
};

// Reads one verbose comms_logger line back. Accepts the variants seen in the field: any prefix
// before "comm op:" (logging prefix, "rank=0 | "), no caller (debug off), and extra
// " | [Key: value]" fields such as "[Line Number: n]". Sizes are parsed from their printed form,
// so `bytes` is only as precise as the two printed decimals; `op.size_text` keeps the original.
// The prefix's "[Rank N]" (log_dist's, the global rank that logged the line) sets `op.rank` and
// `rank_named`; without one (another prefix, or log_dist's "[Rank -1]" before torch.distributed
// is up) op.rank stays 0 and rank_named false, so a reader can tell "rank 0" from "unsaid".
struct ParsedLogLine {
    LoggedOp op;
    bool rank_named = false;
};
std::optional<ParsedLogLine> parse_ds_verbose_line(const std::string& line);
// "134.33 MB" -> bytes (approximate); "0B" -> 0. nullopt if malformed.
std::optional<double> parse_ds_size_string(const std::string& text);

// DeepSpeed's trim_mean(data, 0.1) (utils/timer.py), exposed for tests.
double ds_trim_mean(std::vector<double> data, double trim_percent);

}  // namespace zerosim
