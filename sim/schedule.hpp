// The ZeRO schedule generator: (model, DeepSpeed config, world size, steps) -> schedule IR.
// Rules live in schedule_stage012.cpp (stages 0, 1, 2 and the bf16 optimizer) and
// schedule_stage3.cpp (stage 3); each emitted op names its rule (ir.cpp lists them).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/ds_config.hpp"
#include "sim/error.hpp"
#include "sim/ir.hpp"
#include "sim/model.hpp"

namespace zerosim {

struct ScheduleOptions {
    int64_t world = 1;
    int steps = 1;
    int64_t seq_len = 0;                // 0: the model's default, else 1024
    std::vector<int> overflow_steps;    // fp16: optimizer steps (0-based) whose gradients overflow
};

Result<Schedule> build_schedule(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt);

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

    Op& collective(OpKind kind, int64_t elements, DType dtype, const char* caller, const char* rule,
                   Stream stream = Stream::Comm);
    Op& forward(int module);
    Op& backward(int module);
    Op& optimizer_step(int group, int64_t elements);
    bool is_boundary() const { return micro == batch.grad_accum - 1; }
    bool overflows(int s) const;
    // Parameters in the order their gradients become ready in backward: reverse of forward
    // order by first use, reverse registration order within a module.
    std::vector<int> grad_ready_order() const;
    // Modules of the backward pass in execution order, with the parameters whose gradients become
    // ready right after each one.
    std::vector<std::pair<int, std::vector<int>>> backward_plan() const;
};

void engine_start_broadcasts(Build& b);
void generate_stage012(Build& b);
void generate_stage3(Build& b);

}  // namespace detail
}  // namespace zerosim
