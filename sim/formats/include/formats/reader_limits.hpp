// What a time or a byte count read from a log may be. Every reader (comms_logger lines and
// log_summary rows, zerosim/zerorun JSON logs, nccl-tests rows) refuses the rest as an input error
// naming the line, so no impossible value reaches a verdict.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace zerosim {

// The longest time one op may take: 1e7 ms (2.8 hours). torch.distributed's default process-group
// timeout is 30 minutes (1.8e6 ms): a collective that took longer would have been killed by the
// watchdog, so a larger time is a corrupt or mis-scaled log, not a measurement.
constexpr double kMaxOpTimeMs = 1e7;

// nullptr when `ms` is a time a log can hold (finite, 0 or more, at most `max_ms`); else what is
// wrong with it.
inline const char* time_problem(double ms, double max_ms = kMaxOpTimeMs) {
    if (std::isnan(ms)) return "is not a number";
    if (std::isinf(ms)) return "is infinite";
    if (ms < 0) return "is negative";
    if (ms > max_ms) return "is beyond reason (more than 1e7 ms, 2.8 hours, for one op)";
    return nullptr;
}

// "time (ms) -1 is negative: expected a time of 0 or more, finite, at most 1e7 ms per op".
inline std::string time_error(const std::string& what, double v, const char* problem) {
    char num[64];
    std::snprintf(num, sizeof num, "%g", v);
    return what + " " + num + " " + problem + ": expected a time of 0 or more, finite, at most 1e7 ms per op";
}

// nullptr when a rate or bandwidth (Gbps, GB/s) is finite and 0 or more.
inline const char* rate_problem(double v) {
    if (std::isnan(v)) return "is not a number";
    if (std::isinf(v)) return "is infinite";
    if (v < 0) return "is negative";
    return nullptr;
}

}  // namespace zerosim
