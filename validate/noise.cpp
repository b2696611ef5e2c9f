#include "validate/noise.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "validate/align.hpp"
#include "stats.hpp"

namespace zerosim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using validate_detail::median;

// The op-weighted (lower) median of values: each key counts as many times as it has ops.
double weighted_median(std::vector<std::pair<double, size_t>> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t total = 0;
    for (const auto& x : v) total += x.second;
    size_t cum = 0;
    for (const auto& x : v) {
        cum += x.second;
        if (2 * cum >= total) return x.first;
    }
    return v.back().first;
}

// Mean and sample standard deviation (n - 1).
std::pair<double, double> mean_sd(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    double ss = 0;
    for (double x : v) ss += (x - m) * (x - m);
    return {m, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
}

// "step3.micro0.backward" -> 3; -1 outside training steps (initialisation).
int step_number(const std::string& phase) {
    if (phase.rfind("step", 0) != 0) return -1;
    int n = 0;
    size_t i = 4;
    if (i >= phase.size() || !std::isdigit(static_cast<unsigned char>(phase[i]))) return -1;
    while (i < phase.size() && std::isdigit(static_cast<unsigned char>(phase[i]))) n = n * 10 + (phase[i++] - '0');
    return n;
}

// The interval of |e| given the interval [lo, hi] of e.
std::pair<double, double> abs_interval(double lo, double hi) {
    if (lo <= 0 && hi >= 0) return {0.0, std::max(-lo, hi) + 0.0};   // + 0.0: never -0
    if (lo > 0) return {lo, hi};
    return {-hi, -lo};
}

// The error interval of a key were it measured `scale` times as often (repeats and ops) with the
// same floor and spread: the ratio pred / meas with meas inside its t interval. The standard error
// of the measured median is the larger of the one the repeats show (floor / sqrt(repeats)) and the
// one the single ops' spread implies (sd = 1.4826 MAD for normal noise, a median's standard error
// 1.2533 sd / sqrt(n)): with few repeats, their medians can agree by chance. The prediction's own
// standard error (a calibration's, which more repeats of the run do not shrink) adds in quadrature:
// the log ratio is the difference of two independent estimates.
// `pred_scale`: the prediction's standard error as if fitted from that many times the rounds.
std::pair<double, double> key_interval(const RepeatKey& k, double scale, double pred_scale = 1.0) {
    const double repeats = static_cast<double>(k.repeats) * scale;
    const double between = k.paired_floor / std::sqrt(repeats);
    const double within = 1.4826 * 1.2533 * k.mad / std::sqrt(static_cast<double>(k.ops) * scale);
    // Half-width of the mean log ratio (measured over predicted); the error is exp(-mean) - 1.
    // On the log scale a time's interval stays positive however noisy the repeats.
    const double se = std::hypot(std::max(between, within), k.pred_se / std::sqrt(pred_scale));
    const double half = student_t975(static_cast<size_t>(std::max(1.0, std::round(repeats) - 1))) * se;
    return {(1 + k.error) * std::exp(-half) - 1, (1 + k.error) * std::exp(half) - 1};
}

struct Bounds {
    double lo = 0, hi = 0;
};

// The op error's interval with every key measured over `scale` times its repeats.
Bounds op_error_bounds(const std::vector<RepeatKey>& keys, double scale, double pred_scale = 1.0) {
    std::vector<std::pair<double, size_t>> lo, hi;
    for (const auto& k : keys) {
        auto [l, h] = key_interval(k, scale, pred_scale);
        auto [al, ah] = abs_interval(l, h);
        lo.push_back({al, k.ops});
        hi.push_back({ah, k.ops});
    }
    return {weighted_median(lo), weighted_median(hi)};
}

}  // namespace

double student_t975(size_t dof) {
    static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                   2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                   2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (dof == 0) return kInf;
    if (dof <= 30) return table[dof - 1];
    double d = static_cast<double>(dof);
    return 1.95996 + 2.3722 / d + 3.1 / (d * d);
}

void judge_repeats(RepeatReport& r) {
    r.repeats_needed = 0;
    r.needs_calibration = false;
    r.joint_repeats_needed = r.calibration_rounds_needed = r.calibration_rounds = 0;
    r.calibration_factor = 0;
    std::vector<std::pair<double, size_t>> pse;
    for (auto& k : r.keys) {
        std::tie(k.error_lo, k.error_hi) = key_interval(k, 1.0);
        pse.push_back({k.pred_se, k.ops});
    }
    r.pred_se = weighted_median(pse);
    r.fast_explains = false;
    if (r.repeats < 2 || r.keys.empty()) {
        r.verdict = "";
        return;
    }
    Bounds b = op_error_bounds(r.keys, 1.0);
    r.error_lo = b.lo;
    r.error_hi = b.hi;
    if (b.hi <= r.tolerance) {
        r.verdict = "PASS";
    } else if (b.lo > r.tolerance) {
        r.verdict = "FAIL";
        // Measured slower than predicted (the weighted error negative) while the fastest calls match.
        std::vector<std::pair<double, size_t>> signed_err;
        for (const auto& k : r.keys) signed_err.push_back({k.error, k.ops});
        r.fast_explains = weighted_median(signed_err) < 0 && std::fabs(r.fast_error) <= r.tolerance;
    } else {
        r.verdict = "INCONCLUSIVE";
        // The interval narrows as 1 / sqrt(repeats) (and t falls): the first count whose interval
        // lies on one side of the tolerance, the error and floor staying as measured.
        for (size_t n = r.repeats + 1; n <= kMaxRepeats; ++n) {
            Bounds nb = op_error_bounds(r.keys, static_cast<double>(n) / static_cast<double>(r.repeats));
            if (nb.hi <= r.tolerance || nb.lo > r.tolerance) {
                r.repeats_needed = n;
                break;
            }
        }
        // Unsettled even with repeats without end (the measurement's part of every key's se gone):
        // the prediction's own error spans the tolerance.
        if (!r.repeats_needed && r.prediction_error_given) {
            Bounds inf = op_error_bounds(r.keys, 1e12);
            r.needs_calibration = !(inf.hi <= r.tolerance || inf.lo > r.tolerance);
        }
        if (r.needs_calibration) {
            // Repeats and calibration rounds grown together by n / repeats: the first n that
            // settles it. The rounds now: the fewest behind any judged key.
            for (const auto& k : r.keys)
                if (k.pred_rounds) r.calibration_rounds = r.calibration_rounds ? std::min(r.calibration_rounds, k.pred_rounds) : k.pred_rounds;
            for (size_t n = r.repeats + 1; n <= kMaxRepeats; ++n) {
                const double f = static_cast<double>(n) / static_cast<double>(r.repeats);
                Bounds nb = op_error_bounds(r.keys, f, f);
                if (nb.hi <= r.tolerance || nb.lo > r.tolerance) {
                    r.joint_repeats_needed = n;
                    r.calibration_factor = f;
                    r.calibration_rounds_needed =
                        static_cast<size_t>(std::ceil(f * static_cast<double>(r.calibration_rounds) - 1e-9));
                    break;
                }
            }
        }
    }
}

namespace {

// A key of the repeat statistics: the op (its comms-logger name) and its size in bytes.
using RepeatOpKey = std::pair<std::string, int64_t>;
// Per unit (a run, or a step of one run), the times of a key's ops in it.
using TimesPerUnit = std::map<int, std::vector<double>>;

// The matched ops' times of every measured log against the prediction.
struct RepeatSamples {
    // key -> unit -> measured times; key -> predicted times.
    std::map<RepeatOpKey, TimesPerUnit> samples;
    std::map<RepeatOpKey, TimesPerUnit> predicted;
    // unit -> step -> (predicted, measured) sums of every matched op (no size filter, as
    // diff_logs' communication per step).
    std::map<int, std::map<int, std::pair<double, double>>> steps;
    size_t outside_steps = 0;
};

RepeatSamples collect_repeat_samples(const MeasuredLog& pred, const std::vector<const MeasuredLog*>& meas, bool by_log,
                                     double min_time_ms, double min_bytes) {
    RepeatSamples rs;
    for (size_t j = 0; j < meas.size(); ++j) {
        const MeasuredLog& m = *meas[j];
        auto take = [&](const LoggedOp& p, const LoggedOp& q) {
            int step = step_number(!p.phase.empty() ? p.phase : q.phase);
            int unit = by_log ? static_cast<int>(j) : step;
            if (step >= 0) {
                auto& s = rs.steps[unit][step];
                s.first += p.time_ms;
                s.second += q.time_ms;
            }
            if (std::max(p.time_ms, q.time_ms) < min_time_ms || p.bytes < min_bytes || !(q.time_ms > 0) ||
                !std::isfinite(q.time_ms))
                return;
            if (!by_log && step < 0) {
                ++rs.outside_steps;
                return;
            }
            auto key = std::make_pair(p.record, p.bytes);
            rs.samples[key][unit].push_back(q.time_ms);
            rs.predicted[key][unit].push_back(p.time_ms);
        };
        for (const auto& e : align_ops(pred.ops, m.ops).entries) {
            if (e.kind == DiffKind::Match) take(pred.ops[static_cast<size_t>(e.pred)], m.ops[static_cast<size_t>(e.meas)]);
            if (e.kind == DiffKind::Swapped) {
                take(pred.ops[static_cast<size_t>(e.pred)], m.ops[static_cast<size_t>(e.meas2)]);
                take(pred.ops[static_cast<size_t>(e.pred2)], m.ops[static_cast<size_t>(e.meas)]);
            }
        }
    }
    return rs;
}

// Key k's statistics from its measured and predicted times per unit (at least two units); false
// when no prediction above zero leaves two repeats to compare with.
bool fill_repeat_key(RepeatKey& k, const TimesPerUnit& per_unit, TimesPerUnit& predicted) {
    // Per repeat the ratio of the medians, measured over predicted: the comparison is paired,
    // so a prediction that follows the measurement step by step (a log against itself, or
    // scaled) carries none of its noise; a prediction that does not move leaves all of it.
    std::vector<double> medians, pred_medians, ratios, per_op;
    for (const auto& [u, v] : per_unit) {
        const std::vector<double>& pv = predicted[u];
        medians.push_back(median(v));
        pred_medians.push_back(median(pv));
        if (pred_medians.back() > 0) ratios.push_back(std::log(medians.back() / pred_medians.back()));
        for (size_t i = 0; i < v.size() && i < pv.size(); ++i)
            if (pv[i] > 0) per_op.push_back(std::log(v[i] / pv[i]));
    }
    auto [mean, sd] = mean_sd(medians);
    k.meas_ms = mean;
    k.floor = mean > 0 ? sd / mean : 0;
    k.pred_ms = mean_sd(pred_medians).first;
    if (ratios.size() < 2 || per_op.empty()) return false;
    auto [c, csd] = mean_sd(ratios);
    k.error = std::exp(-c) - 1;
    k.paired_floor = csd;
    double med = median(per_op);
    std::vector<double> dev;
    for (double x : per_op) dev.push_back(std::fabs(x - med));
    k.mad = median(dev);
    // The 10th percentile of measured / predicted (lower order statistic): the fastest calls.
    std::vector<double> sorted_ops = per_op;
    std::sort(sorted_ops.begin(), sorted_ops.end());
    k.fast_error = std::exp(-sorted_ops[sorted_ops.size() / 10]) - 1;
    std::tie(k.error_lo, k.error_hi) = key_interval(k, 1.0);
    return true;
}

// The op-weighted medians over the keys: error, floor, spread and the fastest calls' error.
void summarise_repeat_keys(RepeatReport& r) {
    std::vector<std::pair<double, size_t>> err, floor, mad;
    for (const auto& k : r.keys) {
        err.push_back({std::fabs(k.error), k.ops});
        floor.push_back({k.floor, k.ops});
        mad.push_back({k.mad, k.ops});
    }
    r.error = weighted_median(err);
    r.floor = weighted_median(floor);
    r.mad = weighted_median(mad);
    {
        std::vector<std::pair<double, size_t>> fast;
        for (const auto& k : r.keys) fast.push_back({k.fast_error, k.ops});
        r.fast_error = weighted_median(fast);
    }
}

// Communication per step: per repeat, the median over its steps of measured / predicted.
void repeat_step_communication(RepeatReport& r, const std::map<int, std::map<int, std::pair<double, double>>>& steps) {
    std::vector<double> ratios, preds, measured;
    for (const auto& [u, per_step] : steps) {
        std::vector<double> q, p, m;
        for (const auto& [s, pm] : per_step) {
            if (pm.first > 0 && pm.second > 0) q.push_back(std::log(pm.second / pm.first));
            p.push_back(pm.first);
            m.push_back(pm.second);
        }
        if (q.empty()) continue;
        ratios.push_back(median(q));
        preds.push_back(median(p));
        measured.push_back(median(m));
    }
    if (ratios.size() >= 2) {
        auto [mq, sq] = mean_sd(ratios);
        double half = student_t975(ratios.size() - 1) * sq / std::sqrt(static_cast<double>(ratios.size()));
        r.step_pred_ms = mean_sd(preds).first;
        r.step_meas_ms = mean_sd(measured).first;
        r.step_error = std::exp(-mq) - 1;
        r.step_lo = std::exp(-mq - half) - 1;
        r.step_hi = std::exp(-mq + half) - 1;
        r.step_floor = sq;
    }
}

}  // namespace

RepeatReport repeat_stats(const MeasuredLog& pred, const std::vector<const MeasuredLog*>& meas, double tolerance,
                          double min_time_ms, double min_bytes) {
    RepeatReport r;
    r.logs = meas.size();
    r.tolerance = tolerance;
    const bool by_log = meas.size() >= 2;
    r.unit = by_log ? "runs" : "steps";
    RepeatSamples rs = collect_repeat_samples(pred, meas, by_log, min_time_ms, min_bytes);
    std::map<int, bool> units_seen;
    for (const auto& [key, per_unit] : rs.samples) {
        size_t n = 0;
        for (const auto& [u, v] : per_unit) n += v.size();
        if (per_unit.size() < 2) {
            r.ops_without_repeats += n;
            continue;
        }
        RepeatKey k;
        k.op = key.first;
        k.bytes = key.second;
        k.ops = n;
        k.repeats = per_unit.size();
        if (!fill_repeat_key(k, per_unit, rs.predicted[key])) {
            r.ops_without_repeats += n;   // no prediction above zero to compare with
            continue;
        }
        for (const auto& [u, v] : per_unit) units_seen[u] = true;
        r.keys.push_back(k);
    }
    r.ops_without_repeats += rs.outside_steps;
    r.repeats = by_log ? meas.size() : units_seen.size();
    summarise_repeat_keys(r);
    repeat_step_communication(r, rs.steps);
    judge_repeats(r);
    return r;
}

namespace {

// "inf" rather than "inf%" for an interval without a bound.
std::string percent_or_inf(double v) { return std::isfinite(v) ? validate_detail::percent_text(v) : "inf"; }

std::string interval(double lo, double hi) { return "[" + percent_or_inf(lo) + ", " + percent_or_inf(hi) + "]"; }

std::string fixed1(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}

}  // namespace

std::string repeat_verdict_meaning(const RepeatReport& r) {
    const std::string tol = percent_or_inf(r.tolerance);
    const std::string with = r.prediction_error_given ? " and the prediction's own standard error (" + percent_or_inf(r.pred_se) + ")" : "";
    if (r.verdict == "PASS")
        return "PASS: the prediction's error is within " + tol + " even at the far end of what the measurement's noise" + with +
               (with.empty() ? " allows" : " allow");
    if (r.verdict == "FAIL")
        return "FAIL: the prediction's error exceeds " + tol + " by more than the measurement's noise" + with +
               (with.empty() ? " explains" : " explain") + ": the model is off" +
               (r.fast_explains ? " for this machine's state; yet its fastest calls are within " + tol + " (error " + percent_or_inf(r.fast_error) +
                                      "): the slow ones are the machine's (preempted or contended), which the model leaves out"
                                : std::string());
    if (r.verdict == "INCONCLUSIVE") {
        std::string need;
        if (r.repeats_needed) {
            need = "about " + std::to_string(r.repeats_needed) + " " + r.unit + " would settle it";
        } else if (r.needs_calibration) {
            // The measurement alone cannot settle it; say what would, with both grown together.
            std::string cal = r.calibration_rounds
                                  ? std::to_string(r.calibration_rounds_needed) + " calibration rounds (now " +
                                        std::to_string(r.calibration_rounds) + ")"
                                  : "a calibration " + fixed1(r.calibration_factor) + "x as many rounds (standard error " +
                                        percent_or_inf(r.pred_se / std::sqrt(r.calibration_factor)) + ")";
            need = "no number of " + r.unit + " would settle it alone: the prediction's own error spans " + tol + "; " +
                   (r.joint_repeats_needed ? "about " + std::to_string(r.joint_repeats_needed) + " " + r.unit + " with " + cal + " would"
                                           : "more than " + std::to_string(kMaxRepeats) + " " + r.unit +
                                                 " and as many times the calibration rounds would be needed");
        } else {
            need = "more than " + std::to_string(kMaxRepeats) + " " + r.unit + " would be needed";
        }
        std::string pred = r.prediction_error_given ? " and the prediction's (standard error " + percent_or_inf(r.pred_se) + ")" : "";
        return "INCONCLUSIVE: the measurement's noise (floor " + percent_or_inf(r.floor) + " over " + std::to_string(r.repeats) + " " + r.unit +
               ")" + pred + (pred.empty() ? " leaves" : " leave") + " the error's interval " + interval(r.error_lo, r.error_hi) +
               " on both sides of " + tol + "; " + need;
    }
    return "no repeats: the measurement's noise is unknown, the verdict compares one measurement's median error with " + tol;
}

void write_repeat_text(std::ostream& out, const RepeatReport& r) {
    char line[320];
    out << "\nrepeats: " << r.repeats << " " << r.unit << " (" << r.logs << " measured log" << (r.logs == 1 ? "" : "s") << ")";
    if (r.ops_without_repeats) out << "; " << r.ops_without_repeats << " ops of sizes seen in one repeat only are not judged";
    out << "\n";
    std::snprintf(line, sizeof line, "%-24s %10s %5s %4s %12s %12s %8s %20s %7s %7s\n", "op", "bytes", "ops", "rep", "predicted ms",
                  "measured ms", "error", "95% interval", "floor", "spread");
    out << line;
    for (const auto& k : r.keys) {
        std::snprintf(line, sizeof line, "%-24s %10lld %5zu %4zu %12.4f %12.4f %8s %20s %7s %7s\n", k.op.c_str(),
                      static_cast<long long>(k.bytes), k.ops, k.repeats, k.pred_ms, k.meas_ms, percent_or_inf(k.error).c_str(),
                      interval(k.error_lo, k.error_hi).c_str(), percent_or_inf(k.floor).c_str(), percent_or_inf(k.mad).c_str());
        out << line;
    }
    out << "op error (median |error| of the op medians): " << percent_or_inf(r.error) << ", 95% interval " << interval(r.error_lo, r.error_hi)
        << ", beside a noise floor of " << percent_or_inf(r.floor) << " (run-to-run sd of an op's median; single ops spread " << percent_or_inf(r.mad)
        << ")\n";
    if (r.prediction_error_given)
        out << "prediction's standard error (its calibration's, per key; op-weighted median " << percent_or_inf(r.pred_se)
            << "): combined with the measurement's in quadrature in every interval\n";
    if (r.step_meas_ms > 0)
        out << "communication per step: predicted " << r.step_pred_ms << " ms, measured " << r.step_meas_ms << " ms, error "
            << percent_or_inf(r.step_error) << ", 95% interval " << interval(r.step_lo, r.step_hi) << ", noise floor " << percent_or_inf(r.step_floor) << "\n";
    out << repeat_verdict_meaning(r) << "\n";
}

void write_repeat_markdown(std::ostream& out, const RepeatReport& r) {
    out << "\n### repeats (" << r.repeats << " " << r.unit << ")\n\n| op | bytes | ops | repeats | predicted ms | measured ms | error | 95% interval | floor | spread |\n"
        << "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n";
    char line[320];
    for (const auto& k : r.keys) {
        std::snprintf(line, sizeof line, "| %s | %lld | %zu | %zu | %.4f | %.4f | %s | %s | %s | %s |\n", k.op.c_str(),
                      static_cast<long long>(k.bytes), k.ops, k.repeats, k.pred_ms, k.meas_ms, percent_or_inf(k.error).c_str(),
                      interval(k.error_lo, k.error_hi).c_str(), percent_or_inf(k.floor).c_str(), percent_or_inf(k.mad).c_str());
        out << line;
    }
    out << "\n- op error " << percent_or_inf(r.error) << " " << interval(r.error_lo, r.error_hi) << ", noise floor " << percent_or_inf(r.floor)
        << (r.prediction_error_given ? ", prediction's standard error " + percent_or_inf(r.pred_se) + " (in every interval)" : std::string())
        << "\n- "
        << repeat_verdict_meaning(r) << "\n";
}

}  // namespace zerosim
