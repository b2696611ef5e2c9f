// The stage-3 timing tests' fixture: six equal layers on one 4-GPU node whose link is slow, so
// that the hand-derived orderings show in time (test_stage3_host.cpp, test_stage3_reduce_throttle.cpp).
#pragma once

#include <gtest/gtest.h>

#include "timing/engine.hpp"
#include "timing/topology.hpp"

namespace zerosim::test {

// l1..l6, one 1000-element weight each: forward l1..l6, backward l6..l1.
inline const char* kSixLayers = R"({"parameters": [
  {"name": "l1.weight", "shape": [1000]}, {"name": "l2.weight", "shape": [1000]}, {"name": "l3.weight", "shape": [1000]},
  {"name": "l4.weight", "shape": [1000]}, {"name": "l5.weight", "shape": [1000]}, {"name": "l6.weight", "shape": [1000]}]})";

// One node of 4 GPUs whose link is slow (1 MB/s: a 1000-element fp32 gather or reduce takes
// milliseconds) and a host that takes 50 us per hook: the collectives, not the host, set the pace.
inline Topology slow_link() {
    auto t = parse_topology("slow.json", R"({"name": "slow", "nodes": 1, "gpus_per_node": 4,
      "gpu": {"peak_tflops": {"fp32": 100}, "memory_bandwidth_gbs": 1000},
      "intra_node": {"kind": "nvswitch", "bandwidth_gbs": 0.001, "nccl_channels": 1, "nccl_channel_bandwidth_gbs": 0.001},
      "host": {"hook_us": 50, "kernel_launch_us": 10}})");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
    return t.value();
}

// A schedule and its overlapped prediction.
struct Timed {
    Schedule s;
    Prediction p;
};

}  // namespace zerosim::test
