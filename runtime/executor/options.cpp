#include "executor/options.hpp"

namespace zerorun {

const char* op_time_name(OpTime t) { return t == OpTime::SkewFree ? "skew-free" : "rank"; }

std::optional<OpTime> op_time_from_name(const std::string& name) {
    for (OpTime t : {OpTime::Rank, OpTime::SkewFree})
        if (name == op_time_name(t)) return t;
    return std::nullopt;
}

const char* test_fail_mode_name(TestHooks::Mode m) {
    switch (m) {
        case TestHooks::Mode::Exit: return "exit";
        case TestHooks::Mode::Hang: return "hang";
        case TestHooks::Mode::Delay: return "delay";
        case TestHooks::Mode::Corrupt: return "corrupt";
    }
    return "?";
}

std::optional<TestHooks::Mode> test_fail_mode_from_name(const std::string& name) {
    for (auto m : {TestHooks::Mode::Exit, TestHooks::Mode::Hang, TestHooks::Mode::Delay, TestHooks::Mode::Corrupt})
        if (name == test_fail_mode_name(m)) return m;
    return std::nullopt;
}

zerosim::Status check_exec_options(const ExecOptions& o) {
    if (o.compute_scale < 0) return zerosim::Error{"", "--compute-scale", "expected a fraction >= 0"};
    if (o.timeout_s < 0) return zerosim::Error{"", "--timeout", "expected seconds >= 0 (0 turns the watchdog off)"};
    if (!(o.lr > 0)) return zerosim::Error{"", "--lr", "expected a positive learning rate"};
    if (o.evict_before_op < 0) return zerosim::Error{"", "--evict-before-op", "expected a size >= 0"};
    if (o.evict_before_op > 0 && !o.sync_each_op)
        return zerosim::Error{"", "--evict-before-op", "needs --sync-each-op (an op overlapping the next would evict its caches)"};
    return std::nullopt;
}

}  // namespace zerorun
