// The plan of one schedule op on its process group (schedule/ir.hpp Op::group): the whole world
// for "dp", else the group of rank 0 in meta.groups, on the nodes and links it spans.
#pragma once

#include "schedule/ir.hpp"
#include "timing/collectives.hpp"
#include "timing/topology.hpp"

namespace zerosim {

CollectivePlan plan_for_group(const Topology& t, const Op& op, const ScheduleMeta& meta);

}  // namespace zerosim
