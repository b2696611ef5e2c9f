// Which keys a DeepSpeed v0.14.2 config may hold, and how zerosim treats each: DeepSpeed's own
// strictness inside zero_optimization, its leniency at the top level, and the features zerosim
// does not model yet (refused or warned by name, never silently ignored).
#pragma once

#include "core/json_input.hpp"
#include "inputs/ds_config.hpp"

namespace zerosim {

// Every key of zero_optimization: refuses what DeepSpeed refuses (an unknown key, with the closest
// known one; a deprecated key beside its replacement; legacy_stage1) and the ZeRO++ and MiCS
// features zerosim does not model yet. Sets the deprecated offload flags' effect on `c`.
void check_zero_keys(const JsonField& zero, DsConfig& c);

// Whether zero_optimization.<key> (offload_optimizer or offload_param) offloads: its device is
// "cpu" or "nvme". Its keys and device are checked as DeepSpeed checks them.
bool offload_enabled(const JsonField& zero, const char* key);

// Top-level keys: unknown ones go to c.ignored_keys with the closest DeepSpeed key, if one is close;
// pipeline, tensor, expert and sequence parallelism add one warning to c.warnings.
void note_top_level_keys(const JsonField& root, DsConfig& c);

}  // namespace zerosim
