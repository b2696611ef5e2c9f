#include "validate/op_kinds_diff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/comms_log.hpp"
#include "stats.hpp"

namespace zerosim {

bool OpKindReport::pass() const {
    bool s = scope == DiffScope::Time || structure_ok();
    bool t = scope == DiffScope::Ops || time_ok();
    return s && t;
}

namespace {

const char* source_name(OpKindSource s) {
    return s == OpKindSource::SummaryTable ? "log_summary() table only, no per-op lines" : "per-op lines";
}

using validate_detail::percent_text;

}  // namespace

OpKindReport diff_op_kinds(const MeasuredLog& pred, const MeasuredLog& meas, double tolerance, DiffScope scope) {
    OpKindReport r;
    r.pred_name = pred.path;
    r.meas_name = meas.path;
    r.tolerance = tolerance;
    r.scope = scope;
    OpKinds p = op_kinds_of(pred), m = op_kinds_of(meas);
    r.pred_source = p.source;
    r.meas_source = m.source;
    std::map<std::string, const OpKindTotals*> measured;
    for (const auto& k : m.kinds) measured[k.key] = &k;
    std::vector<double> errors;
    auto add = [&](const OpKindTotals* a, const OpKindTotals* b, const std::string& key) {
        static const OpKindTotals none{};
        const OpKindTotals& x = a ? *a : none;
        const OpKindTotals& y = b ? *b : none;
        OpKindDiff d{key, x.count, y.count, x.bytes, y.bytes, x.time_ms, y.time_ms, x.timed && y.timed,
                     a && b && x.sizes == y.sizes, 0};
        if (d.timed && y.time_ms > 0) {
            d.time_error = std::fabs(x.time_ms - y.time_ms) / y.time_ms;
            errors.push_back(d.time_error);
        }
        (d.sizes_match ? r.matching : r.differing) += 1;
        r.kinds.push_back(std::move(d));
    };
    for (const auto& k : p.kinds) {
        auto it = measured.find(k.key);
        add(&k, it == measured.end() ? nullptr : it->second, k.key);
        if (it != measured.end()) measured.erase(it);
    }
    for (const auto& k : m.kinds)
        if (measured.count(k.key)) add(nullptr, &k, k.key);
    r.timed_kinds = errors.size();
    if (!errors.empty()) {
        std::sort(errors.begin(), errors.end());
        size_t n = errors.size();
        r.median_time_error = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    }
    return r;
}

void write_op_kinds_text(std::ostream& out, const OpKindReport& r) {
    out << "validate: " << r.pred_name << " (" << source_name(r.pred_source) << ") against " << r.meas_name << " ("
        << source_name(r.meas_source) << "): compared per op kind\n";
    for (const auto& d : r.kinds) {
        out << (d.sizes_match ? "  same  " : "  DIFF  ") << d.key << ": count " << d.pred_count << " / " << d.meas_count
            << ", total " << ds_size_string(static_cast<int64_t>(std::llround(d.pred_bytes))) << " / "
            << ds_size_string(static_cast<int64_t>(std::llround(d.meas_bytes))) << ", average "
            << ds_size_string(d.pred_count ? static_cast<int64_t>(std::llround(d.pred_bytes / static_cast<double>(d.pred_count))) : 0)
            << " / "
            << ds_size_string(d.meas_count ? static_cast<int64_t>(std::llround(d.meas_bytes / static_cast<double>(d.meas_count))) : 0);
        if (r.scope != DiffScope::Ops && d.timed)
            out << ", time " << fixed2(d.pred_ms) << " / " << fixed2(d.meas_ms) << " ms (" << percent_text(d.time_error) << ")";
        out << "\n";
    }
    out << "structure: " << r.matching << " op kind(s) match in count and sizes, " << r.differing << " differ\n";
    out << "\nverdict: " << (r.pass() ? "PASS" : "FAIL") << " (";
    if (r.scope != DiffScope::Time) out << "op kinds " << (r.structure_ok() ? "identical" : "differ");
    if (r.scope == DiffScope::All) out << "; ";
    if (r.scope != DiffScope::Ops)
        out << (r.timed_kinds ? "median time error per kind " + percent_text(r.median_time_error) + " against tolerance " + percent_text(r.tolerance)
                              : std::string("no kind timed on both sides"));
    out << ")\n";
}

void write_op_kinds_markdown(std::ostream& out, const OpKindReport& r) {
    out << "## zerosim validate (per op kind)\n\n- predicted: `" << r.pred_name << "` (" << source_name(r.pred_source)
        << ")\n- measured: `" << r.meas_name << "` (" << source_name(r.meas_source) << ")\n\n"
        << "| op kind | count | sizes (predicted) | sizes (measured) | same |\n|---|---|---|---|---|\n";
    for (const auto& d : r.kinds)
        out << "| " << d.key << " | " << d.pred_count << " / " << d.meas_count << " | " << ds_size_string(static_cast<int64_t>(d.pred_bytes))
            << " | " << ds_size_string(static_cast<int64_t>(d.meas_bytes)) << " | " << (d.sizes_match ? "yes" : "no") << " |\n";
    out << "\n**verdict: " << (r.pass() ? "PASS" : "FAIL") << "**\n";
}

void write_op_kinds_json(std::ostream& out, const OpKindReport& r) {
    nlohmann::json j;
    j["format"] = "zerosim-validate-op-kinds";
    j["predicted"] = r.pred_name;
    j["measured"] = r.meas_name;
    j["measured_source"] = r.meas_source == OpKindSource::SummaryTable ? "log_summary" : "op_lines";
    j["kinds"] = nlohmann::json::array();
    for (const auto& d : r.kinds)
        j["kinds"].push_back({{"key", d.key}, {"pred_count", d.pred_count}, {"meas_count", d.meas_count},
                              {"pred_bytes", d.pred_bytes}, {"meas_bytes", d.meas_bytes}, {"pred_ms", d.pred_ms},
                              {"meas_ms", d.meas_ms}, {"timed", d.timed}, {"sizes_match", d.sizes_match}});
    j["matching"] = r.matching;
    j["differing"] = r.differing;
    j["median_time_error"] = r.median_time_error;
    j["pass"] = r.pass();
    out << j.dump(1) << "\n";
}

void write_op_kinds_row(std::ostream& out, const OpKindReport& r) {
    out << r.matching << '\t' << r.differing << '\t' << r.timed_kinds << '\t' << percent_text(r.median_time_error) << '\t'
        << (r.pass() ? "PASS" : "FAIL") << '\n';
}

}  // namespace zerosim
