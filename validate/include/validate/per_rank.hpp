// Validation per rank (docs/validate.md, "One log per rank"): predicted and measured logs paired
// by the global rank that logged them, each pair diffed as a single log is (diff.hpp), and one
// verdict over every rank. Under pipeline, tensor, sequence or expert parallelism each rank issues
// its own ops, so rank 0's prediction says nothing about rank 2's log.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "formats/measured_logs.hpp"
#include "validate/diff.hpp"

namespace zerosim {

// The rank each log names: its comm op lines' "[Rank N]", else its file name's (rankN.log); a log
// of several ranks names them all. Used to tell a run's ranks from repeats of one rank.
std::set<int64_t> named_ranks(const std::vector<MeasuredLog>& logs);

// One side's logs by rank: each log split by its lines' ranks (formats split_by_rank), a log
// whose lines name none taken by its file name, and a log that says neither taken as rank 0's
// when it is its side's only log (DeepSpeed's logger prints rank 0 alone). Refused, as an Error
// naming the file: lines and name that say different ranks, a log of no telling rank among
// several, two logs of one rank.
Result<std::map<int64_t, MeasuredLog>> logs_by_rank(std::vector<MeasuredLog> logs);

struct RankPair {
    int64_t rank = 0;
    const MeasuredLog* pred = nullptr;
    const MeasuredLog* meas = nullptr;
};
struct RankPairs {
    std::vector<RankPair> pairs;        // ascending by rank
    std::vector<int64_t> unmeasured;    // predicted ranks without a log (only when one rank was measured)
};
// Pairs the sides by rank. The predicted ranks are the world: 0 to N-1, none left out. Refused,
// as an Error naming the file or side (`pred_name`, `meas_name`): a predicted rank missing, a
// measured rank outside them, and, when two ranks or more were measured, a predicted rank without
// its log. One measured rank alone pairs with its prediction (a user's real log is rank 0's; the
// other ranks come back in `unmeasured`).
Result<RankPairs> pair_ranks(const std::map<int64_t, MeasuredLog>& pred, const std::map<int64_t, MeasuredLog>& meas,
                             const std::string& pred_name, const std::string& meas_name);

struct RankReport {
    int64_t rank = 0;
    DiffReport report;
};
struct PerRankReport {
    std::string pred_name, meas_name;   // the sides as given (a folder, a file)
    std::vector<RankReport> ranks;
    DiffScope scope = DiffScope::All;
    double tolerance = 0.15;
    // PASS when every rank passes; FAIL when one fails; INCONCLUSIVE otherwise.
    std::string verdict() const;
    bool pass() const { return verdict() == "PASS"; }
};

// A table of the ranks (ops predicted and measured, matched, missing, extra, resized, swapped,
// the time error unless --what ops, the verdict), each failing rank's differences, the verdict.
void write_per_rank_text(std::ostream& out, const PerRankReport& r);
void write_per_rank_markdown(std::ostream& out, const PerRankReport& r);
// {"ranks": [{"rank": N, <the rank's diff report>}...], "verdict": "pass"|"fail"|"inconclusive"}.
void write_per_rank_json(std::ostream& out, const PerRankReport& r);
// One write_diff_row line per rank, the rank first.
void write_per_rank_row(std::ostream& out, const PerRankReport& r);

}  // namespace zerosim
