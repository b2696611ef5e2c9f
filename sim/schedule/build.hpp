// The schedule generator's internals, private to sim/schedule: the state one generation run shares
// between schedule.cpp and the stage files.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {
namespace detail {

// Shared state of one generation run; the stage files append to `out`.
struct Build {
    const Model& model;
    const DsConfig& cfg;
    const ScheduleOptions& opt;
    BatchPlan batch;
    int64_t seq_len = 0;
    Schedule out;
    int step = -1;
    int micro = -1;
    Phase phase = Phase::Init;
    std::optional<Error> failure;   // a refusal DeepSpeed raises mid-run (qwZ's assertion): the first one

    // The op takes rule_info(rule).payload: every op of a rule has its rule's payload.
    Op& collective(OpKind kind, int64_t elements, DType dtype, const char* caller, RuleId rule,
                   Stream stream = Stream::Comm);
    Op& forward(int module);
    Op& backward(int module);
    Op& optimizer_step(int group, int64_t elements);
    bool is_boundary() const { return micro == batch.grad_accum - 1; }
    bool overflows(int s) const;
    // A module's parameters in the order their gradients become ready within its backward
    // (backward_plan explains: bias before weight for a Linear, weight before bias for a LayerNorm).
    std::vector<int> autograd_order(int module) const;
    // Modules of the backward pass in execution order, with the parameters whose gradients become
    // ready right after each one.
    std::vector<std::pair<int, std::vector<int>>> backward_plan() const;
};

void engine_start_broadcasts(Build& b);
void generate_stage012(Build& b);
void generate_stage3(Build& b);

}  // namespace detail
}  // namespace zerosim
