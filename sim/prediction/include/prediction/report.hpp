// `zerosim report`: one self-contained HTML file (inline CSS and SVG, no scripts from the network)
// with the step summary, a timeline of the last step, the per-op table, memory per rank, the
// explanation, and, given a measured log, predicted against measured per op.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "timing/engine.hpp"
#include "schedule/ir.hpp"
#include "analysis/fit.hpp"
#include "analysis/memory.hpp"
#include "formats/comms_log.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct ReportInput {
    const Schedule& schedule;
    const Topology& topology;
    const Prediction& logged;
    const Prediction& overlapped;
    const MemoryEstimate& memory;
    const std::string& explanation;
    const std::vector<LoggedOp>* measured = nullptr;   // a measured comms_logger log, if given
    std::string measured_name;
    std::string diff_text;   // the validator's report on predicted against measured, if given
    const FitEstimate* fit = nullptr;   // model states + activations + reserve against the GPU
    std::string activation_formula;
    std::string what_if_text;   // --what-if: the what-if beside the real schedule (prediction/what_if_compare.hpp)
};

void write_html_report(std::ostream& out, const ReportInput& in);

}  // namespace zerosim
