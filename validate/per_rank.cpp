#include "validate/per_rank.hpp"

#include <algorithm>
#include <cctype>

#include "diff_json.hpp"
#include "stats.hpp"

namespace zerosim {

namespace {

using validate_detail::percent_text;

// "0-3" for a run of ranks, "0, 1, 3" otherwise.
std::string ranks_text(const std::vector<int64_t>& ranks) {
    if (ranks.empty()) return "none";
    bool run = ranks.back() - ranks.front() + 1 == static_cast<int64_t>(ranks.size());
    if (run && ranks.size() > 2) return std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
    std::string s;
    for (int64_t r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
}

template <class Map>
std::vector<int64_t> keys_of(const Map& m) {
    std::vector<int64_t> k;
    for (const auto& [rank, v] : m) k.push_back(rank);
    return k;
}

// The rank one log (of one rank or none by its lines) is of, or an Error naming the file.
Result<int64_t> rank_of(const MeasuredLog& log, bool alone) {
    auto named = rank_in_file_name(log.path);
    if (!log.ranks.empty()) {
        // A renamed or mislabelled file: trust neither silently.
        if (named && *named != log.ranks.front())
            return Error{log.path, "",
                         "its lines are rank " + std::to_string(log.ranks.front()) + "'s (\"[Rank " +
                             std::to_string(log.ranks.front()) + "]\") but its name says rank " + std::to_string(*named)};
        return log.ranks.front();
    }
    if (named) return *named;
    if (alone) return int64_t{0};
    return Error{log.path, "",
                 "cannot tell which rank logged it: its comm op lines name no rank (\"[Rank N]\") and its name is not rankN.log"};
}

}  // namespace

std::set<int64_t> named_ranks(const std::vector<MeasuredLog>& logs) {
    std::set<int64_t> out;
    for (const auto& log : logs) {
        out.insert(log.ranks.begin(), log.ranks.end());
        if (log.ranks.empty())
            if (auto named = rank_in_file_name(log.path)) out.insert(*named);
    }
    return out;
}

Result<std::map<int64_t, MeasuredLog>> logs_by_rank(std::vector<MeasuredLog> logs) {
    std::map<int64_t, MeasuredLog> out;
    const bool alone = logs.size() == 1;
    for (auto& log : logs) {
        auto parts = split_by_rank(std::move(log));
        if (!parts) return parts.error();
        for (auto& part : parts.value()) {
            auto rank = rank_of(part, alone);
            if (!rank) return rank.error();
            if (auto it = out.find(*rank); it != out.end())
                return Error{part.path, "",
                             "a second log of rank " + std::to_string(*rank) + " (the first: " + it->second.path +
                                 "); give one log per rank (repeats of a run: validate one rank at a time)"};
            out.emplace(*rank, std::move(part));
        }
    }
    return out;
}

Result<RankPairs> pair_ranks(const std::map<int64_t, MeasuredLog>& pred, const std::map<int64_t, MeasuredLog>& meas,
                             const std::string& pred_name, const std::string& meas_name) {
    std::vector<int64_t> predicted = keys_of(pred), measured = keys_of(meas);
    const std::string world = predicted.size() == 1 ? "rank " + ranks_text(predicted) + " only" : "ranks " + ranks_text(predicted);
    for (int64_t r = 0; r < static_cast<int64_t>(predicted.size()); ++r)
        if (!pred.count(r))
            return Error{pred_name, "", "no prediction of rank " + std::to_string(r) + " (it holds " + world + "; a world of " +
                                            std::to_string(predicted.back() + 1) + " needs every rank from 0)"};
    RankPairs out;
    for (const auto& [rank, log] : meas) {
        auto it = pred.find(rank);
        if (it == pred.end())
            return Error{log.path, "", "rank " + std::to_string(rank) + " is outside the predicted world (" + pred_name +
                                           " holds " + world + ")"};
        out.pairs.push_back({rank, &it->second, &log});
    }
    for (int64_t rank : predicted)
        if (!meas.count(rank)) out.unmeasured.push_back(rank);
    // Two measured ranks or more are a run's logs; one left out is a file lost, not a choice.
    if (measured.size() >= 2 && !out.unmeasured.empty())
        return Error{meas_name, "", "no log of rank " + std::to_string(out.unmeasured.front()) + " (measured ranks " +
                                        ranks_text(measured) + ", predicted " + ranks_text(predicted) +
                                        "); give one log per rank, or rank 0's alone"};
    return out;
}

std::string PerRankReport::verdict() const {
    bool inconclusive = false;
    for (const auto& r : ranks) {
        std::string v = r.report.verdict();
        if (v == "FAIL") return v;
        inconclusive = inconclusive || v != "PASS";
    }
    return ranks.empty() ? "FAIL" : inconclusive ? "INCONCLUSIVE" : "PASS";
}

namespace {

// The time error a rank is judged on: the repeats' op error, else the single median.
double rank_time_error(const DiffReport& d) { return d.repeats.usable() ? d.repeats.error : d.overall.median_abs_error; }

// The ranks' table, as text (columns right-aligned to their widest cell, the verdict last) or
// markdown.
void rank_table(std::ostream& out, const PerRankReport& r, bool md) {
    const bool timed = r.scope != DiffScope::Ops;
    std::vector<std::vector<std::string>> rows = {{"rank", "predicted", "measured", "matched", "missing", "extra", "resized", "swapped"}};
    if (timed) rows[0].push_back("time error");
    rows[0].push_back("verdict");
    for (const auto& rr : r.ranks) {
        const DiffReport& d = rr.report;
        rows.push_back({std::to_string(rr.rank)});
        for (size_t v : {d.pred_ops, d.meas_ops, d.matched, d.missing, d.extra, d.resized, d.swapped})
            rows.back().push_back(std::to_string(v));
        if (timed) rows.back().push_back(percent_text(rank_time_error(d)));
        rows.back().push_back(d.verdict());
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    for (size_t i = 0; i < rows.size(); ++i) {
        std::string line = md ? "|" : "";
        for (size_t c = 0; c < rows[i].size(); ++c) {
            const std::string& cell = rows[i][c];
            bool last = c + 1 == rows[i].size();
            std::string pad(md || last ? 0 : width[c] - cell.size(), ' ');
            line += md ? " " + cell + " |" : (c ? "  " : "") + pad + cell;
        }
        out << line << "\n";
        if (md && i == 0) {
            out << "|";
            for (size_t c = 0; c < rows[0].size(); ++c) out << "---|";
            out << "\n";
        }
    }
}

// What a failing rank got wrong: the sentence of logs that cannot be of one run, or its first
// differences (the single-rank report, `zerosim validate PRED MEAS`, lists them all).
void failing_ranks(std::ostream& out, const PerRankReport& r, const char* bullet) {
    const size_t shown = 10;
    for (const auto& rr : r.ranks) {
        const DiffReport& d = rr.report;
        if (d.pass()) continue;
        out << "\nrank " << rr.rank << ": " << d.verdict() << " (" << verdict_reason(d) << "), " << d.pred_name << " against "
            << d.meas_name << "\n";
        for (size_t i = 0; i < d.differences.size() && i < shown; ++i) out << bullet << d.differences[i] << "\n";
        if (d.differences.size() > shown) out << bullet << "... " << d.differences.size() - shown << " more\n";
    }
}

// Predictions without times (zerosim schedule's logs): every time error is then 100%.
bool untimed(const PerRankReport& r) {
    for (const auto& rr : r.ranks)
        if (rr.report.overall.count == 0 || rr.report.overall.pred_ms > 0) return false;
    return !r.ranks.empty();
}

size_t passing(const PerRankReport& r) {
    size_t n = 0;
    for (const auto& rr : r.ranks) n += rr.report.pass();
    return n;
}

}  // namespace

void write_per_rank_text(std::ostream& out, const PerRankReport& r) {
    out << "validate per rank: " << r.pred_name << " against " << r.meas_name << ", " << r.ranks.size() << " ranks, "
        << (r.scope == DiffScope::Ops ? "structure only (--what ops)" : "tolerance " + percent_text(r.tolerance)) << "\n";
    rank_table(out, r, false);
    failing_ranks(out, r, "  ");
    if (r.scope != DiffScope::Ops && untimed(r))
        out << "\nnote: the predicted logs carry no times (zerosim schedule writes 0.00): --what ops compares their structure\n";
    out << "\nverdict: " << r.verdict() << " (" << passing(r) << " of " << r.ranks.size() << " ranks pass)\n";
}

void write_per_rank_markdown(std::ostream& out, const PerRankReport& r) {
    out << "## zerosim validate, per rank\n\n- predicted: `" << r.pred_name << "`\n- measured: `" << r.meas_name << "`\n\n";
    rank_table(out, r, true);
    failing_ranks(out, r, "  - ");
    out << "\n**verdict: " << r.verdict() << "** (" << passing(r) << " of " << r.ranks.size() << " ranks pass)\n";
}

void write_per_rank_json(std::ostream& out, const PerRankReport& r) {
    nlohmann::ordered_json j;
    j["predicted"] = r.pred_name;
    j["measured"] = r.meas_name;
    j["ranks"] = nlohmann::ordered_json::array();
    for (const auto& rr : r.ranks) {
        nlohmann::ordered_json one;
        one["rank"] = rr.rank;
        one.update(validate_detail::diff_json(rr.report));
        j["ranks"].push_back(std::move(one));
    }
    std::string v = r.verdict();
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    j["verdict"] = v;
    out << j.dump(1) << '\n';
}

void write_per_rank_row(std::ostream& out, const PerRankReport& r) {
    for (const auto& rr : r.ranks) {
        out << rr.rank << '\t';
        write_diff_row(out, rr.report);
    }
}

}  // namespace zerosim
