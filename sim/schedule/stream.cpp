// A long schedule as its first steps and the step that repeats (schedule/stream.hpp), and
// build_schedule on top of it: the op-count guard counts what the generator really emits.
#include "schedule/stream.hpp"

#include <algorithm>
#include <limits>

#include "build.hpp"
#include "schedule/bounds.hpp"

namespace zerosim {

namespace {

// An op of a template step as it stands `steps` steps (and `by` ops) later. `into` is reused, so
// the copy takes no new memory once its vectors have grown.
void move_op(const Op& o, int steps, int64_t by, Op& into) {
    into = o;
    into.id += by;
    into.step += steps;
    for (auto& d : into.deps) d += by;
}

void move_event(const HostEvent& e, int steps, int64_t by, HostEvent& into) {
    into = e;
    into.step += steps;
    into.first_op += by;
    for (auto& w : into.waits) w += by;
}

// Where each step begins in `items` (ops or host events, ordered by step, the engine start's -1
// first): the first item of step k or later, k = 0 .. steps; empty where they are out of order.
template <typename T>
std::vector<int64_t> step_starts(const std::vector<T>& items, int steps) {
    for (size_t i = 0; i < items.size(); ++i)
        if (items[i].step < -1 || items[i].step >= steps || (i > 0 && items[i].step < items[i - 1].step)) return {};
    std::vector<int64_t> start(static_cast<size_t>(steps) + 1, static_cast<int64_t>(items.size()));
    for (int k = steps; k-- > 0;)
        for (size_t i = 0; i < items.size(); ++i)
            if (items[i].step >= k) {
                start[static_cast<size_t>(k)] = static_cast<int64_t>(i);
                break;
            }
    return start;
}

// Whether template step r + 1 is step r moved by one step (every field; deps, first_op and waits
// by one step's ops), and the last step waits only on ops from step r on (so that it can move too).
bool step_repeats(const Schedule& t, const std::vector<int64_t>& ops, const std::vector<int64_t>& host, int r) {
    const auto at = [](int k) { return static_cast<size_t>(k); };
    const int64_t P = ops[at(r + 1)] - ops[at(r)], H = host[at(r + 1)] - host[at(r)];
    if (P <= 0 || ops[at(r + 2)] - ops[at(r + 1)] != P || host[at(r + 2)] - host[at(r + 1)] != H) return false;
    Op op;
    for (int64_t i = 0; i < P; ++i) {
        move_op(t.ops[static_cast<size_t>(ops[at(r)] + i)], 1, P, op);
        if (!(op == t.ops[static_cast<size_t>(ops[at(r + 1)] + i)])) return false;
    }
    HostEvent ev;
    for (int64_t i = 0; i < H; ++i) {
        move_event(t.host[static_cast<size_t>(host[at(r)] + i)], 1, P, ev);
        if (!(ev == t.host[static_cast<size_t>(host[at(r + 1)] + i)])) return false;
    }
    const int64_t from = ops[at(r)];
    for (size_t i = static_cast<size_t>(ops[at(kTemplateSteps - 1)]); i < t.ops.size(); ++i)
        for (int64_t d : t.ops[i].deps)
            if (d < from) return false;
    for (size_t i = static_cast<size_t>(host[at(kTemplateSteps - 1)]); i < t.host.size(); ++i) {
        if (t.host[i].first_op < from) return false;
        for (int64_t w : t.host[i].waits)
            if (w < from) return false;
    }
    return true;
}

// The first step from which the template's steps repeat, up to the one before its last; 0: none.
int repeating_step(const Schedule& t, const std::vector<int64_t>& ops, const std::vector<int64_t>& host) {
    if (ops.empty() || host.empty()) return 0;
    for (int r = 1; r + 2 < kTemplateSteps; ++r)
        if (step_repeats(t, ops, host, r)) return r;
    return 0;
}

// Items of a template (op or host-event starts `start`) handed out for a run of `steps` steps:
// the engine start and the steps before `r` as built, step r for steps r .. steps-2, the last
// step moved to steps-1. `visit` also gets the item's index in the template and the steps it moved.
template <typename T, typename Move, typename Visit>
void repeat_items(const std::vector<T>& items, const std::vector<int64_t>& start, int r, int64_t per_step_ops, int steps,
                  Move move, Visit visit) {
    const auto at = [](int k) { return static_cast<size_t>(k); };
    for (int64_t i = 0; i < start[at(r)]; ++i) visit(items[static_cast<size_t>(i)], i, 0);
    T moved;
    for (int k = r; k + 1 < steps; ++k)
        for (int64_t i = start[at(r)]; i < start[at(r + 1)]; ++i) {
            move(items[static_cast<size_t>(i)], k - r, static_cast<int64_t>(k - r) * per_step_ops, moved);
            visit(moved, i, k - r);
        }
    const int shift = steps - kTemplateSteps;
    for (size_t i = static_cast<size_t>(start[at(kTemplateSteps - 1)]); i < items.size(); ++i) {
        move(items[i], shift, static_cast<int64_t>(shift) * per_step_ops, moved);
        visit(moved, static_cast<int64_t>(i), shift);
    }
}

// Items a run of `steps` holds, from a template's starts: saturating (steps is at most INT32_MAX).
int64_t repeated_count(const std::vector<int64_t>& start, int r, int64_t total, int steps) {
    const int64_t per = start[static_cast<size_t>(r + 1)] - start[static_cast<size_t>(r)];
    int64_t middle;
    if (__builtin_mul_overflow(per, static_cast<int64_t>(steps - 1 - r), &middle)) return std::numeric_limits<int64_t>::max();
    int64_t n = start[static_cast<size_t>(r)] + (total - start[static_cast<size_t>(kTemplateSteps - 1)]);
    return __builtin_add_overflow(n, middle, &n) ? std::numeric_limits<int64_t>::max() : n;
}

}  // namespace

struct StreamBuilder {
    static Schedule take(ScheduleStream& s) { return std::move(*s.owned_); }
    static ScheduleStream whole(Schedule s) {
        ScheduleStream out;
        auto owned = std::make_shared<Schedule>(std::move(s));
        out.meta_ = owned->meta;
        out.steps_ = owned->meta.steps;
        out.held_ = owned.get();
        out.owned_ = std::move(owned);
        return out;
    }
    // The template as a stream of `steps` steps where it repeats; nullopt where it does not.
    static std::optional<ScheduleStream> repeating(Schedule t, int steps) {
        auto ops = step_starts(t.ops, kTemplateSteps), host = step_starts(t.host, kTemplateSteps);
        const int r = repeating_step(t, ops, host);
        if (r == 0) return std::nullopt;
        ScheduleStream out = whole(std::move(t));
        out.repeats_ = true;
        out.repeat_ = r;
        out.steps_ = steps;
        out.meta_.steps = steps;
        out.op_start_ = std::move(ops);
        out.host_start_ = std::move(host);
        return out;
    }
};

ScheduleStream ScheduleStream::of(const Schedule& s) {
    ScheduleStream out;
    out.held_ = &s;
    out.meta_ = s.meta;
    out.steps_ = s.meta.steps;
    return out;
}

int64_t ScheduleStream::per_step_ops() const {
    return op_start_[static_cast<size_t>(repeat_) + 1] - op_start_[static_cast<size_t>(repeat_)];
}

int64_t ScheduleStream::op_count() const {
    const auto total = static_cast<int64_t>(held_->ops.size());
    return repeats_ ? repeated_count(op_start_, repeat_, total, steps_) : total;
}

int64_t ScheduleStream::host_event_count() const {
    const auto total = static_cast<int64_t>(held_->host.size());
    return repeats_ ? repeated_count(host_start_, repeat_, total, steps_) : total;
}

void ScheduleStream::each_op(const std::function<void(const Op&)>& visit) const {
    if (!repeats_) {
        for (const Op& op : held_->ops) visit(op);
        return;
    }
    repeat_items(held_->ops, op_start_, repeat_, per_step_ops(), steps_, move_op,
                 [&](const Op& op, int64_t, int) { visit(op); });
}

void ScheduleStream::each_op_from(const std::function<void(const Op&, int64_t, int)>& visit) const {
    if (!repeats_) {
        for (size_t i = 0; i < held_->ops.size(); ++i) visit(held_->ops[i], static_cast<int64_t>(i), 0);
        return;
    }
    repeat_items(held_->ops, op_start_, repeat_, per_step_ops(), steps_, move_op, visit);
}

void ScheduleStream::each_host_event(const std::function<void(const HostEvent&)>& visit) const {
    if (!repeats_) {
        for (const HostEvent& e : held_->host) visit(e);
        return;
    }
    repeat_items(held_->host, host_start_, repeat_, per_step_ops(), steps_, move_event,
                 [&](const HostEvent& e, int64_t, int) { visit(e); });
}

ScheduleStream::Count ScheduleStream::count() const {
    auto bytes_of = [&](int64_t from, int64_t to) {
        int64_t b = 0;
        for (int64_t i = from; i < to; ++i) b += op_memory_estimate(held_->ops[static_cast<size_t>(i)]);
        return b;
    };
    const auto total = static_cast<int64_t>(held_->ops.size());
    Count c{op_count(), bytes_of(0, total)};
    if (!repeats_) return c;
    // Moving an op to a later step changes none of its sizes: each step the template lacks is step r's.
    const auto r = static_cast<size_t>(repeat_);
    const int64_t per_step = bytes_of(op_start_[r], op_start_[r + 1]);
    int64_t middle;
    if (__builtin_mul_overflow(per_step, static_cast<int64_t>(steps_ - kTemplateSteps), &middle) ||
        __builtin_add_overflow(c.bytes, middle, &c.bytes))
        c.bytes = std::numeric_limits<int64_t>::max();
    return c;
}

Result<ScheduleStream> ScheduleStream::open(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt,
                                            bool whole_in_memory) {
    // Built under the default limits at least, the work any schedule may take unasked, and counted
    // while built (bounds.hpp check_schedule_size), so that the caller's limits meet the exact count
    // below rather than the estimate's bound.
    ScheduleOptions guarded = opt;
    guarded.max_ops = std::max(opt.max_ops, kDefaultMaxOps);
    guarded.max_bytes = std::max(opt.max_bytes, kDefaultMaxScheduleBytes);
    // Counted while built: the estimate's upper bound can be several times the real count (a stage-3
    // micro-step's gathers are bounded per module call, most calls gather in one), and a template
    // within the limits must not be refused by it.
    guarded.count_while_building = true;
    const bool long_run = opt.steps > kTemplateSteps && opt.overflow_steps.empty();
    // A run whose template would have to be counted while built (its estimate past the limits) and
    // whose whole estimate is far past them is refused at once; a template within them is built and
    // counts the run exactly, however long (a 3D rank's program is estimated on its own model, by
    // the builder).
    if (long_run) {
        auto batch = resolve_batch(cfg, opt.world);
        ScheduleOptions first = guarded;
        first.steps = kTemplateSteps;
        first.count_while_building = false;
        if (batch && !opt.layout.is_3d() && model.parallel.moe.empty() && check_schedule_size(model, cfg, first, batch->grad_accum))
            if (auto e = check_schedule_size(model, cfg, guarded, batch->grad_accum)) return *e;
        guarded.steps = kTemplateSteps;
        guarded.steps_in_run = opt.steps;
    }
    auto built = detail::build_whole(model, cfg, guarded);
    if (!built) return built.error();
    const size_t params = built->params.size();
    std::optional<ScheduleStream> stream;
    if (long_run) stream = StreamBuilder::repeating(std::move(built).value(), opt.steps);
    if (long_run && !stream) {   // no step like the next: the whole run
        guarded.steps = opt.steps;
        built = detail::build_whole(model, cfg, guarded);
        if (!built) return built.error();
    }
    if (!stream) stream = StreamBuilder::whole(std::move(built).value());
    // Counted exactly; the memory is what is held: the whole run, or only the template.
    const Count whole = stream->count();
    int64_t held = 0;
    for (const Op& op : stream->held_->ops) held += op_memory_estimate(op);
    const int64_t bytes = whole_in_memory || !stream->repeats() ? whole.bytes : held;
    if (auto e = check_counted_size(whole.ops, bytes, params, stream->meta(), opt)) return *e;
    return std::move(stream).value();
}

Result<Schedule> build_schedule(const Model& model, const DsConfig& cfg, const ScheduleOptions& opt) {
    auto s = ScheduleStream::open(model, cfg, opt, true);
    if (!s) return s.error();
    if (!s->repeats()) return StreamBuilder::take(s.value());
    // Counted above: the generator runs on every step without its estimate's bounds.
    ScheduleOptions counted = opt;
    counted.max_ops = std::numeric_limits<int64_t>::max();
    counted.max_bytes = std::numeric_limits<int64_t>::max();
    return detail::build_whole(model, cfg, counted);
}

}  // namespace zerosim
