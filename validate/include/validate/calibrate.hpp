// Calibration: fit the topology's latency and bandwidth terms to measured collective times by
// least squares (Eigen). For each measured row the uncalibrated model gives its latency L and its
// transfer time T; the fit finds the scales a, b with t = a L + b T, i.e. latency_scale = a and
// bandwidth_scale = 1 / b. Errors are relative, and the fit is least absolute deviations
// (iteratively reweighted least squares), so a few sizes where the hardware departs from
// latency + size / bandwidth (protocol switches, pipeline ramps) do not pull every other size
// off. Algorithm and protocol choices depend on the scales, so plans are recomputed each round.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct Measurement {
    OpKind op = OpKind::AllReduce;
    int64_t bytes = 0;          // nccl-tests' size (the whole buffer)
    double time_us = 0;
    int64_t world = 0;
    std::string source;         // "file:row"
};

struct FitResult {
    double latency_scale = 1, bandwidth_scale = 1;
    double r2 = 0;              // on the times
    double median_abs_error = 0;
    size_t used = 0;
    std::vector<std::string> unused;   // rows left out, with the reason
    std::vector<double> residuals;     // relative, per used row
    std::string scope;                 // intra-node / inter-node
};

Result<FitResult> fit_topology(const Topology& t, const std::vector<Measurement>& rows);

// A global fit over every row, and one per collective that has at least two sizes.
struct Calibration {
    FitResult global;
    std::map<std::string, FitResult> per_collective;   // nccl-tests names
};
Result<Calibration> calibrate(const Topology& t, const std::vector<Measurement>& rows);
// Predicted time (µs) of one measurement on a topology (the engine's single-collective path).
double predicted_time_us(const Topology& t, const Measurement& m);

// Which collective a nccl-tests file measured, from its text or name ("all_gather_perf", ...).
bool guess_collective(const std::string& text_or_name, OpKind& out);

}  // namespace zerosim
