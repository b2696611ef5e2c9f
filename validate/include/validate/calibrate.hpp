// Calibration: fit the topology's latency and bandwidth terms to measured collective times by
// least squares (Eigen). For each measured row the uncalibrated model gives its latency L and its
// transfer time T; the fit finds the scales a, b with t = a L + b T, i.e. latency_scale = a and
// bandwidth_scale = 1 / b. On OpenMPI's shared-memory transport L splits into the eager steps'
// latency and the rendezvous steps' R, and where the rows have both, t = a L + r R + b T. Errors are relative, and the fit is least absolute deviations
// (iteratively reweighted least squares), so a few sizes where the hardware departs from
// latency + size / bandwidth (protocol switches, pipeline ramps) do not pull every other size
// off. Algorithm and protocol choices depend on the scales, so plans are recomputed each round.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_input.hpp"
#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"
#include "validate/network_fit.hpp"

namespace zerosim {

struct Measurement {
    OpKind op = OpKind::AllReduce;
    int64_t bytes = 0;          // nccl-tests' size (the whole buffer)
    double time_us = 0;
    int64_t world = 0;
    std::string source;         // "file:row"
    TunerChoice only = {};      // NCCL_ALGO / NCCL_PROTO the run forced (calibrate --algo/--proto)
};

struct FitResult {
    double latency_scale = 1, bandwidth_scale = 1;
    // The rendezvous latency's own scale (MPI on shared memory: steps too large for an eager
    // fragment), fitted when rows fall on both sides of the eager limit; 0 = tied to latency_scale.
    double rendezvous_scale = 0;
    std::string rendezvous_tied_why;   // why a third scale was tried and refused (non-physical), if it was
    // The bandwidth scale of the bytes beyond the cache (topology intra cache_bytes_per_rank),
    // fitted when two sizes or more reach beyond it and two stay within; 0 = the bandwidth scale.
    double memory_scale = 0;
    std::string memory_tied_why;
    double r2 = 0;              // on the times
    double median_abs_error = 0;
    size_t used = 0;
    std::vector<std::string> unused;   // rows left out, with the reason
    std::vector<double> residuals;     // relative, per used row
    std::vector<double> residual_logged_bytes;   // each used row's logged bytes (as the op logs show it)
    std::string scope;                 // intra-node / inter-node
};

Result<FitResult> fit_topology(const Topology& t, const std::vector<Measurement>& rows);

// A global fit over every row, and one per collective that has at least two sizes.
struct Calibration {
    FitResult global;
    std::map<std::string, FitResult> per_collective;   // nccl-tests names
    // The topology as given (its own scales), on the rows the global fit used: the median
    // relative |residual| the fit is compared with.
    double uncalibrated_median_abs_error = 0;
    // The fit as the calibrated file applies it (per collective where one was fitted, else the
    // global scales) on the same rows: what is compared with the topology as given.
    double applied_median_abs_error = 0;
    // Rows that all cross nodes: the network's own terms (validate/network_fit.hpp) instead of
    // scales, and no per-collective fit (one set of terms for the cluster).
    bool network = false;
    NetworkFit network_fit;
    // Rows measured; with median_of_repeats, rows of one collective, size and world are fitted as
    // their median, so that a preempted call does not pull the fit.
    size_t measured_rows = 0;
};
// `median_of_repeats`: rows of one collective, size and world (bench rounds repeated between a
// run's steps) are fitted as one row of their median time (--median-of-repeats).
Result<Calibration> calibrate(const Topology& t, const std::vector<Measurement>& rows, bool median_of_repeats = false);
// Predicted time (µs) of one measurement on a topology (the engine's single-collective path).
double predicted_time_us(const Topology& t, const Measurement& m);

// Which collective a nccl-tests file measured, from its text or name ("all_gather_perf", ...).
bool guess_collective(const std::string& text_or_name, OpKind& out);

// The rows of one nccl-tests style table file (nccl-tests, zerorun bench, zerosim bench) as
// measurements on `world` ranks: of the collective `op_name` names, else the one its head or its
// name shows; timed by `column`: "out-of-place", "in-place", or "as-deepspeed" (the column of the
// way DeepSpeed calls that collective). A table without in-place times gives its out-of-place ones.
Result<std::vector<Measurement>> read_calibration_table(const std::string& file, const std::string& op_name,
                                                        const std::string& column, int64_t world);

// The fit as `zerosim calibrate` reports it on stderr: rows used, scales, R^2 and median residual,
// globally and per collective, then the rows left out.
void write_calibration_summary(std::ostream& out, const Calibration& cal);

// The median |relative residual| of a fit's rows below and from `split` logged bytes, and how many
// rows each has: the latency term's sizes and the bandwidth term's, which a median over all rows
// can hide (a fit that follows the small rows and misses the large ones by 3x has a small median).
struct ResidualBands {
    double below = 0, from = 0;
    size_t rows_below = 0, rows_from = 0;
};
ResidualBands residual_bands(const FitResult& f, double split_logged_bytes);
constexpr double kResidualBandSplitBytes = 256 << 10;   // the main job's --min-bytes
constexpr double kNetworkBandSplitBytes = 1 << 20;      // across nodes: the bulk protocols' sizes

// A fit is poor when R^2 (on the times) is below 0.9 or its median |relative residual| is above
// 25%: the data then do not follow latency + size / bandwidth, and scales fitted to them mislead.
constexpr double kPoorFitR2 = 0.9;
constexpr double kPoorFitMedianResidual = 0.25;
constexpr double kWorseFitMargin = 0.01;
// One line per way the global fit is poor (none for a good fit).
std::vector<std::string> poor_fit_warnings(const Calibration& cal);
// Non-empty (the reason) when the global fit's median |residual| is above the topology's as
// given on the same rows by more than kWorseFitMargin (one percentage point: the iterative fit
// settles within 0.1 point of a topology that already fits, which is not worse): writing it would
// make predictions worse. `zerosim calibrate` then
// refuses to write unless --accept-worse-fit.
std::string worse_than_uncalibrated(const Calibration& cal);

// The calibrated topology file: the topology's JSON as read plus a "calibration" block (the global
// scales, the per-collective ones, the files fitted from and the column used).
Json calibrated_topology(const Json& topology, const Calibration& cal, const std::vector<std::string>& files,
                         const std::string& column);

}  // namespace zerosim
