// What zerosim's subcommands share (private to the front end): how a subcommand plugs into the app,
// the schedule-input flags and their loading, and the error line and the writer as zerosim says them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "core/error.hpp"
#include "core/json_input.hpp"
#include "core/output.hpp"
#include "inputs/neox_config.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "inputs/trainer_auto.hpp"
#include "prediction/what_if_compare.hpp"
#include "schedule/bounds.hpp"
#include "schedule/ir.hpp"
#include "schedule/stream.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"
#include "prediction/sweep_network.hpp"
#include "timing/topology.hpp"

namespace zerosim::cli {

// A subcommand registered on the app, and what runs it once the command line is parsed.
struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

Command add_schedule(CLI::App& app);
Command add_predict(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_memory(CLI::App& app);
Command add_explain(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_report(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_calibrate(CLI::App& app);
Command add_need(CLI::App& app);

// --fabric, --degrade, --straggler (fabric_flags.cpp): fabric mode (timing/fabric.hpp).
struct FabricArgs {
    bool on = false;
    std::vector<std::string> degrade, straggler;
};
void add_fabric_flags(CLI::App* sub, FabricArgs& a);
// The fabric model the flags and the topology's whatif block ask for; null without --fabric.
Result<std::shared_ptr<FabricModel>> fabric_model_for(const FabricArgs& a, const Topology& t, int64_t world);
// The sweep's fabric mode: the flags' what-ifs, checked for form (each point checks its targets).
Status fabric_sweep_options(const FabricArgs& a, SweepFabric& out);
// "zerosim: note: fabric mode: ..." on stderr: the flow simulations and their factors.
void note_fabric(const FabricModel& m);

// The flags every command that builds a schedule reads.
struct ScheduleArgs {
    std::string ds_config;
    std::string model;
    int64_t world = 0;
    int steps = 2;
    int64_t seq_len = 0;
    std::string format = "table";
    std::string output;
    std::string overflow_steps;
    bool log_summary = false;
    bool compute = false;
    bool zero_init = false;   // --zero-init: stage 3, the model built under deepspeed.zero.Init
    int64_t gpus_per_node = 0;   // --gpus-per-node (schedule); predict/report: the topology's
    int64_t max_ops = kDefaultMaxOps;
    std::string max_memory;   // a size (core/sizes.hpp); "" = kDefaultMaxScheduleBytes
    std::string deepspeed;    // --deepspeed VERSION; "" = the newest release the rules cover
    std::string nccl;         // --nccl (predict): "" = the topology's release
    bool activation_checkpointing = false;   // --activation-checkpointing (analysis/fit.hpp)
    std::string what_if;      // --what-if NAME (schedule/what_if.hpp): not DeepSpeed's schedule
    FabricArgs fabric;        // --fabric (predict): fabric mode
    std::string schedule;     // --schedule FILE (predict, report, explain): a saved schedule
    // --pp, --tp, --sp, --ep, --pp-partition, --rank: the 3D layout and the rank whose program to build.
    int64_t pp = 1, tp = 0, sp = 0, ep = 1;   // tp, sp 0: not given (the config's autotp_size / sequence_parallel_size, else 1)
    std::string pp_partition;   // "" = not given: parameters (a GPT-NeoX config: its pipe-partition-method)
    // --neox-config FILE.yml ... (with --vocab-size): GPT-NeoX's configs in place of --ds-config and --model.
    std::vector<std::string> neox_config;
    int64_t vocab_size = 0;
    int64_t rank = 0;
    bool per_rank = false;    // the subcommand takes a 3D layout (schedule, explain); others refuse it
    // predict's writers that take a long run by period (prediction/timed_stream.hpp): load_inputs
    // builds only its template where the schedule repeats (Inputs::stream).
    bool by_period = false;
    TrainerArgs trainer;   // the Hugging Face Trainer's flags that fill a config's "auto" values
};
// --pp, --tp, --sp, --ep, --pp-partition and --rank.
void add_layout_flags(CLI::App* sub, ScheduleArgs& a);
// The Hugging Face Trainer's arguments, by their own names (and dashed), that fill a config's
// "auto" values as the Trainer fills them (inputs/trainer_auto.hpp).
void add_trainer_flags(CLI::App* sub, TrainerArgs& t);
// --ds-config as the Trainer hands it to DeepSpeed (read_trainer_ds_config_document): its notes on
// stderr, then parsed; a config with no "auto" and no Trainer flag is read as before.
Result<DsConfig> load_trainer_ds_config(const std::string& path, Release release, const TrainerArgs& t, const Model& model);
// --ds-config and --model (with the Trainer's flags), or --neox-config FILE.yml ... with --vocab-size.
void add_model_and_config(CLI::App* sub, ScheduleArgs& a);
// The refusal of a subcommand that does not model a 3D layout yet (the flags' and the config's), or nullopt.
Status refuse_layout(const ParallelLayout& L);
Status refuse_layout(const ScheduleArgs& a, const DsConfig& cfg);
void add_schedule_inputs(CLI::App* sub, ScheduleArgs& a, bool world_required);
// --schedule FILE (predict, report, explain): the schedule a `zerosim schedule --format json` saved
// (formats/schedule_json.hpp), in place of --ds-config, --model and the flags that build one, which
// are then required only without it. Call after add_schedule_inputs and the other schedule flags.
void add_saved_schedule(CLI::App* sub, ScheduleArgs& a);
// --deepspeed VERSION: the DeepSpeed release whose schedule, keys and refusals apply.
void add_deepspeed_flag(CLI::App* sub, std::string& version);
// The release --deepspeed names; without the flag the newest the rules cover, said once on stderr
// ("zerosim: note: ..."), since the default is not the v0.14.2 the library keeps.
Result<Release> resolve_release(const std::string& version);
// --zero-init (schedule, predict, report): the model is built under deepspeed.zero.Init.
void add_zero_init(CLI::App* sub, ScheduleArgs& a);
// --activation-checkpointing (predict, memory, sweep, report): every layer checkpointed, as
// DeepSpeed's activation_checkpointing or Hugging Face Trainer's --gradient_checkpointing runs it.
void add_activation_checkpointing(CLI::App* sub, bool& flag);
// --what-if NAME (schedule, predict, report): the schedule changed as a proposal would change it.
void add_what_if(CLI::App* sub, std::string& name);
// --max-ops and --max-memory: the bounds on the schedule build_schedule refuses to pass (bounds.hpp).
void add_schedule_limits(CLI::App* sub, ScheduleArgs& a);

// Range checks CLI11 runs on a flag's text before converting it, in the one grammar of
// core/sizes.hpp: an integer in [min, max], a finite real at least (or above) min. A failure is
// one "zerosim: error: field 'FLAG': expected ..., found 'TEXT'" line, exit 2.
CLI::Validator integer_in(int64_t min, int64_t max = INT64_MAX);
CLI::Validator finite_at_least(double min, bool exclusive = false);
// The check on every output flag's text (core/output.hpp check_output_name): "" is refused.
CLI::Validator output_file();
// A CLI11 parse error as the one error line; returns 2 (0 for --help and --version).
int parse_error(CLI::App& app, const CLI::ParseError& e);

// What a command reads once: the config, the model, and the schedule built from them.
struct Inputs {
    DsConfig cfg;
    Model model;
    Schedule schedule;
    // From --neox-config: the DeepSpeed config and the parameter list zerosim built (a saved
    // schedule's "inputs"); null otherwise.
    Json neox_ds_config, neox_model;
    // ScheduleArgs::by_period and a long run that repeats, with no pipeline: the run as a stream,
    // `schedule` a copy of its template (its first kTemplateSteps steps); empty otherwise.
    std::optional<ScheduleStream> stream;
};
// Reads the config and the model and builds the schedule; prints warnings on the way.
Result<Inputs> load_inputs(const ScheduleArgs& a);
// The same schedule as a stream (schedule/stream.hpp), for the writers of `zerosim schedule`:
// a long run held as its first steps, written step by step.
struct StreamInputs {
    ScheduleStream schedule;
    Json neox_ds_config, neox_model;   // as Inputs has them
};
Result<StreamInputs> load_stream_inputs(const ScheduleArgs& a);
// --schedule's flags checked (`sub` says which were given: none that build a schedule beside it;
// --ds-config and --model, and --world where `world_required`, without it), then the saved
// schedule and its config and model, else load_inputs.
Result<Inputs> load_schedule_inputs(const CLI::App* sub, const ScheduleArgs& a, bool world_required);
// The files the inputs come from: the saved schedule, else the config and the model.
std::vector<std::string> schedule_input_files(const ScheduleArgs& a);
// Model states (analysis/memory.hpp) + activations + reserve of the inputs' schedule against the
// topology's GPU; the flag or the config's activation_checkpointing section turns checkpointing on.
FitEstimate fit_of(const Inputs& in, const Topology& t, bool activation_checkpointing);
// The config and the model: --model and --ds-config (a Trainer config's "auto" filled from a.trainer),
// or a GPT-NeoX config (a.neox_config, a.vocab_size), whose other keys (the layout) `neox` keeps.
Status load_config_and_model(const ScheduleArgs& a, Release release, std::optional<DsConfig>& cfg, std::optional<Model>& model,
                             std::optional<NeoxInputs>& neox);


// What predict and report compute: the topology (--nodes applied), the inputs on its world (--world,
// else every GPU), and the schedule timed both ways. `announce` prints the "simulating" line for
// runs long enough to want it.
struct Simulated {
    Topology topology;
    Inputs in;
    Prediction logged;      // synchronised after every op, as DeepSpeed's comms logger times
    Prediction overlapped;  // as the hardware overlaps the streams
    // --what-if: DeepSpeed's own schedule (before the what-if changed it) and its overlapped timing,
    // to set beside the what-if (prediction/what_if_compare.hpp); empty without --what-if.
    std::optional<Schedule> real;
    Prediction real_overlapped;
    // A pipeline (--pp above 1): one rank of each stage (in.schedule among them, at its stage),
    // simulated together in both timings; empty otherwise.
    std::vector<Schedule> stages;
    std::vector<Prediction> stages_logged, stages_overlapped;
    std::vector<const Schedule*> stage_list() const;
    std::vector<const Prediction*> stage_timings() const;
};
// --what-if NAME applied to the inputs' schedule, with its "NOT DeepSpeed's schedule" note on stderr.
Status apply_what_if_flag(const std::string& name, Schedule& s);
Result<Simulated> load_and_simulate(const CLI::App* sub, ScheduleArgs& a, const std::string& topology, int64_t nodes,
                                    bool announce);

// predict/report --what-if: the real schedule's figures beside the what-if's (sim.real is set).
WhatIfComparison compare_what_if(const std::string& name, const Simulated& sim, bool activation_checkpointing);

// --nccl RELEASE: the NCCL release whose tuner is predicted (timing/nccl_version.hpp), overriding
// the topology's "nccl.version"; "" keeps the topology's. An unknown release is an error naming
// the flag.
void add_nccl_flag(CLI::App* sub, std::string& nccl);
Status apply_nccl_flag(const std::string& nccl, Topology& t);

// "zerosim: error: ..." on stderr; returns 2.
int input_error(const Error& e);
// Writes to -o FILE (or standard output; `flag` names another output's flag) as zerosim writes every
// output (core/output.hpp write_output); returns the exit code.
int emit(const std::string& path, const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write,
         const std::string& flag = "-o");
// A command's outputs checked against its inputs and against each other before any work
// (core/output.hpp check_outputs): the optional ones only where their flag was given.
Status check_command_outputs(const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs);

}  // namespace zerosim::cli
