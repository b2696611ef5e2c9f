// A prediction set beside a measured comms_logger log, as `zerosim report` shows them: the
// prediction in the validator's log form, and the measured log's op lines for the chart.
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"
#include "formats/comms_log.hpp"
#include "formats/measured_logs.hpp"
#include "schedule/ir.hpp"
#include "timing/engine.hpp"

namespace zerosim {

// One LoggedOp per collective of `s`, in order, timed as the comms logger times it (`logged`: the
// synchronised prediction), its line the op's index, its phase the op's step/micro-step/pass; the
// log is named "prediction".
MeasuredLog prediction_as_log(const Schedule& s, const Prediction& logged);

// The "comm op: ..." lines of a measured comms_logger log (`text`, read from `path`); a log with
// none is an error naming --measured.
Result<std::vector<LoggedOp>> comms_logger_ops(const std::string& text, const std::string& path);

}  // namespace zerosim
