#include "prediction/prediction_log.hpp"

#include <sstream>

namespace zerosim {

MeasuredLog prediction_as_log(const Schedule& s, const Prediction& logged) {
    MeasuredLog log;
    log.path = "prediction";
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (!is_collective(op.kind)) continue;
        LogOp l;
        l.record = op_record_name(op.kind);
        l.caller = op.caller;
        l.bytes = static_cast<double>(op.bytes());
        l.size_text = ds_size_string(op.bytes());
        l.time_ms = logged.ops[i].duration() * 1e3;
        l.line = static_cast<int>(i);
        l.phase = phase_label(op, s.meta.grad_accum);
        log.ops.push_back(std::move(l));
    }
    return log;
}

Result<std::vector<LoggedOp>> comms_logger_ops(const std::string& text, const std::string& path) {
    std::vector<LoggedOp> ops;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (auto parsed = parse_ds_verbose_line(line)) ops.push_back(parsed->op);
    if (ops.empty()) return Error{path, "--measured", "no DeepSpeed comms_logger lines ('comm op: ...') found"};
    return ops;
}

}  // namespace zerosim
