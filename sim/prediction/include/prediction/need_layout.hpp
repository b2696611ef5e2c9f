// `zerosim need --solve layout`: the 3D layout (pipeline stages x tensor x sequence x expert ranks
// on the node design's world) with the shortest predicted step among those that fit the GPU. Not a
// bisection: every candidate that DeepSpeed can run is predicted as `sweep --pp/--tp` predicts it
// (prediction/sweep.hpp predict_layout_point) and the table shows them all, fastest first.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "core/error.hpp"
#include "prediction/need.hpp"
#include "prediction/sweep.hpp"

namespace zerosim {

struct LayoutCandidates {
    std::vector<int64_t> pp{1, 2, 4, 8}, tp{1, 2, 4, 8}, sp{1}, ep{1};
    bool activation_checkpointing = false;
};

struct LayoutAnswer {
    std::vector<SweepResult> tried;   // every candidate that could run, fastest first (errors last)
    std::vector<std::string> left_out;  // candidates DeepSpeed cannot run, each with why
    int best = -1;                    // index into `tried` of the fastest that fits; -1: none fits
};

// The candidates on the problem's world (its topology's nodes, or p.nodes): each divisor layout
// predicted; an error when not one can run.
Result<LayoutAnswer> solve_layout(const NeedProblem& p, const LayoutCandidates& c);
void write_layout_answer(std::ostream& out, const NeedProblem& p, const LayoutAnswer& a);

}  // namespace zerosim
