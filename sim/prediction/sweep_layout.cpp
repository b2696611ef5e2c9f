// A sweep point of a 3D layout: rank 0's program and, under a pipeline, one rank of each stage
// simulated together (timing/engine.hpp simulate_ranks), so that the step, its bubble and the
// stage that holds the most memory come out of the same run `zerosim predict --pp` makes.
#include <algorithm>
#include <iterator>

#include "analysis/explain.hpp"
#include "analysis/fit.hpp"
#include "analysis/memory.hpp"
#include "analysis/memory_report.hpp"
#include "inputs/ds_config.hpp"
#include "prediction/stage_time.hpp"
#include "prediction/sweep.hpp"
#include "schedule/schedule.hpp"
#include "timing/engine.hpp"
#include "timing/fabric.hpp"

namespace zerosim {

namespace {

// The rank of each pipeline stage with rank 0's data, sequence and tensor index.
Result<std::vector<Schedule>> layout_stages(const Model& model, const DsConfig& cfg, const ScheduleOptions& o) {
    std::vector<Schedule> stages;
    const int64_t per_stage = o.world / o.layout.pipe;
    for (int64_t k = 0; k < o.layout.pipe; ++k) {
        ScheduleOptions ok = o;
        ok.rank = k * per_stage;
        auto s = build_schedule(model, cfg, ok);
        if (!s) return s.error();
        stages.push_back(std::move(s).value());
    }
    return stages;
}

// The memory of the stage that holds the most (analysis/memory_report.hpp layout_fit: its model
// states and its activations at its 1F1B peak).
void layout_memory(const Model& model, const DsConfig& cfg, const Schedule& any, bool checkpointing, double gpu_memory_gb,
                   SweepResult& r) {
    auto fits = layout_fit(model, cfg, any, FitOptions{checkpointing, 0, gpu_memory_gb, ""});
    if (!fits) {
        r.error = fits.error().what();
        return;
    }
    const int64_t most = stage_holding_most(fits.value());
    if (most < 0) return;
    const FitEstimate& f = fits.value()[static_cast<size_t>(most)].fit;
    r.memory_bytes = f.model_states;
    r.activation_bytes = f.activations;
    r.gpu_memory_bytes = f.gpu_bytes;
    r.fits = f.verdict();
}

}  // namespace

void predict_layout_point(const SweepSpec& spec, const Model& model, const DsConfig& cfg, const Topology& topo,
                          const SweepPoint& p, SweepResult& r) {
    ScheduleOptions o;
    o.world = r.world;
    o.steps = spec.steps;
    o.seq_len = spec.seq_len;
    o.activation_checkpointing = spec.activation_checkpointing;
    o.gpus_per_node = topo.gpus_per_node;
    o.layout.pipe = p.pp;
    o.layout.pipe_engine = spec.pipe_engine;
    o.set_pipe_partition(spec.pp_partition);
    o.layout.tensor = p.tp;
    o.layout.sequence = p.sp;
    o.layout.expert = p.ep;
    auto stages = layout_stages(model, cfg, o);
    if (!stages) {
        r.error = stages.error().what();
        return;
    }
    std::vector<const Schedule*> list;
    for (const auto& s : stages.value()) list.push_back(&s);
    // Fabric mode: every group's flows on the fat tree (timing/fabric.hpp), each rank's ops divided by
    // its group's slowdown.
    std::shared_ptr<FabricModel> fabric;
    EngineAdjust adjust;
    if (spec.fabric.on) {
        auto m = fabric_model_for_point(topo, o.world, spec.fabric);
        if (!m) {
            r.error = m.error().what();
            return;
        }
        fabric = std::move(m).value();
        adjust = fabric->engine_adjust(stages->front().meta);
    }
    auto timed = simulate_ranks(list, fabric ? fabric->ideal_topology() : topo, TimingMode::Overlapped, fabric ? &adjust : nullptr);
    if (!timed) {
        r.error = timed.error().what();
        return;
    }
    std::vector<const Prediction*> timings;
    for (const auto& t : timed.value()) timings.push_back(&t);
    const int last = spec.steps - 1;
    const std::vector<StageTime> rows = stage_times(list, timings, last);
    if (!rows.empty()) std::copy(std::begin(rows[0].bytes), std::end(rows[0].bytes), std::begin(r.dimension_bytes));
    for (const StageTime& st : rows) {
        r.step_ms = st.step_s * 1e3;
        r.compute_ms = std::max(r.compute_ms, st.compute_s * 1e3);
        r.bubble_ms = std::max(r.bubble_ms, st.bubble_s * 1e3);
        double comm = 0;
        for (double c : st.comm_s) comm += c;
        r.comm_ms = std::max(r.comm_ms, comm * 1e3);
    }
    r.exposed_ms = std::max(0.0, r.step_ms - r.compute_ms);
    r.wire_bytes = wire_bytes_per_rank(stages->front(), last);
    layout_memory(model, cfg, stages->front(), spec.activation_checkpointing || cfg.activation_checkpointing,
                  topo.gpu_memory_gb, r);
}

}  // namespace zerosim
