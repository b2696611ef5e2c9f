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
    // A pipeline: one rank of each stage and its timing, simulated together (null otherwise).
    const std::vector<const Schedule*>* stages = nullptr;
    const std::vector<const Prediction*>* stage_timings = nullptr;
};

void write_html_report(std::ostream& out, const ReportInput& in);
// A 3D layout's sections (report_layout.cpp): the pipeline's step per stage, and each dimension's
// bytes per link class; each writes nothing for a layout it does not apply to.
void report_pipeline_html(std::ostream& out, const ReportInput& in);
void report_dimension_bytes_html(std::ostream& out, const ReportInput& in);

}  // namespace zerosim
