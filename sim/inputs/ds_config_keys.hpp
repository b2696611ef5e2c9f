// Which keys a DeepSpeed config may hold at each release from v0.14.2 to v0.19.5, and how zerosim
// treats each: DeepSpeed's own strictness inside zero_optimization (and, from v0.17.1, bf16), its
// leniency at the top level, and the features zerosim does not model yet (refused or warned by
// name, never silently ignored). A key written for a later release than the one reading the
// config is named with the release that brings it.
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
bool offload_enabled(const JsonField& zero, const char* key, Release release);

// Top-level keys: unknown ones go to c.ignored_keys with the closest DeepSpeed key, if one is close;
// pipeline, tensor, expert and sequence parallelism add one warning to c.warnings.
void note_top_level_keys(const JsonField& root, DsConfig& c);

// "optimizer": a type DeepSpeed can build (runtime/config.py DEEPSPEED_OPTIMIZERS of the release,
// any case, or a torch.optim class, engine.py _is_supported_optimizer), else an error naming it;
// the 1-bit optimizers (OneBitAdam, OneBitLamb, ZeroOneAdam) are refused by name: their
// compressed all_reduce is not modelled.
void check_optimizer_section(const JsonField& root, const DsConfig& c);
// "comms_logger": DeepSpeed's CommsLoggerConfig (comm/config.py, pydantic with extra = 'forbid'):
// only its five keys, the flags booleans as pydantic v1 reads them, prof_ops a list.
void check_comms_logger_section(const JsonField& root);

// A key some release after v0.14.2 added: where it lives ("" top level, else the section), its
// name, the first release that reads it and the pull request that added it.
struct LaterKey {
    const char* section;
    const char* key;
    Release since;
    const char* pr;
};
const std::vector<LaterKey>& later_keys();
// The entry for section.key, or nullptr for a key every release since v0.14.2 has (or none has).
const LaterKey* later_key(const std::string& section, const std::string& key);

// The keys of the releases after v0.14.2 (ds_config_release_keys.cpp), once the zero section is
// read: bf16.check_grad_overflow and the bf16 section's strictness from v0.17.1, log_level,
// and the stage-3 and precision keys that change the collectives in ways zerosim does not model
// yet (refused by name).
void read_release_keys(const JsonField& root, DsConfig& c);

}  // namespace zerosim
