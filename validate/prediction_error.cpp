#include "validate/prediction_error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

#include "schedule/collective_table.hpp"
#include "stats.hpp"

namespace zerosim {

using validate_detail::median;

std::vector<PredictionErrorRange> prediction_standard_errors(const std::vector<Measurement>& rows) {
    // Rounds of one row: same collective, size and world (as calibrate --median-of-repeats groups them).
    std::map<std::tuple<int, int64_t, int64_t>, std::vector<double>> groups;
    for (const auto& r : rows)
        if (r.time_us > 0 && r.world >= 2) groups[{static_cast<int>(r.op), r.bytes, r.world}].push_back(std::log(r.time_us));
    // (collective, range) -> per-row standard errors and the fewest rounds.
    struct Acc {
        std::vector<double> se;
        size_t rounds = 0;
    };
    std::map<std::pair<std::string, int>, Acc> acc;
    for (const auto& [key, x] : groups) {
        if (x.size() < 2) continue;
        const auto op = static_cast<OpKind>(std::get<0>(key));
        double logged = logged_bytes_of_buffer(op, static_cast<double>(std::get<1>(key)), std::get<2>(key));
        int range = logged >= static_cast<double>(kPredictionErrorSplitBytes) ? 1 : 0;
        // The median of R draws has a standard error of 1.2533 sd / sqrt(R) for normal noise (the
        // calibration fits each row's median over its rounds). sd is taken robustly as 1.4826 MAD:
        // the fit's median ignores a preempted round, and so must its error (one such round in 6
        // made a plain sd of 89% on the main job's small all_reduce rows).
        double med = median(x);
        std::vector<double> dev;
        for (double v : x) dev.push_back(std::fabs(v - med));
        double se = 1.2533 * 1.4826 * median(dev) / std::sqrt(static_cast<double>(x.size()));
        for (const std::string& name : {std::string(collective_info(op).name), std::string("all")}) {
            Acc& a = acc[{name, range}];
            a.se.push_back(se);
            a.rounds = a.rounds ? std::min(a.rounds, x.size()) : x.size();
        }
    }
    std::vector<PredictionErrorRange> out;
    for (const auto& [key, a] : acc) {
        PredictionErrorRange p;
        p.collective = key.first;
        p.min_bytes = key.second ? kPredictionErrorSplitBytes : 0;
        p.max_bytes = key.second ? 0 : kPredictionErrorSplitBytes;
        p.se = median(a.se);
        p.rows = a.se.size();
        p.rounds = a.rounds;
        out.push_back(p);
    }
    return out;
}

Json prediction_error_json(const std::vector<PredictionErrorRange>& ranges, const std::vector<std::string>& files) {
    Json j = Json::object();
    j["what"] = "standard error of log(predicted time): per row 1.2533 * 1.4826 * MAD over rounds of log(time) / sqrt(rounds), "
                "the median over the rows of a collective and size range (logged bytes)";
    j["fitted_from"] = files;
    Json arr = Json::array();
    for (const auto& r : ranges)
        arr.push_back({{"collective", r.collective}, {"min_bytes", r.min_bytes}, {"max_bytes", r.max_bytes}, {"se", r.se},
                       {"rows", r.rows}, {"rounds", r.rounds}});
    j["ranges"] = arr;
    return j;
}

const PredictionErrorRange* PredictionError::range_of(const std::string& record, int64_t bytes) const {
    OpKind op = OpKind::AllReduce;
    std::string name = guess_collective(record, op) ? collective_info(op).name : "";
    auto in = [&](const PredictionErrorRange& r) { return bytes >= r.min_bytes && (r.max_bytes == 0 || bytes < r.max_bytes); };
    for (const auto& r : ranges)
        if (r.collective == name && in(r)) return &r;
    for (const auto& r : ranges)
        if (r.collective == "all" && in(r)) return &r;
    return nullptr;
}

double PredictionError::lookup(const std::string& record, int64_t bytes) const {
    if (uniform >= 0) return uniform;
    const PredictionErrorRange* r = range_of(record, bytes);
    return r ? r->se : 0;
}

void apply_prediction_error(RepeatReport& r, const PredictionError& pe) {
    r.prediction_error_given = pe.given();
    for (auto& k : r.keys) {
        k.pred_se = pe.lookup(k.op, k.bytes);
        const PredictionErrorRange* range = pe.uniform >= 0 ? nullptr : pe.range_of(k.op, k.bytes);
        k.pred_rounds = range ? range->rounds : 0;
    }
    judge_repeats(r);
}

Result<PredictionError> read_prediction_error(const std::string& arg) {
    PredictionError pe;
    pe.source = arg;
    char* end = nullptr;
    double v = std::strtod(arg.c_str(), &end);
    if (!arg.empty() && end && *end == '\0') {
        if (!(v >= 0) || !std::isfinite(v))
            return Error{"", "--prediction-error", "expected a fraction such as 0.1 or a file from calibrate --prediction-error-out"};
        pe.uniform = v;
        return pe;
    }
    auto doc = read_json_file(arg);
    if (!doc) return doc.error();
    try {
        JsonField root(doc.value(), arg, "");
        root.expect_object();
        JsonField ranges = root.at("ranges");
        ranges.expect_array();
        for (size_t i = 0; i < ranges.size(); ++i) {
            JsonField r = ranges.at(i);
            PredictionErrorRange p;
            p.collective = r.at("collective").as_string();
            p.min_bytes = r.at("min_bytes").as_integer_in(0, INT64_MAX);
            p.max_bytes = r.at("max_bytes").as_integer_in(0, INT64_MAX);
            p.se = r.at("se").as_number_in(0, 10);
            if (r.has("rows")) p.rows = static_cast<size_t>(r.at("rows").as_integer_in(0, INT64_MAX));
            if (r.has("rounds")) p.rounds = static_cast<size_t>(r.at("rounds").as_integer_in(0, INT64_MAX));
            pe.ranges.push_back(p);
        }
    } catch (const InputFailure& f) {
        return f.error;
    }
    return pe;
}

}  // namespace zerosim
