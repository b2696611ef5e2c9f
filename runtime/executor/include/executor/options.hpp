// How one rank executes a schedule: typed options, filled by a front end (zerorun's run command
// turns its flags into these) and checked here, so the executor never parses strings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "executor/mlp.hpp"
#include "executor/moe_mlp.hpp"
#include "executor/tensor_mlp.hpp"
#include "executor/ulysses_mlp.hpp"

namespace zerorun {

// What the logs report as an op's time: rank 0's own call, as DeepSpeed's comms logger does (it
// includes waiting for ranks that arrive late), or the shortest call over ranks (the rank that
// arrived last waited for nobody, so its time is the collective's own). The JSON log keeps every
// rank's call either way.
enum class OpTime { Rank, SkewFree };
const char* op_time_name(OpTime t);   // "rank", "skew-free"
std::optional<OpTime> op_time_from_name(const std::string& name);

// Test hooks: one rank fails on purpose before one op, for the fault tests.
struct TestHooks {
    enum class Mode {
        Exit,    // the process exits (a dead rank)
        Hang,    // it stops making progress, its own watchdog off (a hung rank)
        Delay,   // it arrives 400 ms late, then goes on (a slow rank, not a failed one)
        Corrupt, // it puts one wrong element into the op's message or contribution (model data, issue
                 // 29), then goes on: the receivers' checks must count it
    };
    int fail_rank = -1;        // -1: nobody fails
    int64_t fail_op = -1;
    Mode fail_mode = Mode::Exit;
};
const char* test_fail_mode_name(TestHooks::Mode m);   // "exit", "hang", "delay", "corrupt"
std::optional<TestHooks::Mode> test_fail_mode_from_name(const std::string& name);

struct ExecOptions {
    double compute_scale = 1.0;   // fraction of each compute segment's FLOPs run as real GEMMs
    bool sync_each_op = false;    // every op finishes before the next starts, ranks fenced before each call
    OpTime op_time = OpTime::Rank;
    double timeout_s = 60.0;      // seconds without progress before every rank is stopped; 0: never
    float lr = 1e-3f;             // Adam learning rate
    uint64_t seed = 1;            // initial weights and loss targets
    bool verify = true;           // check every collective's result against an independent computation
    // With sync_each_op: bytes each rank writes over before each collective prepares its buffers
    // (backends/host_cache.hpp), so the op finds the host caches as a training step's compute
    // leaves them, as the bench rounds' calls do (--bench-evict with --bench-fresh-buffers); 0: off.
    int64_t evict_before_op = 0;
    std::string dump_weights;     // non-empty: each rank writes its fp32 master partition (dump_path)
    // With sync_each_op: called on every rank before each training step's first op (the step
    // number), outside any op, e.g. to measure the collectives between steps (zerorun
    // --bench-between-steps). Its time is no op's.
    std::function<void(int)> between_steps;
    // A pipeline run's real MLP (executor/mlp.hpp, built by the front end from every stage's
    // program): forward and backward computed for real, activations and their gradients sent
    // between stages. Null: synthetic model data (model_data.cpp) and the synthetic loss.
    std::shared_ptr<const PipelineMlp> pipeline_mlp;
    // A tensor-parallel run's real model (executor/tensor_mlp.hpp, from the rank's own program):
    // the tensor-group all_reduces carry its real partial sums. Null: synthetic.
    std::shared_ptr<const TensorMlp> tensor_mlp;
    // An expert-parallel run's real model (executor/moe_mlp.hpp, from the rank's own program): real
    // tokens routed through the expert-group all_to_alls. Null: synthetic.
    std::shared_ptr<const MoeMlp> moe_mlp;
    // A Ulysses run's real model (executor/ulysses_mlp.hpp): real q, k, v through the sequence-group
    // all_to_alls. Null: synthetic.
    std::shared_ptr<const UlyssesMlp> ulysses_mlp;
    TestHooks test;
};

// The numbers out of range, named as zerorun's flags name them (field "--lr").
zerosim::Status check_exec_options(const ExecOptions& o);

}  // namespace zerorun
