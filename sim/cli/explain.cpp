// zerosim explain: why each collective is there, what the config keys do, the paper's volume against DeepSpeed's.
#include "analysis/explain.hpp"
#include "command.hpp"

namespace zerosim::cli {

Command add_explain(CLI::App& app) {
    auto a = std::make_shared<ScheduleArgs>();
    a->per_rank = true;
    auto* sub = app.add_subcommand("explain", "Why each collective is there, what the config keys do, paper volume vs DeepSpeed");
    add_schedule_inputs(sub, *a, true);
    add_schedule_limits(sub, *a);
    // What changes the schedule it explains: zero.Init's start and the recompute's fetches in backward.
    add_zero_init(sub, *a);
    add_activation_checkpointing(sub, a->activation_checkpointing);
    add_saved_schedule(sub, *a);
    return {sub, [a, sub] {
                auto in = load_schedule_inputs(sub, *a, true);
                if (!in) return input_error(in.error());
                std::string text = explain_schedule(in->model, in->cfg, in->schedule);
                return emit(a->output, schedule_input_files(*a), [&](std::ostream& out) { out << text; });
            }};
}

}  // namespace zerosim::cli
