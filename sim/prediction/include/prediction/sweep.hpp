// `zerosim sweep`: a grid of predictions over topologies, node counts, ZeRO stages and any
// DeepSpeed config keys, run in parallel worker processes (SimGrid keeps one engine per process),
// written as CSV and plotted as SVG.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <map>

#include "core/error.hpp"
#include "core/json_input.hpp"
#include "inputs/model.hpp"
#include "inputs/release.hpp"
#include "timing/topology.hpp"
#include "prediction/sweep_network.hpp"

namespace zerosim {

struct SweepSetting {
    std::string key;                  // dotted path in the DeepSpeed config
    std::vector<std::string> values;  // as written on the command line
};

struct SweepSpec {
    std::string model;
    std::string ds_config;            // optional: DeepSpeed's defaults with micro batch 1 otherwise
    Release release = kBaselineRelease;   // the DeepSpeed release reading the config (--deepspeed)
    std::vector<std::string> topologies;
    std::vector<int> stages;
    std::vector<int64_t> nodes;
    std::vector<SweepSetting> settings;
    int steps = 2;
    int64_t seq_len = 0;
    int jobs = 1;
    int shard = 0, shards = 1;
    bool zero_init = false;           // stage-3 points: the model built under deepspeed.zero.Init
    bool activation_checkpointing = false;   // --activation-checkpointing (analysis/fit.hpp)
    std::string what_if;              // --what-if NAME (schedule/what_if.hpp): stage 1/2 points only
    SweepFabric fabric;               // --fabric (prediction/sweep_network.hpp)
    // --pp, --tp, --sp, --ep: the layouts (each combination that divides a point's world).
    std::vector<int64_t> pp{1}, tp{1}, sp{1}, ep{1};
    // --neox-config FILE.yml ... (with --vocab-size): GPT-NeoX's configs in place of --model and
    // --ds-config (docs/neox.md); their layout is the sweep's --pp and --tp unless those are given.
    std::vector<std::string> neox_config;
    int64_t vocab_size = 0;
    // A GPT-NeoX config's pipeline: DeepSpeed's pipeline engine even at one stage, its stages cut by
    // pipe-partition-method ("parameters", "uniform" or "type:REGEX").
    bool pipe_engine = false;
    std::string pp_partition = "parameters";
    // The config's name in messages: the DeepSpeed config, the first GPT-NeoX file, or DeepSpeed's defaults.
    std::string config_source() const {
        return !neox_config.empty() ? neox_config.front() : ds_config.empty() ? "(DeepSpeed defaults)" : ds_config;
    }
    bool has_layouts() const { return pp != std::vector<int64_t>{1} || tp != std::vector<int64_t>{1} ||
                                      sp != std::vector<int64_t>{1} || ep != std::vector<int64_t>{1}; }
};

struct SweepPoint {
    size_t index = 0;
    std::string topology;
    int64_t nodes = 1;
    int stage = 0;
    std::vector<std::string> values;  // one per setting
    int64_t pp = 1, tp = 1, sp = 1, ep = 1;   // the point's 3D layout
    bool is_3d() const { return pp > 1 || tp > 1 || sp > 1 || ep > 1; }
};

struct SweepResult {
    SweepPoint point;
    int64_t world = 0;
    double step_ms = 0, compute_ms = 0, comm_ms = 0, exposed_ms = 0;
    double bubble_ms = 0;             // a pipeline: its most idle stage's wait for the others (prediction/stage_time.hpp)
    // A 3D layout: the bytes stage 0's rank sends (or logs) per step in each dimension (pipe, tensor,
    // sequence, expert, zero: prediction/stage_time.hpp Dimension).
    int64_t dimension_bytes[5] = {};
    double wire_bytes = 0;            // per rank, last step
    int64_t memory_bytes = 0;         // model states per rank
    int64_t activation_bytes = 0;     // one micro batch's activations per rank (analysis/fit.hpp)
    int64_t gpu_memory_bytes = 0;     // the topology's gpu.memory_gb; 0 when it does not say
    std::string fits;                 // yes, no or unknown: states + activations + reserve against the GPU
    std::string error;                // non-empty when the point could not be predicted
};

// Parses "key=v1,v2", checking the key against the DeepSpeed keys zerosim reads (the closest is
// suggested for a typo).
Result<SweepSetting> parse_sweep_setting(const std::string& text);
// The grid as the command line gives it: --topology (repeated or comma-separated), --stages,
// --nodes, --set and --shard i/k, checked and added to `spec`.
struct SweepFlags {
    std::vector<std::string> topologies;
    std::string stages = "0,1,2,3";
    std::string nodes = "1";
    std::vector<std::string> sets;
    std::string shard;
    std::string pp = "1", tp = "1", sp = "1", ep = "1";   // comma lists of layout sizes
};
Status apply_sweep_flags(const SweepFlags& flags, SweepSpec& spec);
// A progress line on `out` after each point: redrawn in place on a terminal; otherwise every 10%
// and at least every kSweepProgressS seconds (a 10^6-point grid's first 10% can take a minute).
constexpr double kSweepProgressS = 5.0;
std::function<void(size_t, size_t)> sweep_progress(std::FILE* out, bool tty);
// Every point of the grid, in a fixed order; a shard takes a contiguous block of it.
std::vector<SweepPoint> sweep_points(const SweepSpec& spec);
std::vector<SweepPoint> shard_points(const std::vector<SweepPoint>& all, int shard, int shards);
// The files a sweep reads, read once before the workers start.
struct SweepInputs {
    Model model;
    Json ds_config = Json::object();           // the user's config, or {} for DeepSpeed's defaults
    // From --neox-config: pipe-parallel-size (-1: no GPT-NeoX config), model-parallel-size and
    // pipe-partition-method, for the front end to make the sweep's layout.
    int64_t neox_pipe = -1, neox_tensor = 1;
    std::string neox_partition;
    std::map<std::string, Topology> topologies;  // by path, as the file says (nodes set per point)
};
Result<SweepInputs> load_sweep_inputs(const SweepSpec& spec);
// Every --set value read into the config before any point runs: a value the config reader refuses
// at each of the grid's stages is an error "--set KEY=VALUE: ..." now, not a failed row per point.
Status check_sweep_values(const SweepSpec& spec, const SweepInputs& in);
// Predicts the points with `jobs` worker processes; `progress(done, total)` after each result. An
// error for an empty grid is bad input; any other (a worker that could not start, was stopped or
// died: the others are ended then) is a runtime fault (README "Exit codes": 3).
Result<std::vector<SweepResult>> run_sweep(const SweepSpec& spec, const SweepInputs& inputs, const std::vector<SweepPoint>& points,
                                           const std::function<void(size_t, size_t)>& progress);
// The points whose layout DeepSpeed can run: pp x tp x sp dividing the point's world, ep the data
// ranks, a pipeline at ZeRO stage 0 or 1 (engine.py asserts it; `pipe_engine`: every point runs the
// pipeline engine, a GPT-NeoX config's). `dropped` counts the others by reason.
std::vector<SweepPoint> runnable_layouts(const std::vector<SweepPoint>& points, const SweepInputs& in,
                                         std::map<std::string, size_t>& dropped, bool pipe_engine = false);
// One point in this process (what each worker runs).
SweepResult predict_point(const SweepSpec& spec, const SweepInputs& in, const SweepPoint& p);
// A point of a 3D layout (sweep_layout.cpp): the pipeline's stages simulated together.
struct DsConfig;
void predict_layout_point(const SweepSpec& spec, const Model& model, const DsConfig& cfg, const Topology& topo,
                          const SweepPoint& p, SweepResult& r);

void write_sweep_csv(std::ostream& out, const SweepSpec& spec, const std::vector<SweepResult>& rows, bool header);
void write_sweep_svg(std::ostream& out, const SweepSpec& spec, const std::vector<SweepResult>& rows);

}  // namespace zerosim
