// What a prediction took on trust: the topology figures it used that no measurement fitted
// (issue "A step time you can trust", item 4). A figure is assumed when the topology's "sources"
// entry for it (or for its section: "host" for host.hook_us) says "assumption...", or when the file
// gives no source for it at all; `zerosim calibrate` writes "fitted ..." sources for what it fits.
#pragma once

#include <string>
#include <vector>

#include "schedule/ir.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct AssumedFigure {
    std::string key;      // "gpu.compute_efficiency", as the topology file spells it
    double value = 0;
    std::string unit;     // "" or "us", "GB/s"
    bool unsourced = false;   // no source at all (else the source says "assumption")
    bool zero_is_none = false;   // a ceiling: 0 is written "none"
};

// The figures this schedule's prediction used (compute: the efficiencies and the launch cost;
// stage 3: the hook time; offload: PCIe and CPU Adam) that `t` marks as assumed or leaves unsourced.
std::vector<AssumedFigure> assumed_figures(const Topology& t, const ScheduleMeta& meta);
// One line naming them: "assumed, fitted to no measurement: gpu.compute_efficiency 0.5, ... (FILE's
// sources say \"assumption\"); gpu.memory_efficiency 0.8 (no source)"; "" when nothing is assumed.
std::string assumed_line(const Topology& t, const std::vector<AssumedFigure>& figures);

}  // namespace zerosim
