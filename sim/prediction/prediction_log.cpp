#include "prediction/prediction_log.hpp"

#include <sstream>

#include "formats/schedule_outputs.hpp"

namespace zerosim {

MeasuredLog prediction_as_log(const Schedule& s, const Prediction& logged) {
    std::vector<OpLogTime> times(s.ops.size());
    for (size_t i = 0; i < s.ops.size(); ++i) times[i] = {logged.ops[i].duration() * 1e3, logged.ops[i].end_s};
    MeasuredLog log;
    log.path = "prediction";
    log.ops = logged_ops(s, times);
    return log;
}

Result<std::vector<LoggedOp>> comms_logger_ops(const std::string& text, const std::string& path) {
    std::vector<LoggedOp> ops;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (auto parsed = parse_ds_verbose_line(line)) ops.push_back(parsed->op);
    if (ops.empty() && text.find("Comm. Op") != std::string::npos)
        // DeepSpeed v0.17.6+ at its default logger level (#7526): the table, no per-op lines.
        return Error{path, "--measured",
                     "holds only log_summary()'s table, no per-op lines (DeepSpeed 0.17.6+ at its default logger level): "
                     "compare it per op kind with zerosim validate, or rerun with the logger at INFO"};
    if (ops.empty()) return Error{path, "--measured", "no DeepSpeed comms_logger lines ('comm op: ...') found"};
    return ops;
}

}  // namespace zerosim
