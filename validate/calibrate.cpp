#include "validate/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "schedule/collective_table.hpp"
#include "timing/collectives.hpp"
#include "timing/engine.hpp"
#include "formats/measured_logs.hpp"

namespace zerosim {

namespace {

// The collective named first in `s` (by position: a header that mentions another collective
// further on, as a note, does not win by the order of this list).
bool first_collective_named(const std::string& s, OpKind& out) {
    struct {
        const char* key;
        OpKind kind;
    } keys[] = {{"all_reduce", OpKind::AllReduce},      {"allreduce", OpKind::AllReduce},   {"all_gather", OpKind::AllGather},
                {"allgather", OpKind::AllGather},       {"reduce_scatter", OpKind::ReduceScatter},
                {"reducescatter", OpKind::ReduceScatter}, {"broadcast", OpKind::Broadcast}, {"reduce_perf", OpKind::Reduce}};
    size_t best = std::string::npos;
    for (const auto& k : keys)
        if (size_t at = s.find(k.key); at != std::string::npos && (best == std::string::npos || at < best)) {
            best = at;
            out = k.kind;
        }
    return best != std::string::npos;
}

}  // namespace

bool guess_collective(const std::string& s, OpKind& out) {
    // A line that says which collective the table is (nccl-tests' "Collective test starting:",
    // the shared tables' "# COLLECTIVE:") speaks before the rest of the text.
    for (const char* marker : {"Collective test starting:", "# COLLECTIVE:"})
        if (size_t at = s.find(marker); at != std::string::npos) {
            size_t end = s.find('\n', at);
            if (first_collective_named(s.substr(at, end == std::string::npos ? std::string::npos : end - at), out)) return true;
        }
    return first_collective_named(s, out);
}

static double logged_bytes(const Measurement& m) { return logged_bytes_of_buffer(m.op, static_cast<double>(m.bytes), m.world); }

double predicted_time_us(const Topology& t, const Measurement& m) {
    return simulate_single_collective(t, m.op, logged_bytes(m), m.world, nullptr, m.only) * 1e6;
}

namespace {

// The rows a fit can use (a positive time, two ranks or more, within the topology); the others
// with the reason, into `unused` when given.
std::vector<const Measurement*> usable_rows(const Topology& base, const std::vector<Measurement>& rows,
                                            std::vector<std::string>* unused) {
    std::vector<const Measurement*> usable;
    for (const auto& r : rows) {
        std::string why;
        if (!(r.time_us > 0))
            why = "time is not positive";
        else if (r.bytes <= 0)
            why = "a 0-byte call moves nothing (NCCL returns before any step)";
        else if (r.world < 2)
            why = "a single rank moves no data";
        else if (r.world > base.total_gpus())
            why = std::to_string(r.world) + " ranks exceed the topology's GPUs";
        if (!why.empty()) {
            if (unused) unused->push_back(r.source + ": " + why);
            continue;
        }
        usable.push_back(&r);
    }
    return usable;
}

// The message sizes among the rows, each once, in order.
std::vector<int64_t> distinct_message_sizes(const std::vector<const Measurement*>& usable) {
    std::vector<int64_t> sizes;
    for (auto* r : usable) sizes.push_back(r->bytes);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

// The columns of the least-squares system: the latencies, the bytes, then the rendezvous latency
// and the bytes beyond the cache where each is fitted on its own (-1: not a column).
struct FitColumns {
    bool own_rendezvous = false, own_memory = false;
    Eigen::Index col_r = -1, col_m = -1, cols = 2;
};

FitColumns fit_columns(bool own_rendezvous, bool own_memory) {
    FitColumns c;
    c.own_rendezvous = own_rendezvous;
    c.own_memory = own_memory;
    c.col_r = own_rendezvous ? 2 : -1;
    c.col_m = own_memory ? (own_rendezvous ? 3 : 2) : -1;
    c.cols = 2 + (own_rendezvous ? 1 : 0) + (own_memory ? 1 : 0);
    return c;
}

// Iteratively reweighted least squares of the topology's scales over the usable rows; `t` is the
// topology with the scales found so far, a, b, r and mem the latency, inverse bandwidth, rendezvous
// and beyond-the-cache scales.
struct ScaleFit {
    const Topology& base;
    const std::vector<const Measurement*>& usable;
    Topology t;
    double a = 1, b = 1, r = 0, mem = 0;
    std::vector<double> weight;
    // The plan the tuner picks for each row with the current scales (reweighting and the next
    // round's matrix use the same ones).
    std::vector<CollectivePlan> plans;

    ScaleFit(const Topology& base_topology, const std::vector<const Measurement*>& rows)
        : base(base_topology), usable(rows), t(base_topology), plans(rows.size()) {}

    void replan() {
        for (size_t i = 0; i < usable.size(); ++i)
            plans[i] = plan_collective(t, usable[i]->op, logged_bytes(*usable[i]), usable[i]->world, usable[i]->only);
    }

    void reset_to_unit_scales() {
        t.latency_scale = 1;
        t.bandwidth_scale = 1;
        t.rendezvous_scale = 0;
        t.memory_scale = 0;
        t.collective_scales.clear();
        a = 1, b = 1, r = 0, mem = 0;
        weight.assign(usable.size(), 1.0);
        replan();
    }

    // One round's matrix: each row's terms at scale 1, weighted over its measured time.
    void weighted_rows(const FitColumns& c, Eigen::MatrixXd& A, Eigen::VectorXd& y) const {
        const double raw_rate = base.intra_bandwidth_gbs * 1e9;   // bytes/s at bandwidth scale 1
        const double rs = r > 0 ? r : a;   // the rendezvous scale the plans were made with
        for (size_t i = 0; i < usable.size(); ++i) {
            // The plan's terms at scale 1.
            const Measurement& m = *usable[i];
            const CollectivePlan& plan = plans[i];
            const OpenMpiTunedChoice mpi = openmpi_terms(plan);
            double rendezvous = mpi.rendezvous_s / rs;
            double lat = (plan.latency_s - mpi.rendezvous_s) / t.latency_scale;
            double transfer = (plan.time_alone_s() - plan.latency_s) * t.bandwidth_scale, beyond = 0;
            if (mpi.in_cache_bytes + mpi.beyond_cache_bytes > 0) {
                transfer = (c.own_memory ? mpi.in_cache_bytes : mpi.in_cache_bytes + mpi.beyond_cache_bytes) / raw_rate;
                beyond = mpi.beyond_cache_bytes / raw_rate;
            }
            double w = weight[i] / (m.time_us * 1e-6);
            const auto row = static_cast<Eigen::Index>(i);
            A(row, 0) = (c.own_rendezvous ? lat : lat + rendezvous) * w;
            A(row, 1) = transfer * w;
            if (c.own_rendezvous) A(row, c.col_r) = rendezvous * w;
            if (c.own_memory) A(row, c.col_m) = beyond * w;
            y(row) = weight[i];
        }
    }

    // Takes a round's solution as the scales; whether it moved them by less than 1e-7 relative.
    bool take_solution(const Eigen::VectorXd& x, const FitColumns& c) {
        const double xr = c.own_rendezvous ? x(c.col_r) : 0, xm = c.own_memory ? x(c.col_m) : 0;
        bool settled = std::fabs(x(0) - a) < 1e-7 * a && std::fabs(x(1) - b) < 1e-7 * b &&
                       (!c.own_rendezvous || std::fabs(xr - r) < 1e-7 * xr) &&
                       (!c.own_memory || std::fabs(1.0 / xm - mem) < 1e-7 * mem);
        a = x(0);
        b = x(1);
        r = xr;
        mem = c.own_memory ? 1.0 / xm : 0;
        t.latency_scale = a;
        t.bandwidth_scale = 1.0 / b;
        t.rendezvous_scale = r;
        t.memory_scale = mem;
        return settled;
    }

    // Reweight for least absolute deviations: w = 1 / sqrt(max(|relative residual|, 1e-3))
    // on the rows (so that the squared weighted residual is |r|).
    void reweight() {
        replan();
        for (size_t i = 0; i < usable.size(); ++i) {
            const Measurement& m = *usable[i];
            double rel = (plans[i].time_alone_s() * 1e6 - m.time_us) / m.time_us;
            weight[i] = 1.0 / std::sqrt(std::max(std::fabs(rel), 1e-3));
        }
    }

    // Iteratively reweighted least squares from unit scales. Columns: the latencies, the bytes
    // (within the cache when the topology has one), then, when fitted on their own, the
    // rendezvous latency and the bytes beyond the cache; otherwise these go with the first two.
    std::optional<Error> solve(bool own_rendezvous, bool own_memory) {
        reset_to_unit_scales();
        const FitColumns c = fit_columns(own_rendezvous, own_memory);
        for (int iter = 0; iter < 40; ++iter) {
            Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(usable.size()), c.cols);
            Eigen::VectorXd y(static_cast<Eigen::Index>(usable.size()));
            weighted_rows(c, A, y);
            Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
            if (qr.rank() < c.cols)
                return Error{"", "measurements", "under-determined: the rows do not separate latency from bandwidth"};
            Eigen::VectorXd x = qr.solve(y);
            if (auto e = non_physical(x, c)) return e;
            bool settled = take_solution(x, c);
            reweight();
            if (settled && iter > 2) break;
        }
        return std::nullopt;
    }

    static std::optional<Error> non_physical(const Eigen::VectorXd& x, const FitColumns& c) {
        const double xr = c.own_rendezvous ? x(c.col_r) : 0, xm = c.own_memory ? x(c.col_m) : 0;
        if (!(x(0) > 0) || !(x(1) > 0) || (c.own_rendezvous && !(xr > 0)) || (c.own_memory && !(xm > 0)))
            return Error{"", "measurements",
                         "the fit is not physical (latency scale " + std::to_string(x(0)) + ", inverse bandwidth scale " +
                             std::to_string(x(1)) + (c.own_rendezvous ? ", rendezvous scale " + std::to_string(xr) : std::string()) +
                             (c.own_memory ? ", inverse bandwidth scale beyond the cache " + std::to_string(xm) : std::string()) +
                             "): the data do not follow latency + size / bandwidth"};
        return std::nullopt;
    }
};

// The rendezvous latency gets a scale of its own only when some rows pay it and some do not
// (with rows on one side only it is proportional to the steps' latency: tied to its scale);
// the bytes beyond the cache only when two sizes or more reach beyond it and two stay within.
FitColumns columns_of_their_own(const ScaleFit& f, size_t distinct_sizes) {
    bool eager_rows = false, rendezvous_rows = false;
    std::set<int64_t> within, beyond;
    for (size_t i = 0; i < f.usable.size(); ++i) {
        const OpenMpiTunedChoice mpi = openmpi_terms(f.plans[i]);
        (mpi.rendezvous_s > 0 ? rendezvous_rows : eager_rows) = true;
        if (mpi.in_cache_bytes + mpi.beyond_cache_bytes > 0)
            (mpi.beyond_cache_bytes > 0 ? beyond : within).insert(f.usable[i]->bytes);
    }
    const bool own_rendezvous = eager_rows && rendezvous_rows && distinct_sizes >= 3;
    const bool own_memory = beyond.size() >= 2 && within.size() >= 2 && distinct_sizes >= 4;
    return fit_columns(own_rendezvous, own_memory);
}

// The upper median (as the fits' median_abs_error), 0 for none.
double upper_median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The fitted topology's residuals on the rows, their median and R^2.
void record_fit_quality(const Topology& t, const std::vector<const Measurement*>& usable, FitResult& fit) {
    double mean = 0;
    for (auto* r : usable) mean += r->time_us;
    mean /= static_cast<double>(usable.size());
    double ss_res = 0, ss_tot = 0;
    std::vector<double> abs_err;
    for (auto* r : usable) {
        double p = predicted_time_us(t, *r);
        ss_res += (p - r->time_us) * (p - r->time_us);
        ss_tot += (r->time_us - mean) * (r->time_us - mean);
        fit.residuals.push_back((p - r->time_us) / r->time_us);
        fit.residual_logged_bytes.push_back(logged_bytes(*r));
        abs_err.push_back(std::fabs(fit.residuals.back()));
    }
    std::sort(abs_err.begin(), abs_err.end());
    fit.median_abs_error = abs_err[abs_err.size() / 2];
    fit.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
    fit.used = usable.size();
}

}  // namespace

Result<FitResult> fit_topology(const Topology& base, const std::vector<Measurement>& rows) {
    FitResult fit;
    std::vector<const Measurement*> usable = usable_rows(base, rows, &fit.unused);
    const std::vector<int64_t> sizes = distinct_message_sizes(usable);
    if (sizes.size() < 2)
        return Error{"", "measurements",
                     "under-determined: a latency and a bandwidth need at least two different message sizes (" +
                         std::to_string(sizes.size()) + " usable)"};
    bool inter = false;
    for (auto* r : usable) inter = inter || r->world > base.gpus_per_node;
    fit.scope = inter ? "inter-node (the data crosses NICs)" : "intra-node";
    ScaleFit f(base, usable);
    f.replan();
    const FitColumns own = columns_of_their_own(f, sizes.size());
    std::optional<Error> failed = f.solve(own.own_rendezvous, own.own_memory);
    // A noisy round can make a scale of its own come out non-physical (4 ranks on 2 cores): that
    // term then goes with the others (the memory's first, then the rendezvous'), and the summary
    // says so.
    if (failed && own.own_memory) {
        fit.memory_tied_why = failed->what();
        failed = f.solve(own.own_rendezvous, false);
    }
    if (failed && own.own_rendezvous) {
        fit.rendezvous_tied_why = failed->what();
        failed = f.solve(false, false);
    }
    if (failed) return *failed;
    fit.latency_scale = f.a;
    fit.bandwidth_scale = 1.0 / f.b;
    fit.rendezvous_scale = f.r;
    fit.memory_scale = f.mem;
    record_fit_quality(f.t, usable, fit);
    return fit;
}

namespace {

// Repeated rows (same collective, size and world) as one row of their median time.
std::vector<Measurement> median_of_repeats(const std::vector<Measurement>& rows) {
    std::map<std::tuple<int, int64_t, int64_t>, std::vector<const Measurement*>> groups;
    std::vector<std::tuple<int, int64_t, int64_t>> order;
    for (const auto& r : rows) {
        auto key = std::make_tuple(static_cast<int>(r.op), r.bytes, r.world);
        if (!groups.count(key)) order.push_back(key);
        groups[key].push_back(&r);
    }
    std::vector<Measurement> out;
    for (const auto& key : order) {
        const auto& g = groups[key];
        Measurement m = *g.front();
        if (g.size() > 1) {
            std::vector<double> t;
            for (const Measurement* r : g) t.push_back(r->time_us);
            std::sort(t.begin(), t.end());
            size_t k = t.size() / 2;
            m.time_us = t.size() % 2 ? t[k] : (t[k - 1] + t[k]) / 2;
            m.source += " (median of " + std::to_string(g.size()) + ")";
        }
        out.push_back(m);
    }
    return out;
}

}  // namespace

namespace {

// Every row across nodes: the network's terms, one set for the cluster (validate/network_fit.hpp).
Result<Calibration> calibrate_network(const Topology& t, const std::vector<Measurement>& rows, Calibration c) {
    std::vector<const Measurement*> usable = usable_rows(t, rows, &c.global.unused);
    auto fit = fit_network(t, usable);
    if (!fit) return fit.error();
    c.network = true;
    c.network_fit = fit.value();
    c.global.scope = "inter-node (the data crosses NICs): the network's terms";
    c.global.latency_scale = fit->latency_scale;
    c.global.bandwidth_scale = 1;
    record_fit_quality(with_network_fit(t, fit.value()), usable, c.global);
    c.applied_median_abs_error = c.global.median_abs_error;
    std::vector<double> below, from;
    for (size_t i = 0; i < usable.size(); ++i)
        (usable[i]->bytes < kNetworkBandSplitBytes ? below : from).push_back(std::fabs(c.global.residuals[i]));
    c.network_fit.rows_below = below.size();
    c.network_fit.rows_from = from.size();
    c.network_fit.median_below = upper_median(below);
    c.network_fit.median_from = upper_median(from);
    FitResult given;
    record_fit_quality(t, usable, given);
    c.uncalibrated_median_abs_error = given.median_abs_error;
    return c;
}

}  // namespace

Result<Calibration> calibrate(const Topology& t, const std::vector<Measurement>& measured, bool repeats_as_median) {
    Calibration c;
    c.measured_rows = measured.size();
    const std::vector<Measurement> rows = repeats_as_median ? median_of_repeats(measured) : measured;
    if (rows_cross_nodes(t, usable_rows(t, rows, nullptr))) return calibrate_network(t, rows, std::move(c));
    auto global = fit_topology(t, rows);
    if (!global) return global.error();
    c.global = global.value();
    // The topology as given, on the same rows: what the fit must beat.
    std::vector<double> before;
    for (const Measurement* m : usable_rows(t, rows, nullptr))
        before.push_back(std::fabs((predicted_time_us(t, *m) - m->time_us) / m->time_us));
    std::sort(before.begin(), before.end());
    c.uncalibrated_median_abs_error = before.empty() ? 0 : before[before.size() / 2];
    std::map<std::string, std::vector<Measurement>> by_op;
    for (const auto& r : rows) by_op[collective_info(r.op).name].push_back(r);
    if (by_op.size() > 1)
        for (const auto& [name, group] : by_op) {
            auto f = fit_topology(t, group);
            if (f) c.per_collective[name] = f.value();
        }
    // The fit as the calibrated file applies it (each collective with a fit of its own by that
    // fit, the others by the global one), on the same rows as the topology as given.
    std::vector<double> applied;
    for (const Measurement* m : usable_rows(t, rows, nullptr)) {
        auto it = c.per_collective.find(collective_info(m->op).name);
        const FitResult& f = it != c.per_collective.end() ? it->second : c.global;
        Topology tc = t;
        tc.collective_scales.clear();
        tc.latency_scale = f.latency_scale;
        tc.bandwidth_scale = f.bandwidth_scale;
        tc.rendezvous_scale = f.rendezvous_scale;
        tc.memory_scale = f.memory_scale;
        applied.push_back(std::fabs((predicted_time_us(tc, *m) - m->time_us) / m->time_us));
    }
    std::sort(applied.begin(), applied.end());
    c.applied_median_abs_error = applied.empty() ? 0 : applied[applied.size() / 2];
    return c;
}

Result<std::vector<Measurement>> read_calibration_table(const std::string& file, const std::string& op_name,
                                                        const std::string& column, int64_t world) {
    auto text = read_text_file(file, "log");
    if (!text) return text.error();
    auto log = parse_log(text.value(), file);
    if (!log) return log.error();
    if (log->format != LogFormat::NcclTests)
        return Error{file, "", "calibrate reads nccl-tests style tables (nccl-tests, zerorun bench, zerosim bench)"};
    OpKind op = OpKind::AllReduce;
    if (!op_name.empty()) {
        auto named = collective_named(op_name);
        if (!named) return Error{"", "--op", "unknown collective '" + op_name + "'"};
        op = *named;
    } else if (const std::string named = bench_table_collective(text->substr(0, 4000)); !named.empty()) {
        auto kind = collective_named(named);   // the table's own head says which
        if (!kind) return Error{file, "", "the table's head names an unknown collective '" + printable(named, 64) + "'"};
        op = *kind;
    } else if (!guess_collective(text->substr(0, 4000), op) && !guess_collective(file, op)) {
        return Error{file, "--op", "cannot tell which collective this table measured; pass --op"};
    }
    // The column that times the op as it will be used; a table without in-place columns
    // (some nccl-tests builds, older logs) gives its out-of-place time.
    bool in_place = column == "in-place" || (column == "as-deepspeed" && deepspeed_calls_in_place(op));
    std::vector<Measurement> rows;
    for (const auto& t : log->tables)
        for (const auto& r : t.rows) {
            double us = in_place && r.inplace_time_us > 0 ? r.inplace_time_us : r.time_us;
            rows.push_back({op, r.bytes, us, world, file + ": size " + std::to_string(r.bytes)});
        }
    return rows;
}

ResidualBands residual_bands(const FitResult& f, double split) {
    std::vector<double> below, from;
    for (size_t i = 0; i < f.residuals.size() && i < f.residual_logged_bytes.size(); ++i)
        (f.residual_logged_bytes[i] < split ? below : from).push_back(std::fabs(f.residuals[i]));
    // The upper median, as fit_topology's median_abs_error.
    auto med = [](std::vector<double>& v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    ResidualBands b;
    b.rows_below = below.size();
    b.rows_from = from.size();
    b.below = med(below);
    b.from = med(from);
    return b;
}

void write_calibration_summary(std::ostream& out, const Calibration& cal) {
    auto show = [&](const std::string& what, const FitResult& f) {
        char line[256];
        std::snprintf(line, sizeof line, "  %-16s latency x%.4f  bandwidth x%.4f  R^2 %.5f  median |residual| %.1f%%  (%zu rows)\n",
                      what.c_str(), f.latency_scale, f.bandwidth_scale, f.r2, f.median_abs_error * 100, f.used);
        out << line;
        if (f.rendezvous_scale > 0) {
            std::snprintf(line, sizeof line, "  %-16s rendezvous latency x%.4f (steps above the eager limit)\n", "", f.rendezvous_scale);
            out << line;
        } else if (!f.rendezvous_tied_why.empty()) {
            out << "                     rendezvous latency scaled with the others: its own scale was refused ("
                << f.rendezvous_tied_why << ")\n";
        }
        if (f.memory_scale > 0) {
            std::snprintf(line, sizeof line, "  %-16s bandwidth beyond the cache x%.4f (bytes beyond cache_bytes_per_rank)\n", "",
                          f.memory_scale);
            out << line;
        } else if (!f.memory_tied_why.empty()) {
            out << "                     bytes beyond the cache at the same bandwidth: their own scale was refused ("
                << f.memory_tied_why << ")\n";
        }
    };
    out << "zerosim calibrate: " << cal.global.used << " rows fitted (" << cal.global.scope << ")";
    if (cal.measured_rows > cal.global.used + cal.global.unused.size())
        out << ", each the median of its repeats (" << cal.measured_rows << " measured)";
    out << "\n";
    show("all collectives", cal.global);
    if (cal.network) {
        const NetworkFit& n = cal.network_fit;
        char line[256];
        std::snprintf(line, sizeof line, "  %-16s NIC efficiency %.4f%s  bulk call %.1f us%s", "network", n.nic_efficiency,
                      n.efficiency_kept_why.empty() ? "" : " (kept)", n.bulk_call_us, n.bulk_call_kept_why.empty() ? "" : " (kept)");
        out << line;
        if (n.ring_channel_gbs > 0) {
            std::snprintf(line, sizeof line, "  ring channel %.2f GB/s%s", n.ring_channel_gbs, n.ring_channel_fitted ? "" : " (kept)");
            out << line;
        }
        out << "\n";
        if (!n.efficiency_kept_why.empty()) out << "                     NIC efficiency as given: " << n.efficiency_kept_why << "\n";
        else if (n.nic_efficiency > 0.999)
            out << "                     NIC efficiency at its bound (line rate): the rows move more than nics.bandwidth_gbs allows "
                   "the model (a wrong --algo, NIC count or rate?)\n";
        else if (n.nic_efficiency < kLowestNicEfficiency * 1.001)
            out << "                     NIC efficiency at its lower bound: the rows move less than 1% of nics.bandwidth_gbs "
                   "(a wrong --nodes, NIC count or rate?)\n";
        if (!n.bulk_call_kept_why.empty()) out << "                     bulk call cost as given: " << n.bulk_call_kept_why << "\n";
        if (n.ring_channel_fitted && !(n.ring_channel_gbs > 0))
            out << "                     ring channel ceiling dropped: the rings reach the NICs (nics.ring_channel_gbs)\n";
        std::snprintf(line, sizeof line, "  %-16s median |residual| < 1 MiB %.1f%% (%zu rows), >= 1 MiB %.1f%% (%zu rows)\n", "  by size",
                      n.median_below * 100, n.rows_below, n.median_from * 100, n.rows_from);
        out << line;
    }
    for (const auto& [name, f] : cal.per_collective) {
        show(name, f);
        // Per size band (logged bytes), so that a misfit of the large rows is not hidden by the
        // small ones' (issue 20: residuals per collective).
        ResidualBands b = residual_bands(f, kResidualBandSplitBytes);
        char line[256];
        std::snprintf(line, sizeof line, "  %-16s median |residual| < 256 KiB %.1f%% (%zu rows), >= 256 KiB %.1f%% (%zu rows)\n",
                      "  by size", b.below * 100, b.rows_below, b.from * 100, b.rows_from);
        out << line;
    }
    {
        char line[128];
        std::snprintf(line, sizeof line, "  %-16s median |residual| %.1f%%\n", "as written", cal.applied_median_abs_error * 100);
        out << line;
        std::snprintf(line, sizeof line, "  %-16s median |residual| %.1f%%\n", "as given", cal.uncalibrated_median_abs_error * 100);
        out << line;
    }
    // Rows left out for one reason one after the other (a table's 0-byte rows) as one line.
    for (size_t i = 0; i < cal.global.unused.size();) {
        size_t j = i + 1;
        while (j < cal.global.unused.size() && cal.global.unused[j] == cal.global.unused[i]) ++j;
        out << "  not used: " << cal.global.unused[i] << (j - i > 1 ? " (" + std::to_string(j - i) + " rows)" : "") << "\n";
        i = j;
    }
}

std::vector<std::string> poor_fit_warnings(const Calibration& cal) {
    std::vector<std::string> w;
    char line[256];
    if (cal.global.r2 < kPoorFitR2) {
        std::snprintf(line, sizeof line, "poor fit: R^2 %.3f is below %.2f (the data do not follow latency + size / bandwidth)",
                      cal.global.r2, kPoorFitR2);
        w.push_back(line);
    }
    if (cal.applied_median_abs_error > kPoorFitMedianResidual) {
        std::snprintf(line, sizeof line, "poor fit: median |residual| %.1f%% is above %.0f%%", cal.applied_median_abs_error * 100,
                      kPoorFitMedianResidual * 100);
        w.push_back(line);
    }
    return w;
}

std::string worse_than_uncalibrated(const Calibration& cal) {
    if (!(cal.applied_median_abs_error > cal.uncalibrated_median_abs_error + kWorseFitMargin)) return "";
    char line[256];
    std::snprintf(line, sizeof line,
                  "the calibrated fit is worse than the topology as given on the same %zu rows (median |residual| %.1f%% "
                  "against %.1f%%)",
                  cal.global.used, cal.applied_median_abs_error * 100, cal.uncalibrated_median_abs_error * 100);
    return line;
}

namespace {

// The network's fitted terms into the topology's nics section, each with its source.
void write_network_terms(Json& out, const NetworkFit& f, const std::vector<std::string>& files) {
    std::string from;
    for (const auto& file : files) from += (from.empty() ? "" : ", ") + file;
    if (!out.contains("sources") || !out["sources"].is_object()) out["sources"] = Json::object();
    if (f.efficiency_kept_why.empty()) {
        out["nics"]["efficiency"] = f.nic_efficiency;
        out["sources"]["nics.efficiency"] = "fitted by zerosim calibrate from " + from + " (every row across nodes)";
    }
    if (f.ring_channel_fitted && f.ring_channel_gbs > 0) {
        out["nics"]["ring_channel_gbs"] = f.ring_channel_gbs;
        out["sources"]["nics.ring_channel_gbs"] =
            "fitted by zerosim calibrate from " + from + " (the rings' bandwidth, below the NICs' at nics.efficiency)";
    } else if (f.ring_channel_fitted && out["nics"].contains("ring_channel_gbs")) {
        out["nics"].erase("ring_channel_gbs");
        out["sources"]["nics.ring_channel_gbs"] = "none: the rings of " + from + " reach the NICs (zerosim calibrate)";
    }
    if (f.bulk_call_kept_why.empty()) {
        out["nics"]["bulk_call_us"] = f.bulk_call_us;
        out["sources"]["nics.bulk_call_us"] =
            "fitted by zerosim calibrate from " + from + " (the LL128 and Simple rows' time beyond NCCL's estimate)";
    }
}

}  // namespace

Json calibrated_topology(const Json& topology, const Calibration& cal, const std::vector<std::string>& files,
                         const std::string& column) {
    Json out = topology;
    Json jc = Json::object();
    jc["bandwidth_scale"] = cal.global.bandwidth_scale;
    jc["latency_scale"] = cal.global.latency_scale;
    if (cal.global.rendezvous_scale > 0) jc["rendezvous_scale"] = cal.global.rendezvous_scale;
    if (cal.global.memory_scale > 0) jc["memory_scale"] = cal.global.memory_scale;
    if (!cal.per_collective.empty()) {
        Json per = Json::object();
        for (const auto& [name, f] : cal.per_collective) {
            per[name] = {{"bandwidth_scale", f.bandwidth_scale}, {"latency_scale", f.latency_scale}, {"rows", f.used}, {"r2", f.r2}};
            if (f.rendezvous_scale > 0) per[name]["rendezvous_scale"] = f.rendezvous_scale;
            if (f.memory_scale > 0) per[name]["memory_scale"] = f.memory_scale;
        }
        jc["per_collective"] = per;
    }
    if (cal.network) write_network_terms(out, cal.network_fit, files);
    jc["fitted_from"] = files;
    jc["column"] = column;
    out["calibration"] = jc;
    return out;
}

}  // namespace zerosim
