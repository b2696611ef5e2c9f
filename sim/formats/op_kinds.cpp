#include "formats/op_kinds.hpp"

#include "formats/comms_log.hpp"

namespace zerosim {

namespace {

// deepspeed/comm/comm.py log_summary: the barrier it runs itself is logged under this name; it is
// not the training run's.
bool is_log_summary_barrier(const std::string& key) { return key.rfind("log_summary_barrier", 0) == 0; }

OpKindTotals& kind_of(OpKinds& k, std::map<std::string, size_t>& index, const std::string& key) {
    auto it = index.find(key);
    if (it != index.end()) return k.kinds[it->second];
    index[key] = k.kinds.size();
    k.kinds.push_back(OpKindTotals{key, {}, 0, 0, 0, false});
    return k.kinds.back();
}

}  // namespace

OpKinds op_kinds_from_ops(const std::vector<LoggedOp>& ops) {
    OpKinds k;
    k.source = OpKindSource::OpLines;
    std::map<std::string, size_t> index;
    for (const auto& op : ops) {
        std::string key = op.record_key();
        if (is_log_summary_barrier(key)) continue;
        OpKindTotals& t = kind_of(k, index, key);
        // The size as the table would print it: the line's own text, else the writer's.
        std::string size = op.size_text.empty() ? ds_size_string(op.bytes) : op.size_text;
        t.sizes[size] += 1;
        t.count += 1;
        t.bytes += parse_ds_size_string(size).value_or(static_cast<double>(op.bytes));
        t.time_ms += op.time_ms;
        t.timed = t.timed || op.time_ms > 0;
    }
    return k;
}

OpKinds op_kinds_from_summary(const std::vector<SummaryRow>& rows) {
    OpKinds k;
    k.source = OpKindSource::SummaryTable;
    std::map<std::string, size_t> index;
    for (const auto& r : rows) {
        if (is_log_summary_barrier(r.record_key)) continue;
        OpKindTotals& t = kind_of(k, index, r.record_key);
        t.sizes[r.size_text] += r.count;
        t.count += r.count;
        t.bytes += parse_ds_size_string(r.size_text).value_or(0.0) * static_cast<double>(r.count);
        t.time_ms += r.total_ms;
        t.timed = t.timed || r.total_ms > 0;
    }
    return k;
}

OpKinds op_kinds_of(const MeasuredLog& log) {
    return log.ops.empty() && !log.summary.empty() ? op_kinds_from_summary(log.summary) : op_kinds_from_ops(log.ops);
}

}  // namespace zerosim
