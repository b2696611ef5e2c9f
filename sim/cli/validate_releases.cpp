#include "validate_releases.hpp"

#include <iostream>

#include "command.hpp"
#include "formats/log_release.hpp"
#include "formats/op_kinds.hpp"
#include "validate/op_kinds_diff.hpp"

namespace zerosim::cli {

int note_log_releases(const MeasuredLog& pred, const MeasuredLog& meas, const std::string& deepspeed) {
    std::optional<Release> given;
    if (!deepspeed.empty()) {
        auto r = parse_release(deepspeed, "--deepspeed");
        if (!r) return input_error(r.error());
        given = r.value();
    }
    LogReleases m = infer_log_releases(meas);
    if (!m.known) {
        if (given) std::cerr << "zerosim: note: " << printable(meas.path, 512) << ": nothing in it names its DeepSpeed release; assuming "
                             << given->name() << " (--deepspeed)\n";
        return 0;
    }
    Release assumed = given && m.contains(*given) ? *given : m.last;
    if (given || summary_only(meas) || !m.contains(kBaselineRelease))
        std::cerr << "zerosim: note: " << printable(meas.path, 512) << ": written by " << m.range() << " (" << m.evidence << "); assuming "
                  << assumed.name() << "\n";
    if (given && !m.contains(*given))
        std::cerr << "zerosim: warning: " << printable(meas.path, 512) << ": --deepspeed " << given->number() << " is not among the releases that "
                  << "could have written it (" << m.range() << ")\n";
    LogReleases p = infer_log_releases(pred);
    if (p.known && !pred.ops.empty() && (p.last < m.first || m.last < p.first))
        std::cerr << "zerosim: warning: " << printable(pred.path, 512) << ": predicted for " << p.range() << " (" << p.evidence
                  << "), but the measured log is " << m.range() << "'s; predict with --deepspeed " << assumed.number() << "\n";
    return 0;
}

int validate_op_kinds(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, const std::string& what,
                      const std::string& format, const std::string& output, const std::vector<std::string>& inputs) {
    DiffScope scope = what == "ops" ? DiffScope::Ops : what == "time" ? DiffScope::Time : DiffScope::All;
    OpKindReport r = diff_op_kinds(pred, meas, tolerance, scope);
    int rc = emit(output, inputs, [&](std::ostream& out) {
        if (format == "json")
            write_op_kinds_json(out, r);
        else if (format == "row")
            write_op_kinds_row(out, r);
        else if (format == "md")
            write_op_kinds_markdown(out, r);
        else
            write_op_kinds_text(out, r);
    });
    if (rc) return rc;
    return r.pass() ? 0 : 1;
}

}  // namespace zerosim::cli
