#include "executor/executor.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include "backends/dtype.hpp"
#include "executor/watchdog.hpp"
#include "inputs/model.hpp"
#include "schedule/ordering.hpp"
#include "schedule/partition.hpp"

namespace zerorun {

using zerosim::ComputeKind;
using zerosim::Op;
using zerosim::OpKind;
using zerosim::Phase;
using zerosim::Schedule;
using zerosim::Segment;

namespace {

double wall_us() {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::string op_label(const Op& op) {
    std::string s = "op " + std::to_string(op.id) + " " +
                    (op.kind == OpKind::Compute ? std::string(zerosim::compute_kind_name(op.compute))
                                                : std::string(zerosim::op_record_name(op.kind)));
    if (!op.caller.empty()) s += " [" + op.caller + "]";
    s += ", step " + std::to_string(op.step);
    return s;
}

[[noreturn]] void broken(const Op& op, const std::string& what) {
    throw std::runtime_error("schedule " + op_label(op) + ": " + what);
}

// How the fp32 master weights, Adam moments and reduced gradients are cut (schedule/partition.hpp):
//  Replicated: every rank holds everything (stage 0 without the BF16 optimizer);
//  Flat: each parameter group flattened and cut into `world` equal partitions (stages 1/2 and the
//        BF16 optimizer), the layout flat_group_layout gives;
//  PerParam: each parameter cut on its own into ceil(numel/world) shards (stage 3).
enum class Layout { Replicated, Flat, PerParam };

// A contiguous run of fp32 optimizer state this rank owns: one per parameter (Replicated,
// PerParam) or per parameter group (Flat).
struct Unit {
    int64_t size = 0;
    std::vector<int> params;
    Buffer master, m, v, grad;
    int adam_t = 0;
    int grad_step = -1000;     // the step whose gradients `grad` holds
};

// Where parameter p's owned elements [lo, hi) sit: unit index = base + element.
struct Owned {
    int unit = -1;
    int64_t base = 0, lo = 0, hi = 0;
};

// Inputs of ops whose payload the runtime does not model (norms, overflow flags, trace lists):
// small integers, exact under any reduction order, so the result check is exact.
double pattern_value(DType t, int r, int64_t i) {
    int64_t v = (static_cast<int64_t>(r) * 7 + i * 3) % 11;
    return t == DType::UINT8 ? static_cast<double>(v % 5) : static_cast<double>(v - 5);
}

zerosim::Model layout_model(const Schedule& s) {
    zerosim::Model m;
    for (const auto& p : s.params) {
        zerosim::Parameter q;
        q.name = p.name;
        q.shape = p.shape;
        q.numel = p.numel;
        q.group = p.group;
        m.params.push_back(q);
    }
    m.num_groups = s.meta.num_groups;
    return m;
}

Layout layout_of(const Schedule& s) {
    if (s.meta.stage == 3) return Layout::PerParam;
    for (const auto& op : s.ops)
        if (op.kind == OpKind::Compute && op.compute == ComputeKind::OptimizerStep)
            return op.param_group < 0 ? Layout::Replicated : Layout::Flat;
    return Layout::Replicated;
}

class Executor {
  public:
    Executor(Backend& be, const Schedule& s, const RunArgs& a, MemoryTracker& mem)
        : be_(be), s_(s), a_(a), mem_(mem), rank_(be.rank()), world_(be.world()), layout_(layout_of(s)),
          model_(layout_model(s)) {
        spec_.seed = a.seed;
        spec_.world = world_;
        spec_.grad_accum = s.meta.grad_accum;
        spec_.model_dtype = s.meta.model_dtype;
        spec_.comm_dtype = s.meta.comm_dtype;
        spec_.lr = a.lr;
        adam_.lr = a.lr;
        verify_ = !a.no_verify;
        if (verify_) shadow_ = std::make_unique<Reference>(s.params, spec_);
        build_state();
        plan_waits();
        records_.resize(s.ops.size());
    }

    RankResult run() {
        done_ = std::make_unique<std::atomic<int>[]>(s_.ops.size());
        for (size_t i = 0; i < s_.ops.size(); ++i) done_[i].store(0);
        Watchdog dog(be_, a_.timeout_s, [this] {
            int64_t id = comm_at_.load();
            return id >= 0 ? op_label(s_.ops[id]) : std::string("start-up");
        });
        watchdog_ = &dog;
        if (a_.sync_each_op) {
            // Every op waits for the one before (DeepSpeed's logger synchronises after each op):
            // nothing can overlap, so one thread runs them all in IR order, without a hand-over
            // between threads (and its wake-up) before each op.
            std::vector<int64_t> all;
            for (const auto& op : s_.ops) all.push_back(op.id);
            worker(all);
        } else {
            // Collectives on their own thread, in IR order (every rank issues them in the same
            // order, as MPI requires); compute segments on another, so overlap is real.
            std::vector<int64_t> compute_ops, comm_ops;
            for (const auto& op : s_.ops) (op.kind == OpKind::Compute ? compute_ops : comm_ops).push_back(op.id);
            std::thread compute([&] { worker(compute_ops); });
            worker(comm_ops);
            compute.join();
        }
        dog.stop();
        watchdog_ = nullptr;
        RankResult r;
        r.ops = records_;
        r.memory = &mem_;
        r.peak_rss = peak_rss_bytes();
        for (const auto& rec : records_) r.wrong_total += rec.wrong;
        return r;
    }

    void dump_weights(const std::string& prefix) const {
        // Stage 0 holds everything everywhere: rank 0 speaks for all.
        if (layout_ == Layout::Replicated && rank_ != 0) return;
        std::ofstream f(dump_path(prefix, rank_), std::ios::binary);
        for (size_t p = 0; p < s_.params.size(); ++p) {
            const Owned& o = owned_[p];
            if (o.hi <= o.lo) continue;
            int32_t pi = static_cast<int32_t>(p);
            int64_t off = o.lo, n = o.hi - o.lo;
            f.write(reinterpret_cast<const char*>(&pi), 4);
            f.write(reinterpret_cast<const char*>(&off), 8);
            f.write(reinterpret_cast<const char*>(&n), 8);
            f.write(reinterpret_cast<const char*>(units_[o.unit].master.as<float>() + o.base + o.lo), n * 4);
        }
        if (!f) throw std::runtime_error("cannot write " + dump_path(prefix, rank_));
    }

  private:
    Backend& be_;
    const Schedule& s_;
    const RunArgs& a_;
    MemoryTracker& mem_;
    const int rank_, world_;
    const Layout layout_;
    const zerosim::Model model_;
    LossSpec spec_;
    AdamParams adam_;
    bool verify_ = true;
    std::unique_ptr<Reference> shadow_;
    int shadow_step_ = -1;

    // Parameters.
    std::vector<Buffer> work_;             // full working copy, model dtype
    std::vector<Buffer> shard_;            // stage 3: this rank's shard, model dtype
    std::vector<int64_t> updates_;         // optimizer updates applied to p (on every rank)
    std::vector<int64_t> work_version_;    // updates reflected in work_[p]
    std::vector<int64_t> part_;            // stage 3 shard size
    std::vector<zerosim::FlatGroupLayout> flat_;
    // Gradients.
    std::vector<Buffer> acc_;              // fp32 local gradient, from backward until reduced
    std::vector<std::vector<int>> pending_;  // micro-steps accumulated in acc_
    std::vector<int64_t> reduced_;         // elements of acc_ already sent
    std::vector<int64_t> computed_at_;     // (step, micro) key of the last gradient computed
    // Optimizer state.
    std::vector<Unit> units_;
    std::vector<Owned> owned_;
    std::vector<size_t> perparam_cursor_;  // stage 3: per group, next parameter an optimizer op covers
    int cursor_step_ = -1;
    // Compute workspace.
    Buffer gemm_a_, gemm_b_, gemm_c_;
    int64_t gemm_n_ = 0;

    // Scheduling.
    std::vector<std::vector<int64_t>> waits_;
    std::unique_ptr<std::atomic<int>[]> done_;
    std::vector<OpRecord> records_;
    std::atomic<int64_t> comm_at_{-1};
    Watchdog* watchdog_ = nullptr;

    int64_t numel(int p) const { return s_.params[p].numel; }
    DType mdt() const { return s_.meta.model_dtype; }

    void build_state() {
        const size_t P = s_.params.size();
        work_.resize(P);
        updates_.assign(P, 0);
        work_version_.assign(P, 0);
        acc_.resize(P);
        pending_.resize(P);
        reduced_.assign(P, 0);
        computed_at_.assign(P, -1);
        owned_.resize(P);
        part_.assign(P, 0);
        const int es = zerosim::dtype_size(mdt());
        for (size_t p = 0; p < P; ++p) {
            work_[p] = Buffer(mem_, MemCat::Parameters, static_cast<size_t>(numel(p)) * es);
            // Only rank 0 starts with the real model; the engine-start broadcast must bring it to
            // the others, or every later check fails.
            for (int64_t i = 0; i < numel(p); ++i)
                store_element(work_[p].data(), mdt(), i,
                              rank_ == 0 ? initial_weight(a_.seed, static_cast<int>(p), i)
                                         : garbage_weight(rank_, static_cast<int>(p), i));
        }
        auto new_unit = [&](int64_t size) {
            Unit u;
            u.size = size;
            size_t b = static_cast<size_t>(size) * 4;
            u.master = Buffer(mem_, MemCat::OptimizerStates, b);
            u.m = Buffer(mem_, MemCat::OptimizerStates, b);
            u.v = Buffer(mem_, MemCat::OptimizerStates, b);
            u.grad = Buffer(mem_, MemCat::Gradients, b);
            units_.push_back(std::move(u));
            return static_cast<int>(units_.size() - 1);
        };
        if (layout_ == Layout::Replicated) {
            for (size_t p = 0; p < P; ++p) {
                int u = new_unit(numel(p));
                units_[u].params = {static_cast<int>(p)};
                owned_[p] = {u, 0, 0, numel(p)};
            }
        } else if (layout_ == Layout::Flat) {
            for (int g = 0; g < s_.meta.num_groups; ++g) {
                flat_.push_back(zerosim::flat_group_layout(model_, g, world_, s_.meta.round_robin_gradients));
                const auto& L = flat_.back();
                int u = new_unit(L.partition_size);
                units_[u].params = L.order;
                for (int p : L.order) {
                    int64_t base = L.flat_offset.at(p) - static_cast<int64_t>(rank_) * L.partition_size;
                    int64_t lo = std::clamp<int64_t>(-base, 0, numel(p));
                    int64_t hi = std::clamp<int64_t>(L.partition_size - base, lo, numel(p));
                    owned_[p] = {u, base, lo, hi};
                }
            }
        } else {
            shard_.resize(P);
            for (size_t p = 0; p < P; ++p) {
                part_[p] = zerosim::stage3_partition_numel(numel(p), world_);
                shard_[p] = Buffer(mem_, MemCat::Parameters, static_cast<size_t>(part_[p]) * es);
                int u = new_unit(part_[p]);
                units_[u].params = {static_cast<int>(p)};
                int64_t lo = std::min(numel(p), rank_ * part_[p]);
                int64_t hi = std::min(numel(p), (rank_ + 1) * part_[p]);
                owned_[p] = {u, -rank_ * part_[p], lo, hi};
            }
        }
        for (size_t p = 0; p < P; ++p) take_initial_value(static_cast<int>(p));
    }

    // The working copy of p now holds the initial model: the fp32 master (and stage 3's shard)
    // start from it, as DeepSpeed's optimizer builds its fp32 partitions from the broadcast model.
    void take_initial_value(int p) {
        const Owned& o = owned_[p];
        float* master = units_[o.unit].master.as<float>();
        for (int64_t i = o.lo; i < o.hi; ++i) master[o.base + i] = static_cast<float>(load_element(work_[p].data(), mdt(), i));
        if (layout_ == Layout::PerParam) refresh_shard(p);
    }

    void refresh_shard(int p) {
        const Owned& o = owned_[p];
        const float* master = units_[o.unit].master.as<float>();
        for (int64_t j = 0; j < part_[p]; ++j) {
            int64_t i = rank_ * part_[p] + j;
            store_element(shard_[p].data(), mdt(), j, i < numel(p) ? master[o.base + i] : 0.0);
        }
    }

    // ---- Scheduling: what each op waits for: executor_wait_plan, nothing of the executor's own.
    void plan_waits() { waits_ = executor_wait_plan(s_); }

    void worker(const std::vector<int64_t>& list) {
        try {
            for (int64_t id : list) {
                for (int64_t w : waits_[id])
                    while (done_[w].load(std::memory_order_acquire) == 0) done_[w].wait(0, std::memory_order_acquire);
                const Op& op = s_.ops[id];
                const bool is_comm = op.kind != OpKind::Compute;
                if (is_comm) {
                    comm_at_.store(id);
                    set_current_op(id, zerosim::op_record_name(op.kind));
                }
                maybe_fail_on_purpose(op);
                OpRecord& rec = records_[id];
                rec.start_us = wall_us();
                if (is_comm) run_collective(op, rec);
                else run_compute(op, rec);
                rec.end_us = wall_us();
                done_[id].store(1, std::memory_order_release);
                done_[id].notify_all();
                if (watchdog_) watchdog_->progress();
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "zerorun: error: rank %d: %s\n", rank_, e.what());
            std::fflush(stderr);
            be_.abort(2);
        }
    }

    void maybe_fail_on_purpose(const Op& op) {
        if (rank_ != a_.test_fail_rank || op.id != a_.test_fail_op) return;
        if (a_.test_fail_mode == "delay") {
            // A late rank, not a failed one: its peers wait for it inside the collective.
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
            return;
        }
        std::fprintf(stderr, "zerorun: rank %d: --test-fail-op: %s before %s\n", rank_,
                     a_.test_fail_mode == "hang" ? "hanging" : "exiting", op_label(op).c_str());
        std::fflush(stderr);
        if (a_.test_fail_mode == "hang") {
            // A hung process cannot be trusted to notice itself (think SIGSTOP or a stuck driver):
            // its own watchdog stands down so that the peers' watchdogs are what the test exercises.
            if (watchdog_) watchdog_->stop();
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        _exit(0);
    }

    // ---- Compute segments ----

    void run_compute(const Op& op, OpRecord& rec) {
        switch (op.compute) {
            case ComputeKind::Forward:
                require_current(op);
                rec.flops_run = gemm(op.flops);
                rec.check = "none";
                break;
            case ComputeKind::Backward:
                require_current(op);
                rec.flops_run = gemm(op.flops);
                backward_gradients(op);
                rec.check = "none";
                break;
            case ComputeKind::OptimizerStep:
                optimizer_step(op, rec);
                break;
            case ComputeKind::None:
                break;
        }
    }

    // A module may only run on weights that reflect every optimizer update: a missing gather in
    // the schedule shows up here, not as silently stale training.
    void require_current(const Op& op) {
        for (int p : op.params)
            if (work_version_[p] != updates_[p])
                broken(op, "parameter " + s_.params[p].name + " is used while its working copy is stale (" +
                               std::to_string(work_version_[p]) + " of " + std::to_string(updates_[p]) +
                               " updates gathered)");
    }

    // Real GEMM work of the segment's FLOPs times --compute-scale: square matrices of at most
    // 512, repeated as needed (2 n^3 FLOPs each).
    double gemm(double flops) {
        double want = flops * a_.compute_scale;
        if (want < 2.0 * 16 * 16 * 16) return 0.0;
        constexpr int64_t kMax = 512;
        int64_t n = std::min<int64_t>(kMax, static_cast<int64_t>(std::cbrt(want / 2.0)));
        if (gemm_n_ < n) {
            size_t b = static_cast<size_t>(n * n) * 4;
            gemm_a_ = Buffer(mem_, MemCat::Workspace, b);
            gemm_b_ = Buffer(mem_, MemCat::Workspace, b);
            gemm_c_ = Buffer(mem_, MemCat::Workspace, b);
            for (int64_t i = 0; i < n * n; ++i) {
                gemm_a_.as<float>()[i] = static_cast<float>(i % 13) * 0.01f;
                gemm_b_.as<float>()[i] = static_cast<float>(i % 7) * 0.01f;
            }
            gemm_n_ = n;
        }
        using Mat = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>>;
        Mat A(gemm_a_.as<float>(), n, n), B(gemm_b_.as<float>(), n, n), C(gemm_c_.as<float>(), n, n);
        double per = 2.0 * static_cast<double>(n * n * n);
        int64_t reps = std::max<int64_t>(1, std::llround(want / per));
        for (int64_t r = 0; r < reps; ++r) C.noalias() = A * B;
        return per * static_cast<double>(reps);
    }

    // The loss's gradient w - t, from this rank's working copy, added to the local accumulator.
    // A tied parameter appears in several modules; its gradient is one per micro-step.
    void backward_gradients(const Op& op) {
        int64_t key = static_cast<int64_t>(op.step) * 1000000 + op.micro;
        for (int p : op.params) {
            if (computed_at_[p] == key) continue;
            computed_at_[p] = key;
            if (acc_[p].empty()) acc_[p] = Buffer(mem_, MemCat::Gradients, static_cast<size_t>(numel(p)) * 4);
            float* g = acc_[p].as<float>();
            const void* w = work_[p].data();
            for (int64_t i = 0; i < numel(p); ++i)
                g[i] += static_cast<float>(load_element(w, mdt(), i)) - target(a_.seed, rank_, op.step, op.micro, p, i);
            pending_[p].push_back(op.micro);
        }
    }

    std::vector<int> units_of_step(const Op& op) {
        std::vector<int> us;
        if (layout_ == Layout::Replicated) {
            if (op.param_group >= 0) broken(op, "a per-group optimizer step in a replicated (stage 0) layout");
            int64_t total = 0;
            for (size_t u = 0; u < units_.size(); ++u) {
                us.push_back(static_cast<int>(u));
                total += units_[u].size;
            }
            if (total != op.elements)
                broken(op, "covers " + std::to_string(op.elements) + " elements; the model has " + std::to_string(total));
        } else if (layout_ == Layout::Flat) {
            if (op.param_group < 0 || op.param_group >= static_cast<int>(flat_.size()))
                broken(op, "param_group " + std::to_string(op.param_group) + " is not a parameter group");
            const Unit& u = units_[op.param_group];
            if (u.size != op.elements)
                broken(op, "covers " + std::to_string(op.elements) + " elements; this group's partition has " +
                               std::to_string(u.size));
            us.push_back(op.param_group);
        } else {
            // Stage 3: optimizer sub-groups are runs of a group's parameters in registration
            // order; this op covers the next parameters of its group whose shards add up to its
            // elements.
            if (op.step != cursor_step_) {
                cursor_step_ = op.step;
                perparam_cursor_.assign(static_cast<size_t>(std::max(1, s_.meta.num_groups)), 0);
            }
            if (op.param_group < 0 || op.param_group >= static_cast<int>(perparam_cursor_.size()))
                broken(op, "param_group " + std::to_string(op.param_group) + " is not a parameter group");
            int64_t sum = 0;
            size_t& cursor = perparam_cursor_[op.param_group];
            size_t p = cursor;
            for (; p < s_.params.size() && sum < op.elements; ++p)
                if (s_.params[p].group == op.param_group) {
                    us.push_back(owned_[p].unit);
                    sum += part_[p];
                }
            cursor = p;
            if (sum != op.elements)
                broken(op, "covers " + std::to_string(op.elements) +
                               " elements; the shards of the next parameters of its group add up to " + std::to_string(sum));
        }
        return us;
    }

    void optimizer_step(const Op& op, OpRecord& rec) {
        std::vector<int> us = units_of_step(op);
        if (verify_ && shadow_step_ != op.step) {
            shadow_->step(op.step);
            shadow_step_ = op.step;
        }
        const float scale = 1.0f / static_cast<float>(world_ * s_.meta.grad_accum);
        for (int ui : us) {
            Unit& u = units_[ui];
            float* g = u.grad.as<float>();
            if (u.grad_step != op.step) std::fill(g, g + u.size, 0.0f);  // no gradient arrived
            for (int64_t i = 0; i < u.size; ++i) g[i] *= scale;
            adam_update(u.master.as<float>(), u.m.as<float>(), u.v.as<float>(), g, u.size, ++u.adam_t, adam_);
            std::fill(g, g + u.size, 0.0f);
            u.grad_step = -1000;
            for (int p : u.params) {
                ++updates_[p];
                if (layout_ == Layout::PerParam) refresh_shard(p);
                // Nothing gathers what every rank holds already: the working copy is updated here.
                if (layout_ == Layout::Replicated || world_ == 1) {
                    const Owned& o = owned_[p];
                    pack_floats(u.master.as<float>() + o.base + o.lo, static_cast<char*>(work_[p].data()),
                                mdt(), o.hi - o.lo);
                    work_version_[p] = updates_[p];
                }
            }
        }
        rec.flops_run = gemm(op.flops);
        rec.check = "none";
    }

    // ---- Collectives ----

    struct Check {
        int64_t checked = 0, wrong = 0;
        std::string first;   // the first wrong element, for the report
        void see(bool ok) {
            ++checked;
            if (!ok) ++wrong;
        }
        // `what` builds the message only for the first wrong element (no allocation per element).
        template <class F>
        void see(bool ok, F&& what) {
            see(ok);
            if (!ok && first.empty()) first = what();
        }
    };

    void finish(OpRecord& rec, const Check& c, bool has_output = true) {
        rec.checked = c.checked;
        rec.wrong = c.wrong;
        if (!has_output) rec.check = "none";
        else if (c.checked == 0) rec.check = "unchecked";
        else rec.check = c.wrong ? "wrong" : "ok";
        if (c.wrong)
            std::fprintf(stderr, "zerorun: rank %d: check failed: %s: %lld of %lld elements wrong%s%s\n", rank_,
                         op_label(s_.ops[&rec - records_.data()]).c_str(), static_cast<long long>(c.wrong),
                         static_cast<long long>(c.checked), c.first.empty() ? "" : "; first: ", c.first.c_str());
    }

    Buffer comm_buffer(int64_t elements, DType t) {
        return Buffer(mem_, MemCat::Buckets, static_cast<size_t>(elements) * zerosim::dtype_size(t));
    }

    // Tolerance for a gathered or broadcast weight against the shadow reference: its rounding in
    // the op's dtype, plus the drift a different reduction order leaves after this many updates.
    // fp32 sums differ in the last bits only. 16-bit gradients are rounded at other points by
    // some stages (per micro-step) than by the reference; where an element's true gradient is
    // below that rounding its sign can flip, and Adam then moves it by up to 2*lr per update.
    // Misplaced or stale data is off by the weights' own scale (~0.5), far beyond either.
    double weight_tolerance(DType t, double w, int64_t updates) const {
        double drift = static_cast<double>(a_.lr) * static_cast<double>(updates) * (t == DType::FP32 ? 1e-3 : 2.05);
        return 2.0 * ulp(t, w) + drift;
    }

    // Times the backend call alone. With --sync-each-op every rank first meets at a fence (not an IR
    // op, not logged), as DeepSpeed's logger synchronises around each op, so one rank's lateness
    // is not counted as the collective's time.
    template <class F>
    void timed_call(OpRecord& rec, F&& call) {
        if (a_.sync_each_op) be_.barrier();
        auto t0 = std::chrono::steady_clock::now();
        call();
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        rec.call_us = us;
    }

    void run_collective(const Op& op, OpRecord& rec) {
        switch (op.kind) {
            case OpKind::Barrier:
                timed_call(rec, [&] { be_.barrier(); });
                rec.check = "none";
                return;
            case OpKind::AllReduce:
            case OpKind::Reduce:
                if (!op.segments.empty() || !op.params.empty()) return gradient_reduction(op, rec);
                return pattern_op(op, rec);
            case OpKind::ReduceScatter:
                if (!op.params.empty()) return stage3_reduce_scatter(op, rec);
                return pattern_op(op, rec);
            case OpKind::AllGather:
                if (!op.params.empty()) return shard_gather(op, rec);
                if (op.param_group >= 0 && layout_ == Layout::Flat) return partition_gather(op, rec);
                return pattern_op(op, rec);
            case OpKind::Broadcast:
                if (!op.params.empty()) return parameter_broadcast(op, rec);
                return pattern_op(op, rec);
            case OpKind::Compute:
                return;
        }
    }

    // Ops without parameters (norms, overflow flags, trace checks): the IR's size, dtype, redop and
    // root with a known pattern, checked exactly.
    void pattern_op(const Op& op, OpRecord& rec) {
        const DType t = op.dtype;
        const int64_t n = op.elements;
        Check c;
        bool has_output = true;
        if (op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce) {
            Buffer b = comm_buffer(n, t);
            for (int64_t i = 0; i < n; ++i) store_element(b.data(), t, i, pattern_value(t, rank_, i));
            if (op.kind == OpKind::AllReduce) timed_call(rec, [&] { be_.all_reduce(b.data(), b.data(), n, t, op.redop); });
            else timed_call(rec, [&] { be_.reduce(b.data(), b.data(), n, t, op.redop, std::max(0, op.root)); });
            has_output = op.kind == OpKind::AllReduce || rank_ == std::max(0, op.root);
            if (has_output)
                for (int64_t i = 0; i < n; ++i) {
                    double want = op.redop == zerosim::ReduceOp::Max ? -1e300 : 0.0;
                    for (int r = 0; r < world_; ++r)
                        want = op.redop == zerosim::ReduceOp::Max ? std::max(want, pattern_value(t, r, i))
                                                                  : want + pattern_value(t, r, i);
                    c.see(load_element(b.data(), t, i) == round_to(t, want));
                }
        } else if (op.kind == OpKind::Broadcast) {
            Buffer b = comm_buffer(n, t);
            int root = std::max(0, op.root);
            for (int64_t i = 0; i < n; ++i) store_element(b.data(), t, i, rank_ == root ? pattern_value(t, root, i) : 77.0);
            timed_call(rec, [&] { be_.broadcast(b.data(), n, t, root); });
            for (int64_t i = 0; i < n; ++i) c.see(load_element(b.data(), t, i) == pattern_value(t, root, i));
        } else if (op.kind == OpKind::AllGather) {
            Buffer in = comm_buffer(n, t), out = comm_buffer(n * world_, t);
            for (int64_t i = 0; i < n; ++i) store_element(in.data(), t, i, pattern_value(t, rank_, i));
            timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), n, t); });
            for (int r = 0; r < world_; ++r)
                for (int64_t i = 0; i < n; ++i) c.see(load_element(out.data(), t, r * n + i) == pattern_value(t, r, i));
        } else if (op.kind == OpKind::ReduceScatter) {
            int64_t m = n / world_;
            Buffer in = comm_buffer(n, t), out = comm_buffer(m, t);
            for (int64_t i = 0; i < n; ++i) store_element(in.data(), t, i, pattern_value(t, rank_, i));
            timed_call(rec, [&] { be_.reduce_scatter(in.data(), out.data(), m, t, op.redop); });
            for (int64_t i = 0; i < m; ++i) {
                double want = 0;
                for (int r = 0; r < world_; ++r) want += pattern_value(t, r, rank_ * m + i);
                c.see(load_element(out.data(), t, i) == round_to(t, want));
            }
        }
        finish(rec, c, has_output);
    }

    // The gradient element i of p this rank sends: its local accumulator.
    float my_gradient(int p, int64_t i) const { return acc_[p].empty() ? 0.0f : acc_[p].as<float>()[i]; }

    // What every rank's element adds up to, computed here from the loss (each rank's
    // contribution is reproducible from the shared working copy and its targets), summed in rank
    // order in the op's dtype. Returns {expected, tolerance}.
    std::pair<double, double> expected_sum(const Op& op, int p, int64_t i) const {
        const DType t = op.dtype;
        const float w = static_cast<float>(load_element(work_[p].data(), mdt(), i));
        double s = 0.0, mag = 0.0;
        for (int r = 0; r < world_; ++r) {
            double c = r == rank_ ? my_gradient(p, i) : local_gradient(spec_, w, r, op.step, pending_[p], p, i);
            c = round_to(t, c);
            s = r == 0 ? c : reduce_add(t, s, c);
            mag += std::fabs(c);
        }
        return {s, static_cast<double>(world_) * ulp(t, mag)};
    }

    // Takes a reduced gradient element into the owned partition (if this rank owns it).
    void apply_gradient(const Op& op, int p, int64_t i, float v) {
        const Owned& o = owned_[p];
        if (i < o.lo || i >= o.hi) return;
        Unit& u = units_[o.unit];
        if (u.grad_step != op.step) {
            std::fill(u.grad.as<float>(), u.grad.as<float>() + u.size, 0.0f);
            u.grad_step = op.step;
        }
        u.grad.as<float>()[o.base + i] += v;
    }

    // The local accumulator of p has been sent for these elements; once all of p is, it is freed
    // (stage 2/3 hold a gradient only until its bucket is reduced).
    void consume(int p, int64_t n) {
        reduced_[p] += n;
        if (reduced_[p] >= numel(p)) {
            acc_[p].reset();
            pending_[p].clear();
            reduced_[p] = 0;
        }
    }

    // Stage 0-2 bucket reductions (and stage 3's all_reduce flush): the buffer holds the op's
    // segments in order, then zeros up to `elements` (the BF16 optimizer's group padding).
    void gradient_reduction(const Op& op, OpRecord& rec) {
        std::vector<Segment> segs = op.segments;
        if (segs.empty())
            for (int p : op.params) segs.push_back({p, 0, numel(p)});
        const DType t = op.dtype;
        Buffer b = comm_buffer(op.elements, t);
        int64_t pos = 0;
        for (const auto& sg : segs) {
            if (acc_[sg.param].empty())
                broken(op, "reduces the gradient of " + s_.params[sg.param].name + " before any backward computed it");
            pack_floats(acc_[sg.param].as<float>() + sg.offset, static_cast<char*>(b.data()) + pos * zerosim::dtype_size(t),
                        t, sg.numel);
            pos += sg.numel;
        }
        const bool is_reduce = op.kind == OpKind::Reduce;
        const bool has_output = !is_reduce || rank_ == op.root;
        // Expected values are computed before the call (the accumulators are consumed after).
        std::vector<std::pair<double, double>> expect;
        if (verify_ && has_output) {
            expect.reserve(static_cast<size_t>(pos));
            for (const auto& sg : segs)
                for (int64_t i = 0; i < sg.numel; ++i) expect.push_back(expected_sum(op, sg.param, sg.offset + i));
        }
        if (is_reduce) timed_call(rec, [&] { be_.reduce(b.data(), b.data(), op.elements, t, op.redop, op.root); });
        else timed_call(rec, [&] { be_.all_reduce(b.data(), b.data(), op.elements, t, op.redop); });
        Check c;
        pos = 0;
        for (const auto& sg : segs) {
            for (int64_t i = 0; i < sg.numel; ++i, ++pos) {
                if (!has_output) {
                    const Owned& o = owned_[sg.param];
                    if (sg.offset + i >= o.lo && sg.offset + i < o.hi)
                        broken(op, "reduces to rank " + std::to_string(op.root) + " a gradient element rank " +
                                       std::to_string(rank_) + " owns");
                    continue;
                }
                double v = load_element(b.data(), t, pos);
                if (!expect.empty()) c.see(std::fabs(v - expect[pos].first) <= expect[pos].second);
                apply_gradient(op, sg.param, sg.offset + i, static_cast<float>(v));
            }
            consume(sg.param, sg.numel);
        }
        for (int64_t i = pos; i < op.elements && has_output && verify_; ++i) c.see(load_element(b.data(), t, i) == 0.0);
        finish(rec, c, has_output);
    }

    // Stage 3: each gradient padded to world * shard and interleaved by rank (DeepSpeed's
    // reduce_scatter_coalesced): rank r's part holds chunk r of every parameter, in op order.
    void stage3_reduce_scatter(const Op& op, OpRecord& rec) {
        if (layout_ != Layout::PerParam) broken(op, "a parameter reduce_scatter outside stage 3's per-parameter layout");
        const DType t = op.dtype;
        const int es = zerosim::dtype_size(t);
        int64_t per_rank = 0;
        for (int p : op.params) per_rank += part_[p];
        Buffer in = comm_buffer(op.elements, t), out = comm_buffer(per_rank, t);
        char* base = static_cast<char*>(in.data());
        for (int r = 0; r < world_; ++r) {
            int64_t pos = r * per_rank;
            for (int p : op.params) {
                if (acc_[p].empty()) broken(op, "reduces the gradient of " + s_.params[p].name + " before any backward");
                int64_t lo = std::min(numel(p), r * part_[p]), hi = std::min(numel(p), (r + 1) * part_[p]);
                pack_floats(acc_[p].as<float>() + lo, base + pos * es, t, hi - lo);   // padding stays zero
                pos += part_[p];
            }
        }
        std::vector<std::pair<double, double>> expect;
        if (verify_)
            for (int p : op.params)
                for (int64_t j = 0; j < part_[p]; ++j) {
                    int64_t i = rank_ * part_[p] + j;
                    expect.push_back(i < numel(p) ? expected_sum(op, p, i) : std::make_pair(0.0, 0.0));
                }
        timed_call(rec, [&] { be_.reduce_scatter(in.data(), out.data(), per_rank, t, op.redop); });
        Check c;
        int64_t pos = 0;
        for (int p : op.params) {
            for (int64_t j = 0; j < part_[p]; ++j, ++pos) {
                double v = load_element(out.data(), t, pos);
                if (!expect.empty()) c.see(std::fabs(v - expect[pos].first) <= expect[pos].second);
                int64_t i = rank_ * part_[p] + j;
                if (i < numel(p)) apply_gradient(op, p, i, static_cast<float>(v));
            }
            consume(p, numel(p));
        }
        finish(rec, c);
    }

    // Checks a received weight against the shadow reference (exact for this rank's own part).
    void check_weight(Check& c, const Op& op, int p, int64_t i, double got) {
        if (!verify_) return;
        double want = shadow_->working(p, i);
        double tol = weight_tolerance(op.dtype, std::max(std::fabs(got), std::fabs(want)), updates_[p]);
        c.see(std::fabs(got - want) <= tol, [&] {
            char b[200];
            std::snprintf(b, sizeof b, "%s[%lld] = %.9g, reference %.9g, tolerance %.3g", s_.params[p].name.c_str(),
                          static_cast<long long>(i), got, want, tol);
            return std::string(b);
        });
    }

    // Stage 3 gathers: input = this rank's shards of the op's parameters, concatenated in op order;
    // output = every rank's input in rank order; parameter p is rebuilt from chunk p of each.
    void shard_gather(const Op& op, OpRecord& rec) {
        if (layout_ != Layout::PerParam) broken(op, "a parameter all_gather outside stage 3's per-parameter layout");
        const DType t = op.dtype;
        const int es = zerosim::dtype_size(t);
        int64_t per_rank = 0;
        for (int p : op.params) per_rank += part_[p];
        Buffer in = comm_buffer(per_rank, t), out = comm_buffer(per_rank * world_, t);
        int64_t pos = 0;
        for (int p : op.params) {
            std::memcpy(static_cast<char*>(in.data()) + pos * es, shard_[p].data(), static_cast<size_t>(part_[p]) * es);
            pos += part_[p];
        }
        timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), per_rank, t); });
        Check c;
        for (int r = 0; r < world_; ++r) {
            int64_t at = r * per_rank;
            for (int p : op.params) {
                for (int64_t j = 0; j < part_[p]; ++j) {
                    int64_t i = r * part_[p] + j;
                    if (i >= numel(p)) continue;
                    const char* src = static_cast<const char*>(out.data()) + (at + j) * es;
                    std::memcpy(static_cast<char*>(work_[p].data()) + i * es, src, es);
                    double got = load_element(src, t, 0);
                    if (r == rank_) c.see(got == load_element(shard_[p].data(), t, j));
                    else check_weight(c, op, p, i, got);
                }
                at += part_[p];
            }
        }
        for (int p : op.params) work_version_[p] = updates_[p];
        finish(rec, c);
    }

    // Stages 1/2 and the BF16 optimizer after the step: each rank's updated partition of a group,
    // in the model dtype, gathered into the group's padded flat buffer.
    void partition_gather(const Op& op, OpRecord& rec) {
        const auto& L = flat_[op.param_group];
        Unit& u = units_[op.param_group];
        const DType t = op.dtype;
        const int es = zerosim::dtype_size(t);
        Buffer in = comm_buffer(u.size, t), out = comm_buffer(u.size * world_, t);
        pack_floats(u.master.as<float>(), in.data(), t, u.size);
        timed_call(rec, [&] { be_.all_gather(in.data(), out.data(), u.size, t); });
        Check c;
        const char* flat = static_cast<const char*>(out.data());
        for (int p : L.order) {
            int64_t off = L.flat_offset.at(p);
            std::memcpy(work_[p].data(), flat + off * es, static_cast<size_t>(numel(p)) * es);
            for (int64_t i = 0; i < numel(p); ++i) {
                double got = load_element(flat, t, off + i);
                const Owned& o = owned_[p];
                if (i >= o.lo && i < o.hi) c.see(got == load_element(in.data(), t, o.base + i));
                else check_weight(c, op, p, i, got);
            }
            work_version_[p] = updates_[p];
        }
        finish(rec, c);
    }

    // Engine-start broadcasts of whole parameters (and stage 3's _zero_init_param): the root's
    // working copy overwrites everyone's.
    void parameter_broadcast(const Op& op, OpRecord& rec) {
        const DType t = op.dtype;
        const int es = zerosim::dtype_size(t);
        // One whole parameter in its own dtype (DeepSpeed's dist.broadcast(p, src)): in place on
        // the working copy. Otherwise through a staging buffer.
        const bool in_place = op.params.size() == 1 && t == mdt() && op.elements == numel(op.params[0]);
        Buffer b;
        if (in_place) {
            timed_call(rec, [&] { be_.broadcast(work_[op.params[0]].data(), op.elements, t, op.root); });
        } else {
            b = comm_buffer(op.elements, t);
            int64_t pos = 0;
            for (int p : op.params) {
                std::memcpy(static_cast<char*>(b.data()) + pos * es, work_[p].data(), static_cast<size_t>(numel(p)) * es);
                pos += numel(p);
            }
            timed_call(rec, [&] { be_.broadcast(b.data(), op.elements, t, op.root); });
        }
        Check c;
        int64_t pos = 0;
        for (int p : op.params) {
            if (!in_place)
                std::memcpy(work_[p].data(), static_cast<const char*>(b.data()) + pos * es, static_cast<size_t>(numel(p)) * es);
            for (int64_t i = 0; i < numel(p); ++i) check_weight(c, op, p, i, load_element(work_[p].data(), t, i));
            pos += numel(p);
            work_version_[p] = updates_[p];
            if (updates_[p] == 0) take_initial_value(p);
        }
        finish(rec, c);
    }
};

}  // namespace

zerosim::Status validate_schedule(const Schedule& s, const std::string& file) {
    const int64_t world = s.meta.world;
    const int64_t P = static_cast<int64_t>(s.params.size());
    const Layout layout = layout_of(s);
    zerosim::Model model = layout_model(s);
    std::vector<int64_t> ps(static_cast<size_t>(std::max(1, s.meta.num_groups)), 0);
    if (layout == Layout::Flat)
        for (int g = 0; g < s.meta.num_groups; ++g)
            ps[g] = zerosim::flat_group_layout(model, g, world, s.meta.round_robin_gradients).partition_size;
    for (size_t k = 0; k < s.ops.size(); ++k) {
        const Op& op = s.ops[k];
        auto err = [&](const std::string& m) {
            return zerosim::Error{file, "ops[" + std::to_string(k) + "]", m};
        };
        if (op.id != static_cast<int64_t>(k)) return err("id " + std::to_string(op.id) + " is not its position");
        for (int p : op.params)
            if (p < 0 || p >= P) return err("parameter index " + std::to_string(p) + " is outside the parameter list");
        int64_t seg_total = 0;
        for (const auto& sg : op.segments) {
            if (sg.param < 0 || sg.param >= P) return err("segment parameter " + std::to_string(sg.param) + " is unknown");
            if (sg.offset < 0 || sg.numel < 0 || sg.offset + sg.numel > s.params[sg.param].numel)
                return err("segment [" + std::to_string(sg.offset) + ", +" + std::to_string(sg.numel) + ") lies outside " +
                           s.params[sg.param].name);
            seg_total += sg.numel;
        }
        for (int64_t d : op.deps)
            if (d < 0 || d >= static_cast<int64_t>(k)) return err("dependency " + std::to_string(d) + " is not an earlier op");
        if (op.kind == OpKind::Compute) continue;
        if (op.elements < 0) return err("negative elements");
        if ((op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce) && (op.root < 0 || op.root >= world))
            return err("root " + std::to_string(op.root) + " is not a rank of " + std::to_string(world));
        int64_t whole = 0, shards = 0;
        for (int p : op.params) {
            whole += s.params[p].numel;
            shards += zerosim::stage3_partition_numel(s.params[p].numel, world);
        }
        const std::string n = std::to_string(op.elements);
        switch (op.kind) {
            case OpKind::AllReduce:
            case OpKind::Reduce:
                if (!op.segments.empty() && seg_total > op.elements)
                    return err("segments hold " + std::to_string(seg_total) + " elements, more than the op's " + n);
                if (op.segments.empty() && !op.params.empty() && whole != op.elements)
                    return err("parameters hold " + std::to_string(whole) + " elements; the op sends " + n);
                break;
            case OpKind::ReduceScatter:
                if (!op.params.empty() && world * shards != op.elements)
                    return err("padded parameters hold " + std::to_string(world * shards) + " elements; the op sends " + n);
                if (op.params.empty() && op.elements % world != 0) return err("elements are not a multiple of the world size");
                break;
            case OpKind::AllGather:
                if (!op.params.empty() && shards != op.elements)
                    return err("shards hold " + std::to_string(shards) + " elements; the op sends " + n);
                if (op.params.empty() && layout == Layout::Flat && op.param_group >= 0) {
                    if (op.param_group >= s.meta.num_groups) return err("param_group is not a parameter group");
                    if (ps[op.param_group] != op.elements)
                        return err("group " + std::to_string(op.param_group) + "'s partition has " +
                                   std::to_string(ps[op.param_group]) + " elements; the op sends " + n);
                }
                if (!op.params.empty() && op.dtype != s.meta.model_dtype) return err("gathers parameters in another dtype");
                break;
            case OpKind::Broadcast:
                if (!op.params.empty() && whole != op.elements)
                    return err("parameters hold " + std::to_string(whole) + " elements; the op sends " + n);
                if (!op.params.empty() && op.dtype != s.meta.model_dtype) return err("broadcasts parameters in another dtype");
                break;
            default:
                break;
        }
    }
    return std::nullopt;
}

// The IR's wait lists (its deps and stream order, schedule/ordering.hpp), the same the timing
// engine follows. The executor's two threads add one execution constraint that is no dependency:
// the communication thread issues every collective, whatever its stream, in IR order, because
// every rank must call collectives on a communicator in the same order (MPI's rule for
// collectives on one communicator; NCCL's for kernels on one ncclComm_t), and a rank cannot know
// the order its peers' side streams would pick. Waits point to earlier ops and each thread runs
// in IR order, so this serialisation cannot deadlock. Within a step the weights change only at
// the optimizer step, which the rules fence from every gather, so a gather rewriting a working
// copy that a compute op reads writes the bytes already there (DeepSpeed gathers into a fresh
// buffer and needs no wait either).
std::vector<std::vector<int64_t>> executor_wait_plan(const Schedule& s) { return zerosim::wait_lists(s); }

RankResult execute_schedule(Backend& be, const Schedule& s, const RunArgs& args, MemoryTracker& mem) {
    Executor ex(be, s, args, mem);
    RankResult r = ex.run();
    if (!args.dump_weights.empty()) ex.dump_weights(args.dump_weights);
    return r;
}

std::string dump_path(const std::string& prefix, int rank) { return prefix + ".rank" + std::to_string(rank) + ".bin"; }

zerosim::Result<std::vector<std::vector<float>>> read_weight_dumps(const std::string& prefix, int world,
                                                                   const std::vector<zerosim::ScheduleParam>& params) {
    std::vector<std::vector<float>> w;
    for (const auto& p : params) w.emplace_back(static_cast<size_t>(p.numel), std::numeric_limits<float>::quiet_NaN());
    for (int r = 0; r < world; ++r) {
        std::ifstream f(dump_path(prefix, r), std::ios::binary);
        if (!f) continue;   // stage 0: only rank 0 writes
        for (;;) {
            int32_t p;
            int64_t off, n;
            if (!f.read(reinterpret_cast<char*>(&p), 4)) break;
            f.read(reinterpret_cast<char*>(&off), 8);
            f.read(reinterpret_cast<char*>(&n), 8);
            if (!f || p < 0 || p >= static_cast<int32_t>(params.size()) || off < 0 || n < 0 || off + n > params[p].numel)
                return zerosim::Error{dump_path(prefix, r), "", "corrupt weight dump"};
            f.read(reinterpret_cast<char*>(w[p].data() + off), n * 4);
        }
    }
    return w;
}

}  // namespace zerorun
