// The schedules the stream tests build whole and streamed (test_schedule_stream.cpp) and time
// whole and by period (test_timed_stream.cpp): every stage, the variants, a pipeline and a tensor
// layout on tiny models.
#pragma once

#include <string>
#include <vector>

#include "inputs/model.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"

namespace zerosim::stream_cases {

struct Case {
    std::string name;
    std::string model;    // under configs/models
    std::string config;   // DeepSpeed config JSON
    int64_t world = 4;
    int64_t pipe = 1, tensor = 1, rank = 0;
    bool zero_init = false;
    int64_t gpus_per_node = 0;
};

inline std::string zero(int stage, const std::string& more = "", const std::string& top = "") {
    return R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, )" + top +
           R"("zero_optimization": {"stage": )" + std::to_string(stage) + more + "}}";
}

inline std::vector<Case> cases() {
    const std::string bf16 = R"("bf16": {"enabled": true}, )", fp16 = R"("fp16": {"enabled": true}, )";
    return {
        {"stage0", "tiny-gpt.json", zero(0)},
        {"stage1-bf16", "tiny-gpt.json", zero(1, "", bf16)},
        {"stage1-fp16", "tiny-gpt.json", zero(1, "", fp16)},
        {"stage2", "tiny-gpt.json", zero(2, R"(, "reduce_bucket_size": 20000)")},
        {"stage2-no-overlap", "tiny-gpt.json", zero(2, R"(, "overlap_comm": false, "contiguous_gradients": false)")},
        {"stage3", "tiny-gpt.json", zero(3, R"(, "stage3_param_persistence_threshold": 100)")},
        {"stage3-bf16-prefetch", "gpt2-small.json", zero(3, R"(, "stage3_prefetch_bucket_size": 5000000)", bf16)},
        {"stage3-zero-init", "tiny-gpt.json", zero(3), 4, 1, 1, 0, true},
        {"stage3-hpz-qwz", "tiny-gpt.json", zero(3, R"(, "zero_hpz_partition_size": 2, "zero_quantized_weights": true)"), 4,
         1, 1, 0, false, 2},
        {"stage3-mics", "tiny-gpt.json", zero(3, R"(, "mics_shard_size": 2)"), 4},
        {"stage1-pipe", "reference-3d/pipe.json", zero(1), 4, 2, 1, 3},
        {"stage3-tensor", "reference-3d/tensor.json", zero(3), 4, 1, 2, 1},
    };
}

inline Result<Model> model_of(const Case& c) { return load_model(test::config("models/" + c.model)); }

inline ScheduleOptions options(const Case& c, int steps) {
    ScheduleOptions o;
    o.world = c.world;
    o.steps = steps;
    o.layout.pipe = c.pipe;
    o.layout.tensor = c.tensor;
    o.rank = c.rank;
    o.zero_init = c.zero_init;
    o.gpus_per_node = c.gpus_per_node;
    return o;
}

}  // namespace zerosim::stream_cases
