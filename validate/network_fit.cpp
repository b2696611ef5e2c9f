// calibrate across nodes (validate/network_fit.hpp): the NIC's efficiency, the bulk protocols'
// call cost and the latency scale, fitted to every row of one cluster's nccl-tests tables.
#include "validate/network_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <set>

#include "timing/collectives.hpp"

namespace zerosim {

namespace {

// One row's terms with the latency scale the plan was chosen at: its latency at scale 1, its
// transfer time and whether it pays the bulk call cost (LL128 or Simple across nodes).
struct RowTerms {
    double latency_s = 0, transfer_s = 0;
    bool bulk = false;
};

RowTerms row_terms(const Topology& t, const Measurement& m) {
    CollectivePlan plan =
        plan_collective(t, m.op, logged_bytes_of_buffer(m.op, static_cast<double>(m.bytes), m.world), m.world, m.only);
    RowTerms r;
    r.latency_s = plan.latency_s / t.latency_scale;
    r.transfer_s = plan.time_alone_s() - plan.latency_s;
    const NcclChoice* c = plan.nccl();
    r.bulk = nodes_spanned(t, m.world) > 1 && c && c->protocol != Protocol::LL;
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
    terms_the_rows_determine(t, rows, out);
    const bool fit_call = out.bulk_call_kept_why.empty();
    InnerFit best;
    if (!out.efficiency_kept_why.empty()) {
        best = fit_at_efficiency(t, rows, t.nic_efficiency, fit_call);
    } else {
        // A log-spaced scan over [kLowestNicEfficiency, 1], then a
        // golden-section search between the best point's neighbours: the objective is piecewise
        // smooth, its pieces where the tuner's choice changes.
        constexpr int kGrid = 48;
        constexpr double kLowest = kLowestNicEfficiency;
        std::vector<double> grid(kGrid);
        int at = 0;
        for (int i = 0; i < kGrid; ++i) {
            grid[i] = kLowest * std::pow(1.0 / kLowest, static_cast<double>(i) / (kGrid - 1));
            InnerFit f = fit_at_efficiency(t, rows, grid[i], fit_call);
            if (f.ok && f.objective < best.objective) best = f, at = i, out.nic_efficiency = grid[i];
        }
        double lo = grid[std::max(at - 1, 0)], hi = grid[std::min(at + 1, kGrid - 1)];
        const double g = (std::sqrt(5.0) - 1) / 2;
        for (int i = 0; i < 30 && best.ok; ++i) {
            double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
            InnerFit f1 = fit_at_efficiency(t, rows, x1, fit_call), f2 = fit_at_efficiency(t, rows, x2, fit_call);
            if (f1.ok && f1.objective < best.objective) best = f1, out.nic_efficiency = x1;
            if (f2.ok && f2.objective < best.objective) best = f2, out.nic_efficiency = x2;
            if (f1.objective < f2.objective) hi = x2;
            else lo = x1;
        }
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
    out.latency_scale = f.latency_scale;
    out.bandwidth_scale = 1;
    out.collective_scales.clear();
    return out;
}

}  // namespace zerosim
