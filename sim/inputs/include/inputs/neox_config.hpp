// GPT-NeoX's own configuration: one or more YAML files holding the model's shape, the parallel layout
// and DeepSpeed's keys (EleutherAI/gpt-neox megatron/neox_arguments), read as GPT-NeoX reads them and
// turned into what zerosim takes: the model as GPT-NeoX's GPT2ModelPipe builds it (a pipeline layer
// list over Megatron tensor-parallel layers), the DeepSpeed config GPT-NeoX hands deepspeed.initialize,
// and the layout (pipe-parallel-size, model-parallel-size). docs/neox.md says what is read and how.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_input.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "inputs/release.hpp"

namespace zerosim {

struct NeoxInputs {
    Model model;
    DsConfig ds_config;
    Json ds_config_doc;      // the DeepSpeed config as GPT-NeoX builds it (NeoXArgs.deepspeed_config)
    Json model_doc;          // the model as a zerosim parameter list (what a saved schedule carries)
    int64_t pipe = 0;        // pipe-parallel-size: 0 = a plain module, >= 1 = DeepSpeed's pipeline engine
    int64_t tensor = 1;      // model-parallel-size
    std::string partition_method = "type:transformer|mlp";   // pipe-partition-method
    std::vector<std::string> warnings;   // what the schedule leaves out, one line each
};

// Reads the files in order, merged as NeoXArgs.from_ymls merges them ('-' and '_' alike in keys, a
// key repeated in a later file refused). `vocab_size` is the tokenizer's size (the YAML names only the
// tokenizer file); it is padded as GPT-NeoX pads it. Errors name the file and the key.
Result<NeoxInputs> load_neox_config(const std::vector<std::string>& paths, int64_t vocab_size, Release release);

// The same from texts in memory (tests, fuzzing): names[i] stands for the file of texts[i].
Result<NeoxInputs> parse_neox_config(const std::vector<std::string>& names, const std::vector<std::string>& texts,
                                     int64_t vocab_size, Release release);

}  // namespace zerosim
