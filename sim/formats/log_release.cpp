#include "formats/log_release.hpp"

#include "formats/op_kinds.hpp"
#include "schedule/release_rules.hpp"

namespace zerosim {

std::string LogReleases::range() const {
    return first == last ? "DeepSpeed " + first.name() : "DeepSpeed " + first.name() + " to " + last.name();
}

LogReleases infer_log_releases(const MeasuredLog& log) {
    LogReleases r;
    if (log.format != LogFormat::DeepSpeed) return r;
    Release first, last;
    if (log.log_dist_line && releases_with_log_dist_line(log.log_dist_line, first, last)) {
        r = {true, first, last, "its [logging.py:" + std::to_string(log.log_dist_line) + ":log_dist] prefix"};
    }
    if (summary_only(log)) {
        // The logger's default level hides the per-op lines from v0.17.6 (#7526); before, a table
        // without lines means a logger without verbose.
        const Release hidden = release_rule(ReleaseRuleId::LoggerDefaultWarning).first;
        std::string why = "a log_summary() table without per-op lines: DeepSpeed's default logger level since " +
                          hidden.name() + ", " + release_rule(ReleaseRuleId::LoggerDefaultWarning).pr;
        if (!r.known) {
            r = {true, hidden, kNewestRelease, why};
        } else if (r.last >= hidden) {
            if (r.first < hidden) r.first = hidden;
            r.evidence += " and " + why;
        }
    }
    return r;
}

}  // namespace zerosim
