// The network's terms fitted to nccl-tests tables whose every row crosses nodes: the share of the
// NIC's line rate the collectives reach (nics.efficiency) or, for rings that run below it, the ring
// channels' rate (nics.ring_channel_gbs), the bulk protocols' call cost
// (nics.bulk_call_us: the fixed time a call with LL128 or Simple pays across nodes beyond NCCL's
// own estimate) and the latency scale. Unlike the scales calibrate fits on one node, these are the
// transport's own figures, so the calibrated topology carries them to the cluster's other
// collectives, algorithms and node counts (docs/collectives.md §5, "The bulk call cost").
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"
#include "timing/topology.hpp"

namespace zerosim {

struct Measurement;   // validate/calibrate.hpp

// The lowest NIC efficiency the fit searches (a slow or shared link reaches a few percent).
constexpr double kLowestNicEfficiency = 0.01;
// The lowest rate a ring channel is read to run at (GB/s of bus bandwidth): half the lowest
// per-channel ring figure in NCCL's tables (perChMaxRingLL128Bws: 20 GB/s on Volta and Ampere,
// src/graph/tuning.cc). A ring table slower than that per channel is read as slow NICs.
constexpr double kLowestRingChannelGbs = 10.0;

struct NetworkFit {
    double nic_efficiency = 1;         // fitted, or the topology's where efficiency_kept_why says why not
    std::string efficiency_kept_why;
    double bulk_call_us = 0;           // fitted, or the topology's where bulk_call_kept_why says why not
    std::string bulk_call_kept_why;
    // A ring channel's rate across nodes (nics.ring_channel_gbs): fitted from a ring table whose
    // bandwidth is below the NICs' (ring_channel_fitted, the efficiency kept), set to 0 where the
    // rings reach the NICs (fitted too: the topology's ceiling was wrong), else the topology's.
    double ring_channel_gbs = 0;
    bool ring_channel_fitted = false;
    double latency_scale = 1;
    // The fitted topology's median |relative residual| below and from 1 MiB of nccl-tests' size
    // (the bands: the latency's sizes, the bulk protocols' and the bandwidth's), and how
    // many rows each has.
    double median_below = 0, median_from = 0;
    size_t rows_below = 0, rows_from = 0;
};

// Whether calibrate fits the network's terms on these rows: every one crosses nodes.
bool rows_cross_nodes(const Topology& t, const std::vector<const Measurement*>& rows);

// Least absolute relative deviations over the rows: the latency scale and the bulk call cost by
// iteratively reweighted least squares at each NIC efficiency, the efficiency by a search over
// (0, 1]. Rings' rows below the NICs' share (the topology's, or the one other algorithms' rows in
// the same fit reach) give the ring channels' rate instead, unless that is below
// kLowestRingChannelGbs (slow NICs). A term the rows cannot tell apart keeps the topology's figure
// and says why (no row runs LL128 or Simple, no row runs LL, no row is bandwidth-bound, the rows
// bound it from below only). Refused below three sizes.
Result<NetworkFit> fit_network(const Topology& t, const std::vector<const Measurement*>& rows);

// `t` with the fitted terms.
Topology with_network_fit(const Topology& t, const NetworkFit& f);

}  // namespace zerosim
