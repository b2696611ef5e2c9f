// The calibrated prediction's own standard error (issue 20): a prediction fitted from a few noisy
// bench rounds is not exact, and a verdict that takes it as exact can PASS on one run's
// calibration and be INCONCLUSIVE on the next's. `zerosim calibrate --prediction-error-out FILE`
// writes, per collective and size range, the standard error (log scale) of the rows the fit was
// given; `zerosim validate --prediction-error FILE|FRACTION` combines it with the measurement's
// standard error in quadrature (validate/noise.hpp). docs/validate.md derives the statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_input.hpp"
#include "validate/calibrate.hpp"
#include "validate/noise.hpp"

namespace zerosim {

// One collective's rows in one size range (logged bytes, as the op logs show them).
struct PredictionErrorRange {
    std::string collective;     // nccl-tests name ("all_reduce"), or "all" for every collective
    int64_t min_bytes = 0;      // logged bytes, inclusive
    int64_t max_bytes = 0;      // exclusive; 0: no upper end
    double se = 0;              // standard error of log(predicted time), the median over the range's rows
    size_t rows = 0;            // sizes with repeated rounds in the range
    size_t rounds = 0;          // the fewest rounds of one of those rows
};

// Size ranges split at 256 KiB logged (the main job's --min-bytes): the small ops' times are the
// latency term's, the large ones' the bandwidth term's, and the noise differs between them.
constexpr int64_t kPredictionErrorSplitBytes = 256 << 10;

// Per collective and size range (and "all"), from rows repeated over rounds (same collective,
// size and world): a row's standard error is that of its median over R rounds,
// 1.2533 * 1.4826 * MAD_r(log t_r) / sqrt(R) (a robust sd, as the fit's median is robust); a range's is the median over its rows. Empty when no row is
// repeated.
std::vector<PredictionErrorRange> prediction_standard_errors(const std::vector<Measurement>& rows);
Json prediction_error_json(const std::vector<PredictionErrorRange>& ranges, const std::vector<std::string>& files);

// What validate applies: a uniform fraction, or the ranges of a calibration's file.
struct PredictionError {
    double uniform = -1;        // >= 0: every key's standard error
    std::vector<PredictionErrorRange> ranges;
    std::string source;         // the file or the fraction as given
    bool given() const { return uniform >= 0 || !ranges.empty(); }
    // The standard error for a logged op (record such as "all_gather_into_tensor", logged bytes):
    // its collective's range, else the "all" range, else 0.
    double lookup(const std::string& record, int64_t bytes) const;
    // The range lookup takes from `ranges` (nullptr: none).
    const PredictionErrorRange* range_of(const std::string& record, int64_t bytes) const;
};

// "0.1" (a fraction, the standard error of every prediction) or a file that
// calibrate --prediction-error-out wrote.
Result<PredictionError> read_prediction_error(const std::string& arg);

// Sets every key's pred_se from `pe` and judges the report again (a report without repeats keeps
// no verdict).
void apply_prediction_error(RepeatReport& r, const PredictionError& pe);

}  // namespace zerosim
