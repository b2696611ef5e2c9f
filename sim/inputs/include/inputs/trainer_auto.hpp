// A DeepSpeed config written for the Hugging Face Trainer, its "auto" values filled as the Trainer
// fills them before it calls deepspeed.initialize (transformers/integrations/deepspeed.py,
// HfTrainerDeepSpeedConfig: trainer_config_process from TrainingArguments, trainer_config_finalize
// from the model's config.hidden_size). The Trainer's arguments come as zerosim flags of the same
// names (add_trainer_flags in sim/cli); what no flag and no rule fills is one error that lists every
// "auto" left and the flag for each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_input.hpp"

namespace zerosim {

// The TrainingArguments that fill a config's "auto" values; unset: not given.
struct TrainerArgs {
    std::optional<int64_t> per_device_train_batch_size, gradient_accumulation_steps;
    bool fp16 = false, bf16 = false;   // --fp16 / --bf16 (the Trainer's defaults: neither, fp32 training)
    std::optional<double> learning_rate, max_grad_norm, weight_decay, adam_beta1, adam_beta2, adam_epsilon;
    std::optional<int64_t> warmup_steps, max_steps;
    bool any_given() const;
};

// Whether `doc` holds the string "auto" anywhere.
bool has_auto_value(const Json& doc);

// Every "auto" of `doc` (the config `file` as DeepSpeed's loader reads it) replaced as the Trainer
// replaces it: from `t`, from the Trainer's own defaults where it has one that does not shape the
// schedule (each such fill named in `notes`), and from the model's hidden size (0: the model gives
// none). A value the user wrote that disagrees with a flag given is the Trainer's mismatch error.
Status fill_trainer_auto(Json& doc, const std::string& file, const TrainerArgs& t, int64_t hidden_size,
                         std::vector<std::string>& notes);

// The config file's document as the Trainer hands it to DeepSpeed: read as DeepSpeed reads it
// (inputs/ds_config.hpp read_ds_config_document), then filled as above where it holds an "auto" or
// a Trainer flag was given; as written otherwise.
Result<Json> read_trainer_ds_config_document(const std::string& path, const TrainerArgs& t, int64_t hidden_size,
                                             std::vector<std::string>& notes);

}  // namespace zerosim
