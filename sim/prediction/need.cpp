#include "prediction/need.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "prediction/gathered_budget.hpp"
#include "prediction/what_if_compare.hpp"
#include "schedule/schedule.hpp"
#include "schedule/what_if.hpp"
#include "timing/engine.hpp"

namespace zerosim {

const char* need_quantity_name(NeedQuantity q) {
    switch (q) {
        case NeedQuantity::InterNodeBandwidth: return "inter-node bandwidth per GPU";
        case NeedQuantity::Nodes: return "nodes";
        case NeedQuantity::ReduceBucketSize: return "zero_optimization.reduce_bucket_size";
        default: return "zero_optimization.stage3_prefetch_bucket_size";
    }
}

const char* need_quantity_unit(NeedQuantity q) {
    switch (q) {
        case NeedQuantity::InterNodeBandwidth: return "GB/s";
        case NeedQuantity::Nodes: return "nodes";
        default: return "elements";
    }
}

void need_default_range(NeedQuantity q, double& lo, double& hi) {
    switch (q) {
        case NeedQuantity::InterNodeBandwidth: lo = 0.5, hi = 400; break;   // 4 Gb/s to 3.2 Tb/s per GPU
        case NeedQuantity::Nodes: lo = 1, hi = 1024; break;
        default: lo = 1e5, hi = 2e9; break;
    }
}

namespace {

// Nodes and bucket sizes are whole numbers; nodes are searched exactly, the rest to the tolerance.
bool integral(NeedQuantity q) { return q != NeedQuantity::InterNodeBandwidth; }
bool exact(NeedQuantity q) { return q == NeedQuantity::Nodes; }

double metric(const NeedProblem& p, const NeedPoint& pt) {
    return p.target == NeedTarget::ExposedPercent ? pt.exposed_percent() : pt.step_ms;
}

// Each collective's time in `step` outside the union of compute segments, by comms-logger name.
void attribute_exposed(const Schedule& s, const Prediction& pred, int step, NeedPoint& pt) {
    std::vector<std::pair<double, double>> busy;
    for (size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].step == step && s.ops[i].kind == OpKind::Compute) busy.emplace_back(pred.ops[i].start_s, pred.ops[i].end_s);
    std::sort(busy.begin(), busy.end());
    std::vector<std::pair<double, double>> merged;
    for (const auto& b : busy) {
        if (!merged.empty() && b.first <= merged.back().second)
            merged.back().second = std::max(merged.back().second, b.second);
        else
            merged.push_back(b);
    }
    std::map<std::string, double> by_name;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        if (op.step != step || !is_collective(op.kind)) continue;
        double a = pred.ops[i].start_s, b = pred.ops[i].end_s, covered = 0;
        for (const auto& m : merged) covered += std::max(0.0, std::min(b, m.second) - std::max(a, m.first));
        double outside = std::max(0.0, (b - a) - covered);
        by_name[op_record_name(op.kind)] += outside;
        pt.uncovered_ms += outside * 1e3;
    }
    for (const auto& [name, t] : by_name)
        if (t * 1e3 > pt.binding_exposed_ms) {
            pt.binding = name;
            pt.binding_exposed_ms = t * 1e3;
        }
}

}  // namespace

Result<NeedPoint> need_evaluate(const NeedProblem& p, double x) {
    Topology t = p.topology;
    DsConfig cfg = p.cfg;
    int64_t nodes = p.nodes > 0 ? p.nodes : t.nodes;
    switch (p.quantity) {
        case NeedQuantity::InterNodeBandwidth:
            if (t.nics_per_node <= 0)
                return Error{t.source, "nics", "the node design has no NICs: there is no inter-node bandwidth to solve for"};
            t.nic_bandwidth_gbs = x * static_cast<double>(t.gpus_per_node) / t.nics_per_node;
            break;
        case NeedQuantity::Nodes: nodes = std::llround(x); break;
        case NeedQuantity::ReduceBucketSize: cfg.zero.reduce_bucket_size = std::llround(x); break;
        case NeedQuantity::PrefetchBucketSize: cfg.zero.prefetch_bucket_size = std::llround(x); break;
    }
    auto scaled = scale_to_nodes(t, nodes);
    if (!scaled) return scaled.error();
    const Topology& topo = scaled.value();
    ScheduleOptions o;
    o.world = topo.total_gpus();
    o.steps = p.steps;
    o.seq_len = p.seq_len;
    o.zero_init = p.zero_init && cfg.zero.stage == 3;
    o.activation_checkpointing = p.activation_checkpointing;
    o.overflow_steps = p.overflow_steps;
    o.max_ops = p.max_ops;
    o.max_bytes = p.max_bytes;
    o.gpus_per_node = topo.gpus_per_node;   // qgZ's node groups, as predict gives them
    auto s = build_schedule(p.model, cfg, o);
    if (!s) return s.error();
    if (!p.what_if.empty())   // refused by name where it does not apply to the stage
        if (auto changed = apply_what_if(p.what_if, s.value()); !changed) return changed.error();
    auto pred = simulate_point(s.value(), topo, gathered_parameter_budget(p.model, cfg, s.value(), topo), p.fabric);
    if (!pred) return pred.error();
    const StepTiming& last = pred->steps.back();
    NeedPoint pt;
    pt.x = x;
    pt.world = o.world;
    pt.step_ms = last.step_s() * 1e3;
    pt.compute_ms = last.compute_s * 1e3;
    pt.comm_ms = last.comm_s * 1e3;
    pt.exposed_ms = last.exposed_comm_s * 1e3;
    attribute_exposed(s.value(), pred.value(), last.step, pt);
    pt.fit = point_fit(p.model, cfg, s.value(), topo, p.activation_checkpointing);   // predict's fit line at this probe
    return pt;
}

namespace {

// A node count the batch allows, the nearest to x strictly between a and b (in either order);
// nullopt where there is none. Without allowed_nodes, x rounded as before.
std::optional<double> allowed_between(const NeedAnswer& a, double x, double g, double b) {
    const double lo = std::min(g, b), hi = std::max(g, b);
    if (a.allowed_nodes.empty()) {
        double m = std::round(x);
        if (m == g || m == b) m = std::floor((g + b) / 2);
        return m > lo && m < hi ? std::optional<double>(m) : std::nullopt;
    }
    std::optional<double> best;
    for (double n : a.allowed_nodes)
        if (n > lo && n < hi && (!best || std::fabs(n - x) < std::fabs(*best - x))) best = n;
    return best;
}

// --solve nodes under a config that fixes train_batch_size: the range narrowed to the node counts
// whose world the batch allows (world x micro batch x accumulation = train_batch_size), else an
// error naming the batch and the range.
Status need_allowed_nodes(const NeedProblem& p, NeedAnswer& a) {
    if (p.quantity != NeedQuantity::Nodes || !p.cfg.train_batch) return std::nullopt;
    for (double n = a.lo; n <= a.hi; ++n)
        if (resolve_batch(p.cfg, static_cast<int64_t>(n) * p.topology.gpus_per_node).ok()) a.allowed_nodes.push_back(n);
    if (a.allowed_nodes.empty())
        return Error{p.cfg.source, "train_batch_size",
                     std::to_string(*p.cfg.train_batch) + " is divisible by no world of " + std::to_string(static_cast<int64_t>(a.lo)) +
                         ".." + std::to_string(static_cast<int64_t>(a.hi)) + " nodes x " + std::to_string(p.topology.gpus_per_node) +
                         " GPUs (with its micro batch and accumulation); widen --range or change the batch"};
    a.lo = a.allowed_nodes.front();
    a.hi = a.allowed_nodes.back();
    return std::nullopt;
}

// One more prediction of the search, counted in the answer.
Result<NeedPoint> need_evaluate_counted(const NeedProblem& p, NeedAnswer& a, double x) {
    ++a.predictions;
    return need_evaluate(p, x);
}

bool need_target_met(const NeedProblem& p, const NeedPoint& pt) { return metric(p, pt) <= p.target_value; }

// Neither end of the range meets the target: the error says what each end gives.
Error need_unreachable_error(const NeedProblem& p, const NeedAnswer& a, const NeedPoint& at_lo, const NeedPoint& at_hi) {
    const char* unit = p.target == NeedTarget::ExposedPercent ? "% exposed" : " ms per step";
    char msg[400];
    std::snprintf(msg, sizeof msg, "cannot be reached in %g..%g %s: %.4g%s at %g, %.4g%s at %g (target %g%s)", a.lo, a.hi,
                  need_quantity_unit(p.quantity), metric(p, at_lo), unit, a.lo, metric(p, at_hi), unit, a.hi,
                  p.target_value, unit);
    return Error{"", p.target == NeedTarget::ExposedPercent ? "--exposed-below" : "--step-below", msg};
}

// The answer between the range's ends, at least one of which meets the target: the cheaper end
// when both do, else the boundary the bisection finds.
Status need_find_answer(const NeedProblem& p, NeedAnswer& a, const NeedPoint& at_lo, const NeedPoint& at_hi) {
    if (need_target_met(p, at_lo) && need_target_met(p, at_hi)) {
        a.outcome = NeedOutcome::MetEverywhere;
        // The cheaper end: the least bandwidth or bucket, the most nodes.
        a.met_above = p.quantity != NeedQuantity::Nodes;
        a.at = a.met_above ? at_lo : at_hi;
        a.answer = a.at.x;
        return std::nullopt;
    }
    a.met_above = need_target_met(p, at_hi);
    NeedPoint good = a.met_above ? at_hi : at_lo;
    NeedPoint bad = a.met_above ? at_lo : at_hi;
    // Geometric bisection (the quantities span decades) until the bracket is within the
    // tolerance of its value, or one apart for integers.
    while (true) {
        double g = good.x, b = bad.x;
        if (exact(p.quantity) ? std::fabs(g - b) <= 1 : std::max(g, b) / std::min(g, b) <= 1 + p.tolerance) break;
        double mid = std::sqrt(g * b);
        if (integral(p.quantity)) {
            const auto m = allowed_between(a, mid, g, b);
            if (!m) break;
            mid = *m;
        }
        auto m = need_evaluate_counted(p, a, mid);
        if (!m) return m.error();
        (need_target_met(p, m.value()) ? good : bad) = m.value();
    }
    a.at = good;
    a.answer = good.x;
    return std::nullopt;
}

// The curve: the range's ends, factors of 2 and 4 either side of the answer, the answer.
Status need_fill_curve(const NeedProblem& p, NeedAnswer& a, const NeedPoint& at_lo, const NeedPoint& at_hi) {
    std::vector<double> xs = {a.lo, a.hi, a.answer};
    for (double f : {0.25, 0.5, 2.0, 4.0}) {
        double x = a.answer * f;
        if (integral(p.quantity)) x = std::round(x);
        if (!a.allowed_nodes.empty()) {   // the nearest count the batch allows
            const auto m = allowed_between(a, x, a.lo, a.hi);
            if (!m) continue;
            x = *m;
        }
        if (x > a.lo && x < a.hi) xs.push_back(x);
    }
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    for (double x : xs) {
        if (x == a.lo) a.curve.push_back(at_lo);
        else if (x == a.hi) a.curve.push_back(at_hi);
        else if (x == a.at.x) a.curve.push_back(a.at);
        else {
            auto m = need_evaluate_counted(p, a, x);
            if (!m) return m.error();
            a.curve.push_back(m.value());
        }
    }
    return std::nullopt;
}

// Monotone within 0.5% of the metric's range: else the bisection found one crossing of several.
bool need_curve_monotone(const NeedProblem& p, const std::vector<NeedPoint>& curve) {
    double span = 0;
    for (const auto& c : curve) span = std::max(span, std::fabs(metric(p, c) - metric(p, curve.front())));
    int up = 0, down = 0;
    for (size_t i = 1; i < curve.size(); ++i) {
        double d = metric(p, curve[i]) - metric(p, curve[i - 1]);
        if (d > 0.005 * span) ++up;
        if (d < -0.005 * span) ++down;
    }
    return up == 0 || down == 0;
}

}  // namespace

Result<NeedAnswer> solve_need(const NeedProblem& p) {
    NeedAnswer a;
    a.lo = p.lo, a.hi = p.hi;
    if (a.lo <= 0 && a.hi <= 0) need_default_range(p.quantity, a.lo, a.hi);
    if (!(a.lo > 0 && a.hi > a.lo)) return Error{"", "--range", "expected LO:HI with 0 < LO < HI"};
    if (integral(p.quantity)) a.lo = std::ceil(a.lo), a.hi = std::floor(a.hi);
    if (auto e = need_allowed_nodes(p, a)) return *e;
    if (!(a.hi > a.lo)) return Error{p.cfg.source, "train_batch_size", "allows one node count in the range only: " + std::to_string(static_cast<int64_t>(a.lo)) + " nodes; widen --range"};
    auto at_lo = need_evaluate_counted(p, a, a.lo);
    if (!at_lo) return at_lo.error();
    auto at_hi = need_evaluate_counted(p, a, a.hi);
    if (!at_hi) return at_hi.error();
    if (!need_target_met(p, at_lo.value()) && !need_target_met(p, at_hi.value()))
        return need_unreachable_error(p, a, at_lo.value(), at_hi.value());
    if (auto failed = need_find_answer(p, a, at_lo.value(), at_hi.value())) return *failed;
    if (auto failed = need_fill_curve(p, a, at_lo.value(), at_hi.value())) return *failed;
    a.monotone = need_curve_monotone(p, a.curve);
    return a;
}

void write_need_text(std::ostream& out, const NeedProblem& p, const NeedAnswer& a) {
    const bool pct = p.target == NeedTarget::ExposedPercent;
    const bool bw = p.quantity == NeedQuantity::InterNodeBandwidth;
    char line[512];
    out << "need: " << need_quantity_name(p.quantity) << " for " << (pct ? "exposed communication at most " : "a step of at most ")
        << p.target_value << (pct ? "% of the step" : " ms") << "\n";
    out << "  " << p.model.name << ", ZeRO stage " << p.cfg.zero.stage << ", " << p.topology.name << " x "
        << (p.quantity == NeedQuantity::Nodes ? std::string("N") : std::to_string(p.nodes > 0 ? p.nodes : p.topology.nodes))
        << " nodes; the last of " << p.steps << " predicted steps\n";
    if (bw)
        out << "  bandwidth: per GPU and direction, line rate (NIC bandwidth x NICs per node / GPUs per node); the file has "
            << p.topology.nic_bandwidth_per_gpu_gbs() << " GB/s\n";
    auto fmt = [&](double x) {
        char b[64];
        if (bw) std::snprintf(b, sizeof b, "%.3g GB/s (%.0f Gb/s)", x, x * 8);
        else std::snprintf(b, sizeof b, "%.0f %s", x, need_quantity_unit(p.quantity));
        return std::string(b);
    };
    if (a.outcome == NeedOutcome::MetEverywhere)
        out << "answer: met over the whole range " << fmt(a.lo) << " to " << fmt(a.hi) << "; the boundary lies "
            << (a.met_above ? "below " : "above ") << fmt(a.answer) << " (widen --range to find it)\n";
    else
        out << "answer: " << fmt(a.answer) << (a.met_above ? " or more" : " or fewer") << "\n";
    std::snprintf(line, sizeof line,
                  "  at it: step %.1f ms, exposed communication %.1f ms (%.2f%%); binding collective %s, %.1f ms outside compute\n",
                  a.at.step_ms, a.at.exposed_ms, a.at.exposed_percent(), a.at.binding.empty() ? "none" : a.at.binding.c_str(),
                  a.at.binding_exposed_ms);
    out << line;
    out << "  " << fit_sentence(a.at.fit) << "\n";
    if (a.at.fit.known() && !a.at.fit.fits())
        out << "  warning: at the answer a rank does not fit its GPU: the answer is for memory it does not have "
               "(--activation-checkpointing, offload or more ranks change it)\n";
    if (p.quantity == NeedQuantity::Nodes && !a.allowed_nodes.empty())
        out << "  search: bisection over the " << a.allowed_nodes.size() << " node counts in " << a.lo << ".." << a.hi
            << " whose world train_batch_size " << *p.cfg.train_batch << " allows, exact; " << a.predictions << " predictions\n";
    else if (p.quantity == NeedQuantity::Nodes)
        out << "  search: bisection over " << a.lo << ".." << a.hi << " nodes, exact; " << a.predictions << " predictions\n";
    else
        out << "  search: geometric bisection over " << fmt(a.lo) << ".." << fmt(a.hi) << ", to within "
            << p.tolerance * 100 << "% of the value; " << a.predictions << " predictions\n";
    if (!a.monotone)
        out << "  warning: the metric is not monotone over this curve; the answer is one crossing of the target, "
               "there may be others\n";
    std::snprintf(line, sizeof line, "%14s %7s %12s %12s %12s %10s %9s %5s  %s\n", bw ? "GB/s per GPU" : need_quantity_unit(p.quantity),
                  "ranks", "step ms", "comm ms", "exposed ms", "exposed %", "GiB/rank", "fits", "binding collective (ms outside compute)");
    out << line;
    for (const auto& c : a.curve) {
        char x[32];
        std::snprintf(x, sizeof x, bw ? "%.3g" : "%.0f", c.x);
        std::snprintf(line, sizeof line, "%14s %7lld %12.1f %12.1f %12.1f %10.2f %9.2f %5s  %s (%.1f)%s\n", x,
                      static_cast<long long>(c.world), c.step_ms, c.comm_ms, c.exposed_ms, c.exposed_percent(),
                      static_cast<double>(c.fit.total()) / static_cast<double>(int64_t{1} << 30), c.fit.verdict().c_str(),
                      c.binding.empty() ? "none" : c.binding.c_str(), c.binding_exposed_ms, c.x == a.answer ? "  <- answer" : "");
        out << line;
    }
}

}  // namespace zerosim
