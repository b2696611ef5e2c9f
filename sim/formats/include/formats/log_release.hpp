// Which DeepSpeed releases could have written a comms log: the `[logging.py:N:log_dist]` prefix of
// its lines (schedule/release_rules.hpp log_dist_line: 96, 129, 128, 107, 123), and a
// log_summary() table without per-op lines, the mark of v0.17.6's default logger level (#7526).
#pragma once

#include <string>

#include "formats/measured_logs.hpp"
#include "inputs/release.hpp"

namespace zerosim {

struct LogReleases {
    bool known = false;          // the log says something about its release
    Release first = kBaselineRelease, last = kNewestRelease;
    std::string evidence;        // "its [logging.py:123:log_dist] prefix", ...
    bool contains(Release r) const { return in_releases(r, first, last); }
    // "DeepSpeed v0.18.0 to v0.19.5", "DeepSpeed v0.15.3"
    std::string range() const;
};

LogReleases infer_log_releases(const MeasuredLog& log);

}  // namespace zerosim
