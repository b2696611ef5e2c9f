// A saved schedule's config and model (formats/schedule_json.hpp): the documents of its "inputs"
// read as `zerosim schedule` read the files, under the names the schedule's meta gives them.
#include "formats/schedule_json.hpp"
#include "schedule/schedule.hpp"

namespace zerosim {

namespace {

// A field of an embedded document as a field of the schedule file.
std::string within(const std::string& document, const std::string& field) {
    return field.empty() ? document : document + "." + field;
}

// The sources must be the ones the IR was built from: the same ZeRO stage and the same parameters
// (a file whose ops were edited keeps its sources; one whose sources were swapped is refused).
Status check_sources_match(const ScheduleInputs& in, const std::string& path) {
    const ScheduleMeta& m = in.schedule.meta;
    if (in.cfg.zero.stage != m.stage)
        return Error{path, "inputs.ds_config.zero_optimization.stage",
                     "is " + std::to_string(in.cfg.zero.stage) + ", the schedule's meta.stage " + std::to_string(m.stage) +
                         ": the config is not the one the schedule was built from"};
    const auto& params = in.schedule.params;
    // A rank of a 3D layout (or of a model with MoE layers) holds its share of the model: compare
    // with the parameters the same rank's schedule holds when built from the sources.
    std::vector<ScheduleParam> held;
    if (m.layout.is_3d() || !in.model.parallel.moe.empty()) {
        ScheduleOptions o;
        o.world = m.layout.is_3d() ? m.layout.world : m.world;
        o.layout = m.layout;
        o.rank = m.rank;
        o.pp_partition = m.pipe_partition;
        auto rebuilt = build_schedule(in.model, in.cfg, o);
        if (!rebuilt) return Error{path, "inputs", rebuilt.error().message + " (rebuilding rank " + std::to_string(m.rank) + ")"};
        held = rebuilt->params;
    } else {
        for (const auto& p : in.model.params) held.push_back({p.name, p.shape, p.numel, p.group});
    }
    if (held.size() != params.size())
        return Error{path, "inputs.model",
                     "has " + std::to_string(held.size()) + " parameters, the schedule " +
                         std::to_string(params.size()) + ": the model is not the one the schedule was built from"};
    for (size_t i = 0; i < params.size(); ++i)
        if (held[i].name != params[i].name || held[i].numel != params[i].numel)
            return Error{path, "inputs.model",
                         "parameter " + std::to_string(i) + " is " + held[i].name + ", the schedule's " +
                             params[i].name + ": the model is not the one the schedule was built from"};
    return std::nullopt;
}

}  // namespace

Result<ScheduleInputs> saved_schedule_inputs(SavedSchedule saved, const std::string& path) {
    if (!saved.sources)
        return Error{path, "inputs",
                     "required field is missing: predict, report and explain read the DeepSpeed config and the model the "
                     "schedule was built from (memory, activations, explain); save the schedule with zerosim schedule "
                     "--format json, which writes them"};
    const ScheduleMeta& m = saved.schedule.meta;
    // Named as the files were, so that every message and output names them as predicting from them does.
    auto cfg = parse_ds_config(m.ds_config_file, saved.sources->ds_config.dump(), m.release);
    if (!cfg) return Error{path, within("inputs.ds_config", cfg.error().field), cfg.error().message};
    auto model = model_from_json_text(m.model_file, saved.sources->model.dump());
    if (!model) return Error{path, within("inputs.model", model.error().field), model.error().message};
    ScheduleInputs in{std::move(cfg).value(), std::move(model).value(), std::move(saved.schedule)};
    if (auto e = check_sources_match(in, path)) return *e;
    return in;
}

}  // namespace zerosim
