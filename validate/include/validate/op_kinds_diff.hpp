// Validation of a log that holds only log_summary()'s table (DeepSpeed v0.17.6+ at its default
// logger level, #7526): no op order to align, so the two logs are compared per op kind (record and
// caller): count, message sizes with their counts, total and average size, and the total latency
// where the table measured one.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "formats/op_kinds.hpp"
#include "validate/diff.hpp"

namespace zerosim {

struct OpKindDiff {
    std::string key;
    int64_t pred_count = 0, meas_count = 0;
    double pred_bytes = 0, meas_bytes = 0;
    double pred_ms = 0, meas_ms = 0;
    bool timed = false;           // both sides timed the kind
    bool sizes_match = false;     // the same printed sizes with the same counts
    double time_error = 0;        // |pred - meas| / meas of the total latency, when timed
};

struct OpKindReport {
    std::string pred_name, meas_name;
    OpKindSource pred_source = OpKindSource::OpLines, meas_source = OpKindSource::SummaryTable;
    std::vector<OpKindDiff> kinds;   // the predicted kinds in order, then measured-only ones
    size_t matching = 0, differing = 0;
    double median_time_error = 0;    // over kinds timed on both sides
    size_t timed_kinds = 0;
    double tolerance = 0.15;
    DiffScope scope = DiffScope::All;
    bool structure_ok() const { return differing == 0 && !kinds.empty(); }
    bool time_ok() const { return timed_kinds == 0 || median_time_error <= tolerance; }
    bool pass() const;
};

OpKindReport diff_op_kinds(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, DiffScope scope);

void write_op_kinds_text(std::ostream& out, const OpKindReport& r);
void write_op_kinds_markdown(std::ostream& out, const OpKindReport& r);
void write_op_kinds_json(std::ostream& out, const OpKindReport& r);
// One tab-separated line: kinds matching, kinds differing, kinds timed, median time error, verdict.
void write_op_kinds_row(std::ostream& out, const OpKindReport& r);

}  // namespace zerosim
