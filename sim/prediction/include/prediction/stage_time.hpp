// A pipeline step per stage: the ranks of a 3D layout's stages simulated together
// (timing/engine.hpp simulate_ranks), one rank per stage, and what each spent its step on.
//
// The bubble is what the simulation shows, never a formula: the time a stage waits for another
// (its sends and receives waiting for their other end, its collectives over stages waiting for the
// last member, OpTiming::wait_s) plus the time before it starts and after it ends within the
// pipeline's step (the window from the first stage's start to the last stage's end). For equal
// stages under 1F1B it comes out as (p-1)/(m+p-1) of compute + bubble (tests/unit/test_stage_time.cpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "schedule/ir.hpp"
#include "timing/engine.hpp"
#include "timing/topology.hpp"

namespace zerosim {

// Where an op's time goes by the parallel dimension its group belongs to.
enum class Dimension { Pipe, Tensor, Sequence, Expert, Zero };
const char* dimension_name(Dimension d);   // "pipe", "tensor", "sequence", "expert", "zero"
Dimension dimension_of(const Op& op);

struct StageTime {
    int64_t stage = 0, rank = 0;
    int step = 0;
    double step_s = 0;      // the pipeline's step: first stage's start to last stage's end
    double compute_s = 0;   // the stage's compute segments
    double bubble_s = 0;    // waiting for other stages (above)
    double comm_s[5] = {};  // per Dimension: collective and p2p time less its waits
    int64_t bytes[5] = {};  // per Dimension: bytes this rank sends or logs (a send's, not its receive's)
    double exposed_s = 0;   // step_s - compute_s: what compute does not cover, bubble included
    double bubble_fraction() const { return compute_s + bubble_s > 0 ? bubble_s / (compute_s + bubble_s) : 0.0; }
};

// One row per stage for optimizer step `step` (its last step when -1). `stages[k]` and `timings[k]`
// are stage k's rank and its prediction (overlapped timing).
std::vector<StageTime> stage_times(const std::vector<const Schedule*>& stages, const std::vector<const Prediction*>& timings,
                                   int step = -1);

void write_stage_table(std::ostream& out, const std::vector<StageTime>& rows, const std::string& prefix);

// The bytes a rank sends per step in one dimension, by the link they cross: inside its node
// (NVLink, NVSwitch or PCIe), through its NICs, and the part of those bound for nodes under another
// leaf switch (the spine), each group's NIC bytes shared evenly over its members on other nodes (an
// all_to_all's exact share; a ring, which crosses leaves on fewer of its hops, sends less there).
struct LinkBytes {
    double inside_node = 0, nic = 0, spine = 0;
};
// Per Dimension, for optimizer step `step` of schedule `s` (a 3D rank's program or a data-parallel
// one), planned as the engine plans each op (timing/group_plan.hpp).
std::vector<LinkBytes> link_bytes(const Schedule& s, const Topology& t, int step);

}  // namespace zerosim
