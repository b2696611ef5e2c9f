// The schedule IR as JSON (docs/schedule-ir.md "The JSON form"): the one writer (`zerosim schedule
// --format json`) and the one reader, used by `zerosim predict/report/explain --schedule` and by
// `zerorun --schedule` alike. The file holds the whole in-memory IR (meta, parameters, ops, stage
// 3's host events) and, where the writer is given them, the documents the schedule was built from.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/error.hpp"
#include "core/json_input.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "schedule/ir.hpp"
#include "schedule/stream.hpp"

namespace zerosim {

// The documents a schedule was built from, as their files held them, carried in the JSON's
// "inputs": what a prediction needs beside the IR (the memory model reads the config's buckets and
// offload, the activations the model's shapes, explain the config keys' values).
struct ScheduleSources {
    Json ds_config;   // the DeepSpeed config of meta.ds_config_file
    Json model;       // the model file of meta.model_file: a parameter list or a Hugging Face config.json
};

// What a schedule JSON file holds: the IR, and its sources where the file carries them.
struct SavedSchedule {
    Schedule schedule;
    std::optional<ScheduleSources> sources;
};

// Version 2 of the format; `sources` (may be null) becomes the file's "inputs".
void write_schedule_json(std::ostream& out, const Schedule& s, const ScheduleSources* sources = nullptr);
// The same, op by op from a stream (schedule/stream.hpp): the same bytes, in bounded memory.
void write_schedule_json(std::ostream& out, const ScheduleStream& s, const ScheduleSources* sources = nullptr);

// The one reader: every field, with errors naming the file, the field and what was expected; the
// IR then passes check_schedule. Version 1 files (with "dialect" for the release) are read too.
Result<SavedSchedule> read_saved_schedule(const std::string& path);
// The same from text; `name` stands for the file in messages (the fuzz target's entry point).
Result<SavedSchedule> parse_saved_schedule(const std::string& text, const std::string& name);
// The IR alone, through the same reader (zerorun).
Result<Schedule> read_schedule_json(const std::string& path);
Result<Schedule> parse_schedule_json(const std::string& text, const std::string& name);

// The config, the model and the schedule of a saved schedule, as predict, report and explain use
// them: the sources read as DeepSpeed meta.release reads the config, checked against the IR (the
// stage, the parameters). A file without "inputs" is refused, saying how to save one with them.
struct ScheduleInputs {
    DsConfig cfg;
    Model model;
    Schedule schedule;
};
Result<ScheduleInputs> saved_schedule_inputs(SavedSchedule saved, const std::string& path);

}  // namespace zerosim
