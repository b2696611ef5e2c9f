// The threads that run a rank's ops, each op after the ops it waits for (plan_waits.cpp), the
// watchdog that stops a run that makes no progress, and the test hooks that fail on purpose.
#include <chrono>
#include <cstdio>
#include <thread>
#include <unistd.h>

#include "handlers.hpp"

namespace zerorun {
namespace detail {

using zerosim::OpKind;

RankResult Executor::run() {
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
        // With between_steps, each step's ops run as one list and the hook runs before it.
        std::vector<int64_t> all;
        for (const auto& op : s_.ops) {
            if (a_.between_steps && op.step >= 0 && (all.empty() || s_.ops[all.back()].step != op.step)) {
                worker(all);
                all.clear();
                a_.between_steps(op.step);
                dog.progress();
            }
            all.push_back(op.id);
        }
        worker(all);
        if (a_.between_steps) a_.between_steps(-1);   // and once after the last step
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

void Executor::worker(const std::vector<int64_t>& list) {
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
            handlers_->at(op).run(op, rec);   // by the op's payload kind (handlers.cpp)
            rec.end_us = wall_us();
            done_[id].store(1, std::memory_order_release);
            done_[id].notify_all();
            if (watchdog_) watchdog_->progress();
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zerorun: error: rank %d: %s\n", grank_, e.what());
        std::fflush(stderr);
        be_.abort(2);
    }
}

void Executor::maybe_fail_on_purpose(const Op& op) {
    const TestHooks& t = a_.test;
    if (grank_ != t.fail_rank || op.id != t.fail_op || t.fail_mode == TestHooks::Mode::Corrupt) return;
    if (t.fail_mode == TestHooks::Mode::Delay) {
        // A late rank, not a failed one: its peers wait for it inside the collective.
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        return;
    }
    const bool hang = t.fail_mode == TestHooks::Mode::Hang;
    std::fprintf(stderr, "zerorun: rank %d: --test-fail-op: %s before %s\n", grank_, hang ? "hanging" : "exiting",
                 op_label(op).c_str());
    std::fflush(stderr);
    if (hang) {
        // A hung process cannot be trusted to notice itself (think SIGSTOP or a stuck driver):
        // its own watchdog stands down so that the peers' watchdogs are what the test exercises.
        if (watchdog_) watchdog_->stop();
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    _exit(0);
}

}  // namespace detail

RankResult execute_schedule(Backend& be, const zerosim::Schedule& s, const ExecOptions& opt, MemoryTracker& mem) {
    detail::Executor ex(be, s, opt, mem);
    RankResult r = ex.run();
    if (!opt.dump_weights.empty()) ex.dump_weights(opt.dump_weights);
    return r;
}

}  // namespace zerorun
