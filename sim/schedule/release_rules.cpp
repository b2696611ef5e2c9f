#include "schedule/release_rules.hpp"

#include <cstdio>
#include <cstdlib>

namespace zerosim {

namespace {

constexpr Release kLast = kNewestRelease;

// utils/logging.py: the line of `logger.log(...)` inside log_dist, by release (deepspeed-releases.md
// A1): 96 up to v0.15.2, 129 in v0.15.3 (#6496), 128 in v0.15.4-v0.16.4 (#6663), 107 in
// v0.16.5-v0.17.6 (#6999), 123 from v0.18.0 (#7621).
struct PrefixSpan {
    Release first, last;
    int line;
};
constexpr PrefixSpan kPrefixSpans[] = {{{0, 14, 2}, {0, 15, 2}, 96},
                                       {{0, 15, 3}, {0, 15, 3}, 129},
                                       {{0, 15, 4}, {0, 16, 4}, 128},
                                       {{0, 16, 5}, {0, 17, 6}, 107},
                                       {{0, 18, 0}, kNewestRelease, 123}};

// utils/timer.py: the line of `self.logging(` in ThroughputTimer.stop, whose logger prefix the
// throughput line carries ("[timer.py:260:stop]"), read at each tag: 260 (v0.14.2), 258
// (v0.14.3-v0.14.4), 259 (v0.14.5-v0.15.1), 264 (v0.15.2-v0.16.4). Later tags were not read
// (the mirror ends at v0.16.4); 264 is kept for them.
constexpr PrefixSpan kThroughputLines[] = {{{0, 14, 2}, {0, 14, 2}, 260},
                                           {{0, 14, 3}, {0, 14, 4}, 258},
                                           {{0, 14, 5}, {0, 15, 1}, 259},
                                           {{0, 15, 2}, kNewestRelease, 264}};

}  // namespace

const std::vector<ReleaseRule>& release_rules() {
    static const std::vector<ReleaseRule> rules = {
        {ReleaseRuleId::LogPrefixLine, "log.prefix_line", {0, 15, 3}, kLast, "#6496, #6663, #6999, #7621",
         "the verbose line's prefix names logging.py line 129 (v0.15.3), 128 (v0.15.4-v0.16.4), 107 (v0.16.5-v0.17.6), "
         "123 (v0.18.0+) instead of 96",
         ""},
        {ReleaseRuleId::LoggerDefaultWarning, "log.default_level_warning", {0, 17, 6}, kLast, "#7526",
         "DeepSpeed's logger defaults to WARNING: no per-op lines, only log_summary()'s table, unless the level is "
         "raised (v0.18.0+ set_log_level_from_string(\"info\"), v0.19.3+ \"log_level\": \"info\")",
         ""},
        // stage3.py / parameter_offload.py: reset_step moved from the end of backward to a forward
        // pre-hook on the root module, with the trace starting INVALID.
        {ReleaseRuleId::Stage3TraceCheckAtForward, "stage3.trace_check_at_forward", {0, 15, 4}, kLast, "#6662",
         "the trace check runs at the start of the next forward (step 2, or micro-step 2), and a 0-byte "
         "get_lst_from_rank0 broadcast opens the first forward",
         "stage3.trace_check,stage3.trace_start"},
        // runtime/zero/utils.py assert_ints_same_as_other_ranks -> assert_lst_len_same_as_other_ranks.
        {ReleaseRuleId::Stage3TraceLengthCheck, "stage3.trace_length_check", {0, 17, 6}, kLast, "#7525",
         "every trace-check list broadcast is preceded by an 8-byte assert_lst_len_same_as_other_ranks broadcast",
         "stage3.trace_check_length"},
        // v0.17.2 stage3.py __reduce_and_partition_ipg_grads clears the bucket's params, not its
        // element count; fixed in v0.17.3 (#7418).
        {ReleaseRuleId::Stage3BucketElementsKept, "stage3.bucket_elements_kept", {0, 17, 2}, {0, 17, 2}, "#6993",
         "the gradient bucket's element count is never reset: once the running total passes reduce_bucket_size, "
         "every gradient is reduced on its own",
         "stage3.flush.reduce_scatter,stage3.flush.allreduce"},
        // stage_1_and_2.py gradient_reduction_w_predivide returns early on an empty tensor.
        {ReleaseRuleId::Stage12NoEmptyBucketReduce, "stage12.no_empty_bucket_allreduce", {0, 14, 5}, kLast, "#5868",
         "reduce_scatter: false no longer sends a 0-element all_reduce for an empty bucket",
         "stage12.flush.allreduce_predivide"},
        // stage_1_and_2.py has_overflow(partition_gradients=self.partition_gradients): stage 1's
        // check stays local until #7580 made the all_reduce unconditional again (v0.18.0).
        {ReleaseRuleId::Stage1Fp16NoOverflowReduce, "stage1.fp16_overflow_local", {0, 17, 1}, {0, 17, 6},
         "#6976, reverted by #7580",
         "stage 1 + fp16: the step's has_overflow all_reduce is gone (stage 2 keeps it)", "step.overflow_check"},
        // stage_1_and_2.py step: check_overflow when check_grad_overflow; engine.py passes
        // bf16.check_grad_overflow for bf16 (added v0.17.1, default true from v0.19.3, #8035).
        {ReleaseRuleId::Stage12Bf16OverflowCheck, "stage12.bf16_overflow_check", {0, 17, 1}, kLast, "#6976, #8035",
         "stages 1/2 + bf16 with bf16.check_grad_overflow (the default from v0.19.3): a 1-byte has_overflow "
         "all_reduce opens every step",
         "step.overflow_check"},
        // engine.py get_data_types no longer defaults grad_accum_dtype to fp32 for bf16 without
        // ZeRO, so the engine takes the DDP path (_configure_fp16_optimizer) instead of BF16_Optimizer.
        {ReleaseRuleId::Stage0Bf16NoBf16Optimizer, "stage0.bf16_without_bf16_optimizer", {0, 17, 6}, kLast, "#7515",
         "stage 0 + bf16 (grad_accum_dtype unset) no longer runs BF16_Optimizer: no all_gather of updated "
         "partitions, gradients all_reduced as stage 0's",
         "bf16.grad_allreduce,bf16.step.allgather_partitions,stage0.bucket_allreduce"},
    };
    return rules;
}

const ReleaseRule& release_rule(ReleaseRuleId id) {
    for (const auto& r : release_rules())
        if (r.id == id) return r;
    std::fprintf(stderr, "zerosim: internal error: unknown release rule\n");
    std::abort();
}

bool applies(ReleaseRuleId id, Release r) {
    const ReleaseRule& rule = release_rule(id);
    return in_releases(r, rule.first, rule.last);
}

std::string release_span(const ReleaseRule& rule) {
    std::string pr = std::string(" (") + rule.pr + ")";
    if (rule.first == rule.last) return "in " + rule.first.name() + " only" + pr;
    if (rule.last == kNewestRelease) return "since " + rule.first.name() + pr;
    return rule.first.name() + " to " + rule.last.name() + pr;
}

int log_dist_line(Release r) {
    for (const auto& s : kPrefixSpans)
        if (in_releases(r, s.first, s.last)) return s.line;
    return 96;
}

int throughput_log_line(Release r) {
    for (const auto& s : kThroughputLines)
        if (in_releases(r, s.first, s.last)) return s.line;
    return 260;
}

bool releases_with_log_dist_line(int n, Release& first, Release& last) {
    for (const auto& s : kPrefixSpans)
        if (s.line == n) {
            first = s.first;
            last = s.last;
            return true;
        }
    return false;
}

}  // namespace zerosim
