// The comm-op lines of a real DeepSpeed comms_logger log from ../shared/reference, each with the
// training script's "##### PHASE name #####" marker in force; lines after log_summary are left out.
// One reader for every test that compares a schedule with a real run op for op.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "formats/comms_log.hpp"

namespace zerosim::test {

struct RealOp {
    std::string key;      // "all_reduce | [Caller Func: allreduce_bucket]"
    std::string size;     // as printed
    std::string phase;    // the training script's marker: initialize, stepK.microM.forward, ...
};

inline std::vector<RealOp> real_ops(const std::string& log) {
    std::vector<RealOp> ops;
    std::istringstream in(log);
    std::string line, phase = "?";
    while (std::getline(in, line)) {
        if (line.rfind("##### PHASE ", 0) == 0) {
            phase = line.substr(12, line.find(" #####", 12) - 12);
            continue;
        }
        if (phase == "log_summary" || phase == "done") continue;
        auto parsed = parse_ds_verbose_line(line);
        if (!parsed) continue;
        ops.push_back({parsed->op.record_key(), parsed->op.size_text, phase});
    }
    return ops;
}

}  // namespace zerosim::test
