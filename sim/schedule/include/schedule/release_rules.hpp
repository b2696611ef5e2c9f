// The DeepSpeed releases after v0.14.2, one rule per change that a comms log shows, in one table
// (../shared/docs/deepspeed-releases.md §1-2): each rule knows the releases it applies to, the pull
// request behind it and the schedule rules (ir.hpp) whose ops it adds, moves or removes. The
// generators ask `applies(id, release)`; explain names the release of the rules it meets.
#pragma once

#include <string>
#include <vector>

#include "inputs/release.hpp"

namespace zerosim {

enum class ReleaseRuleId {
    LogPrefixLine,              // the [logging.py:N:log_dist] line of every verbose line
    LoggerDefaultWarning,       // per-op lines hidden unless the logger is raised to INFO
    Stage3TraceCheckAtForward,  // stage 3: trace check at the next forward, a 0B broadcast first
    Stage3TraceLengthCheck,     // stage 3: an 8-byte length broadcast before every list broadcast
    Stage3BucketElementsKept,   // stage 3, v0.17.2 only: bucket element count never reset
    Stage12NoEmptyBucketReduce, // stages 1/2, reduce_scatter off: no 0-element all_reduce
    Stage1Fp16NoOverflowReduce, // stage 1 + fp16: has_overflow stays local (v0.17.1-v0.17.6)
    Stage12Bf16OverflowCheck,   // stages 1/2 + bf16: has_overflow all_reduce with check_grad_overflow
    Stage0Bf16NoBf16Optimizer,  // stage 0 + bf16: DDP path, no BF16_Optimizer all_gather
};

struct ReleaseRule {
    ReleaseRuleId id;
    const char* name;       // "stage3.trace_check_at_forward"
    Release first, last;    // the releases it applies to, both inclusive
    const char* pr;         // "#6662"
    const char* change;     // one line: what the log shows from `first`
    const char* op_rules;   // comma-separated schedule rule ids (ir.hpp) it touches; "" none
};

const std::vector<ReleaseRule>& release_rules();
const ReleaseRule& release_rule(ReleaseRuleId id);
// Whether DeepSpeed `r` follows the rule.
bool applies(ReleaseRuleId id, Release r);
// "since v0.17.6 (#7525)", "v0.17.1 to v0.17.6 (#6976)", "in v0.17.2 only (#6993)".
std::string release_span(const ReleaseRule& rule);

// The `[logging.py:N:log_dist]` line number DeepSpeed `r` prints (LogPrefixLine).
int log_dist_line(Release r);
// The `[timer.py:N:stop]` line number of DeepSpeed `r`'s throughput line (formats/wall_clock_log.hpp).
int throughput_log_line(Release r);
// The releases whose logger prints line `n`: [first, last]; false when no release prints it.
bool releases_with_log_dist_line(int n, Release& first, Release& last);

}  // namespace zerosim
