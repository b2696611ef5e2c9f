// `zerosim bench`'s rows: one collective predicted alone over a size sweep, as nccl-tests sweeps it.
#pragma once

#include <cstdint>
#include <vector>

#include "prediction/predict_outputs.hpp"
#include "timing/collectives.hpp"
#include "timing/engine.hpp"

namespace zerosim {

// Sizes from `min_bytes` to `max_bytes` (nccl-tests' whole-buffer size), each `factor` times the
// last, on `world` ranks of `t`; times as `gpus_per_thread` GPUs per host thread issue back-to-back
// calls (nccl-tests -g), the tuner restricted by `only`.
std::vector<BenchRow> predict_bench_rows(const Topology& t, OpKind kind, int64_t world, int64_t min_bytes, int64_t max_bytes,
                                         int64_t factor, int gpus_per_thread, const TunerChoice& only,
                                         const EngineAdjust* adjust = nullptr);   // fabric mode (timing/fabric.hpp)

}  // namespace zerosim
