// calibrate across nodes (validate/network_fit.hpp): the NIC's efficiency, the bulk protocols'
// call cost and the latency scale, fitted to every row of one cluster's nccl-tests tables.
#include "validate/network_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "timing/collectives.hpp"

namespace zerosim {

namespace {

// One row's terms with the latency scale the plan was chosen at: its latency at scale 1, its
// transfer time and whether it pays the bulk call cost (LL128 or Simple across nodes).
struct RowTerms {
    double latency_s = 0, transfer_s = 0;
    bool bulk = false;
    bool simple = false;   // runs Simple across nodes
    bool ring = false;
    // What tells the NICs' rate or a channel's: a Simple row whose transfer outweighs its latency.
    bool sets_bandwidth() const { return simple && transfer_s >= latency_s; }
};

// `t` with the ring channels' ceiling at `gbs` (0: none).
Topology with_ring_channel(const Topology& t, double gbs) {
    Topology out = t;
    out.ring_channel_gbs = gbs;
    return out;
}

RowTerms row_terms(const Topology& t, const Measurement& m) {
    CollectivePlan plan =
        plan_collective(t, m.op, logged_bytes_of_buffer(m.op, static_cast<double>(m.bytes), m.world), m.world, m.only);
    RowTerms r;
    r.latency_s = plan.latency_s / t.latency_scale;
    r.transfer_s = plan.time_alone_s() - plan.latency_s;
    const NcclChoice* c = plan.nccl();
    r.bulk = nodes_spanned(t, m.world) > 1 && c && c->protocol != Protocol::LL;
    r.simple = r.bulk && c->protocol == Protocol::Simple;
    r.ring = c && c->algorithm == Algorithm::Ring;
    return r;
}

// The inner fit at one NIC efficiency: latency scale a and call cost c (µs) by iteratively
// reweighted least squares on relative residuals (w = 1/sqrt|r|: least absolute deviations).
struct InnerFit {
    double a = 1, c_us = 0;
    double objective = INFINITY;   // sum of |relative residual|
    bool ok = false;
};

InnerFit fit_at_efficiency(const Topology& base, const std::vector<const Measurement*>& rows, double efficiency, bool fit_call) {
    Topology t = base;
    t.nic_efficiency = efficiency;
    t.nic_bulk_call_us = 0;
    InnerFit f;
    f.c_us = fit_call ? 0 : base.nic_bulk_call_us;
    std::vector<double> weight(rows.size(), 1.0);
    std::vector<RowTerms> terms(rows.size());
    // The tuner's choices at latency scale 1: NCCL chooses on its own constants, whatever the
    // hardware's latency turns out to be, so the scale times the choices rather than moving them
    // (fitted with them free, the scale can shrink every latency until all rows run LL128 and the
    // call cost stands in for the latency).
    t.latency_scale = 1;
    for (size_t i = 0; i < rows.size(); ++i) terms[i] = row_terms(t, *rows[i]);
    for (int iter = 0; iter < 30; ++iter) {
        bool with_call = fit_call;
        for (int attempt = 0; attempt < 2; ++attempt) {
            const Eigen::Index cols = with_call ? 2 : 1;
            Eigen::MatrixXd A(static_cast<Eigen::Index>(rows.size()), cols);
            Eigen::VectorXd y(static_cast<Eigen::Index>(rows.size()));
            for (size_t i = 0; i < rows.size(); ++i) {
                const double meas = rows[i]->time_us * 1e-6, w = weight[i] / meas;
                const auto k = static_cast<Eigen::Index>(i);
                const double fixed_call = with_call || !terms[i].bulk ? 0 : f.c_us * 1e-6;
                A(k, 0) = terms[i].latency_s * w;
                if (with_call) A(k, 1) = (terms[i].bulk ? 1.0 : 0.0) * w;
                y(k) = (meas - terms[i].transfer_s - fixed_call) * w;
            }
            Eigen::VectorXd x = A.colPivHouseholderQr().solve(y);
            if (with_call && !(x(1) >= 0)) {   // a negative call cost is no cost: refit without it
                with_call = false;
                f.c_us = 0;
                continue;
            }
            f.a = x(0);
            if (with_call) f.c_us = x(1) * 1e6;
            break;
        }
        if (!(f.a > 0) || !std::isfinite(f.a)) return f;   // not physical at this efficiency
        f.objective = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            double p = f.a * terms[i].latency_s + terms[i].transfer_s + (terms[i].bulk ? f.c_us * 1e-6 : 0);
            double rel = std::fabs(p - rows[i]->time_us * 1e-6) / (rows[i]->time_us * 1e-6);
            f.objective += rel;
            weight[i] = 1.0 / std::sqrt(std::max(rel, 1e-3));
        }
    }
    f.ok = true;
    return f;
}

// Which terms the rows determine: the call cost needs rows on both sides of it (LL, and LL128 or
// Simple), the efficiency two rows whose transfer is at least half their time.
void terms_the_rows_determine(const Topology& t, const std::vector<const Measurement*>& rows, NetworkFit& out) {
    size_t bulk = 0, ll = 0, bandwidth_bound = 0;
    for (const Measurement* m : rows) {
        RowTerms r = row_terms(t, *m);
        (r.bulk ? bulk : ll) += 1;
        if (r.transfer_s >= 0.5 * (r.transfer_s + r.latency_s * t.latency_scale)) ++bandwidth_bound;
    }
    if (bulk < 2)
        out.bulk_call_kept_why = "fewer than two rows run LL128 or Simple: nothing pays it";
    else if (ll < 2)
        out.bulk_call_kept_why = "fewer than two rows run LL: every row pays it, so it cannot be told from the latency";
    if (bandwidth_bound < 2) out.efficiency_kept_why = "fewer than two rows are bandwidth-bound";
}

// Where the rows' bandwidth is set by something beside the NICs (a ring channel's rate,
// nics.ring_channel_gbs; NCCL's per-channel ceilings), the bandwidth-bound Simple rows take as long
// at line rate as at the efficiency found: they say the NICs reach at least that much, not how
// much. What else moves with the efficiency above that bound (the LL128 rows' rate, where NCCL's
// tuner switches protocol) is the mid sizes' excess the call cost is for, not the NICs' rate, so
// the topology's figure stands when it is at least the bound; below it, the bound is the answer.
void bound_from_below_only(const Topology& t, const std::vector<const Measurement*>& rows, bool fit_call, InnerFit& best,
                           NetworkFit& out) {
    if (out.nic_efficiency > 0.999) return;
    Topology found = t, line_rate = t;
    found.nic_efficiency = out.nic_efficiency;
    line_rate.nic_efficiency = 1.0;
    found.latency_scale = line_rate.latency_scale = 1;
    size_t bandwidth_bound = 0;
    for (const Measurement* m : rows) {
        RowTerms a = row_terms(found, *m);
        if (!a.sets_bandwidth()) continue;
        ++bandwidth_bound;
        RowTerms b = row_terms(line_rate, *m);
        if (b.transfer_s < a.transfer_s * (1 - 1e-3)) return;   // the NICs set this row's bandwidth
    }
    if (bandwidth_bound < 2) return;
    char why[256];
    std::snprintf(why, sizeof why,
                  "the rows bound it from below only (at least %.3f): above that their bandwidth is not the NICs' "
                  "(nics.ring_channel_gbs or NCCL's per-channel ceiling binds)",
                  out.nic_efficiency);
    if (t.nic_efficiency >= out.nic_efficiency) {
        out.efficiency_kept_why = why;
        out.nic_efficiency = t.nic_efficiency;
        best = fit_at_efficiency(t, rows, t.nic_efficiency, fit_call);
    }
}

// The NIC efficiency that fits the rows best: a log-spaced scan over [kLowestNicEfficiency, 1],
// then a golden-section search between the best point's neighbours (the objective is piecewise
// smooth, its pieces where the tuner's choice changes).
InnerFit scan_efficiency(const Topology& t, const std::vector<const Measurement*>& rows, bool fit_call, double& efficiency) {
    constexpr int kGrid = 48;
    constexpr double kLowest = kLowestNicEfficiency;
    InnerFit best;
    std::vector<double> grid(kGrid);
    int at = 0;
    for (int i = 0; i < kGrid; ++i) {
        grid[i] = kLowest * std::pow(1.0 / kLowest, static_cast<double>(i) / (kGrid - 1));
        InnerFit f = fit_at_efficiency(t, rows, grid[i], fit_call);
        if (f.ok && f.objective < best.objective) best = f, at = i, efficiency = grid[i];
    }
    double lo = grid[std::max(at - 1, 0)], hi = grid[std::min(at + 1, kGrid - 1)];
    const double g = (std::sqrt(5.0) - 1) / 2;
    for (int i = 0; i < 30 && best.ok; ++i) {
        double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
        InnerFit f1 = fit_at_efficiency(t, rows, x1, fit_call), f2 = fit_at_efficiency(t, rows, x2, fit_call);
        if (f1.ok && f1.objective < best.objective) best = f1, efficiency = x1;
        if (f2.ok && f2.objective < best.objective) best = f2, efficiency = x2;
        if (f1.objective < f2.objective) hi = x2;
        else lo = x1;
    }
    return best;
}

// Whose bandwidth the rows' bandwidth-bound Simple rows are (at least two of a kind count): rings',
// other algorithms' (NVLSTree, tree, CollNet), or both (tables of several collectives).
struct BandwidthRows {
    bool rings = false, others = false;
};
BandwidthRows bandwidth_rows(const Topology& t, const std::vector<const Measurement*>& rows) {
    Topology at_one = t;
    at_one.latency_scale = 1;
    size_t rings = 0, others = 0;
    for (const Measurement* m : rows) {
        RowTerms r = row_terms(at_one, *m);
        if (r.sets_bandwidth()) ++(r.ring ? rings : others);
    }
    return {rings >= 2, others >= 2};
}

// The rows a ring runs (ring) or not (!ring), as the tuner chooses on `t`.
std::vector<const Measurement*> rows_run_as(const Topology& t, const std::vector<const Measurement*>& rows, bool ring) {
    std::vector<const Measurement*> out;
    for (const Measurement* m : rows)
        if (row_terms(t, *m).ring == ring) out.push_back(m);
    return out;
}

// The ring channel rate at which the largest bandwidth-bound ring row takes as long with the NICs
// at `held` as it does with no ceiling and the NICs at `e_star` (at a 1 GB/s probe every channel
// binds, and the time scales as 1/rate); 0 where no ring row is bandwidth-bound.
double ring_channel_rate_for(const Topology& t, const std::vector<const Measurement*>& rows, double e_star, double held) {
    Topology found = t, probe = t;
    found.ring_channel_gbs = 0;
    found.nic_efficiency = e_star;
    probe.ring_channel_gbs = 1.0;
    probe.nic_efficiency = held;
    found.latency_scale = probe.latency_scale = 1;
    const Measurement* largest = nullptr;
    for (const Measurement* m : rows) {
        RowTerms r = row_terms(found, *m);
        if (r.sets_bandwidth() && r.ring && (!largest || m->bytes > largest->bytes)) largest = m;
    }
    if (!largest) return 0;
    const double rate = row_terms(probe, *largest).transfer_s / row_terms(found, *largest).transfer_s;
    return std::isfinite(rate) ? rate : 0;
}

// A ring table's bandwidth, fitted as the NICs' efficiency e*, is the NICs' or the ring channels'
// (nics.ring_channel_gbs): one table of rings cannot tell them apart. Below the efficiency held
// (the topology's, or the one other algorithms' rows fitted), it is read as the channels' (the
// NICs keep the share NVLSTree and tree tables reach where rings do not: docs/collectives.md §5)
// unless that would put a channel below kLowestRingChannelGbs, which no SM-driven ring runs at:
// then the NICs are slow (a degraded cluster). At it (within kSameEfficiency) or above, the rings
// reach the NICs and no channel ceiling holds. Returns whether the rows were read as the channels'.
constexpr double kSameEfficiency = 0.01;

bool attribute_ring_bandwidth(const Topology& t, const std::vector<const Measurement*>& rows, double e_star, double held,
                              NetworkFit& out) {
    if (e_star >= held * (1 - kSameEfficiency)) {
        out.ring_channel_gbs = 0;
        out.ring_channel_fitted = t.ring_channel_gbs > 0;
        return false;
    }
    const double rate = ring_channel_rate_for(t, rows, e_star, held);
    if (!(rate >= kLowestRingChannelGbs)) return false;
    out.ring_channel_gbs = rate;
    out.ring_channel_fitted = true;
    return true;
}

// One table of rings: e* from the scan, then the NICs' or the channels'.
void fit_ring_table(const Topology& t, const std::vector<const Measurement*>& rows, bool fit_call, InnerFit& best, NetworkFit& out) {
    const double e_star = out.nic_efficiency;
    if (!attribute_ring_bandwidth(t, rows, e_star, t.nic_efficiency, out)) return;
    char why[256];
    std::snprintf(why, sizeof why,
                  "the rows' bandwidth is the ring channels' (%.2f GB/s each, nics.ring_channel_gbs; the NICs would be at %.3f): "
                  "a table run as NVLSTree or tree fits the NICs",
                  out.ring_channel_gbs, e_star);
    out.efficiency_kept_why = why;
    out.nic_efficiency = t.nic_efficiency;
    best = fit_at_efficiency(with_ring_channel(t, out.ring_channel_gbs), rows, t.nic_efficiency, fit_call);
}

// Tables of rings and of other algorithms together: the others' rows fit the NICs' efficiency, the
// rings' rows the channels' rate at that efficiency, and the call cost and latency scale are then
// fitted to every row.
InnerFit fit_rings_and_others(const Topology& t, const std::vector<const Measurement*>& rows, bool fit_call, NetworkFit& out) {
    const Topology open = with_ring_channel(t, 0);
    Topology choosing = t;
    choosing.latency_scale = 1;
    const auto others = rows_run_as(choosing, rows, false), rings = rows_run_as(choosing, rows, true);
    InnerFit nics = scan_efficiency(open, others, fit_call, out.nic_efficiency);
    double e_rings = out.nic_efficiency;
    InnerFit ring_fit = scan_efficiency(open, rings, fit_call, e_rings);
    if (!nics.ok || !ring_fit.ok) return scan_efficiency(open, rows, fit_call, out.nic_efficiency);
    attribute_ring_bandwidth(t, rings, e_rings, out.nic_efficiency, out);
    return fit_at_efficiency(with_ring_channel(t, out.ring_channel_gbs), rows, out.nic_efficiency, fit_call);
}

}  // namespace

bool rows_cross_nodes(const Topology& t, const std::vector<const Measurement*>& rows) {
    if (rows.empty() || t.nics_per_node <= 0) return false;
    for (const Measurement* m : rows)
        if (m->world <= t.gpus_per_node) return false;
    return true;
}

Result<NetworkFit> fit_network(const Topology& t, const std::vector<const Measurement*>& rows) {
    std::set<int64_t> sizes;
    for (const Measurement* m : rows) sizes.insert(m->bytes);
    if (sizes.size() < 3)
        return Error{"", "measurements",
                     "under-determined: the network's latency, call cost and NIC efficiency need at least three different message "
                     "sizes (" + std::to_string(sizes.size()) + " usable)"};
    NetworkFit out;
    out.nic_efficiency = t.nic_efficiency;
    out.bulk_call_us = t.nic_bulk_call_us;
    out.ring_channel_gbs = t.ring_channel_gbs;
    terms_the_rows_determine(t, rows, out);
    const bool fit_call = out.bulk_call_kept_why.empty();
    // A ring table's bandwidth is fitted as the NICs' first, with no ring channel ceiling in the
    // way, then told apart (attribute_ring_bandwidth); with other algorithms' tables beside it,
    // those fit the NICs.
    const BandwidthRows kind = bandwidth_rows(t, rows);
    InnerFit best;
    if (!out.efficiency_kept_why.empty()) {
        best = fit_at_efficiency(t, rows, t.nic_efficiency, fit_call);
    } else if (kind.rings && kind.others) {
        best = fit_rings_and_others(t, rows, fit_call, out);
    } else if (kind.rings) {
        best = scan_efficiency(with_ring_channel(t, 0), rows, fit_call, out.nic_efficiency);
        if (best.ok) fit_ring_table(t, rows, fit_call, best, out);
    } else {
        best = scan_efficiency(t, rows, fit_call, out.nic_efficiency);
        if (best.ok) bound_from_below_only(t, rows, fit_call, best, out);
    }
    if (!best.ok)
        return Error{"", "measurements",
                     "the fit is not physical (no NIC efficiency in (0, 1] gives a positive latency scale): the rows do not follow "
                     "latency + call cost + size / bandwidth"};
    out.latency_scale = best.a;
    out.bulk_call_us = best.c_us;
    return out;
}

Topology with_network_fit(const Topology& t, const NetworkFit& f) {
    Topology out = t;
    out.nic_efficiency = f.nic_efficiency;
    out.nic_bulk_call_us = f.bulk_call_us;
    out.ring_channel_gbs = f.ring_channel_gbs;
    out.latency_scale = f.latency_scale;
    out.bandwidth_scale = 1;
    out.collective_scales.clear();
    return out;
}

}  // namespace zerosim
