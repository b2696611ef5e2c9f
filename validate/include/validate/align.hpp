// Aligning two op sequences, predicted against measured, as an edit script: which ops match,
// which are missing on either side, which changed size, which two neighbours swapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/measured_logs.hpp"

namespace zerosim {

enum class DiffKind { Match, Resized, Missing, Extra, Swapped };
const char* diff_kind_name(DiffKind k);

struct DiffEntry {
    DiffKind kind = DiffKind::Match;
    int pred = -1, meas = -1;      // indices into the two op lists (first of a swapped pair)
    int pred2 = -1, meas2 = -1;    // the second op of a swapped pair
};

// An op is its name and printed size (callers are advisory: they differ between DeepSpeed
// versions and do not break a match). The alignment is built in four steps (docs/validate.md,
// "Alignment"):
//  1. a minimum edit script of ops missing and extra (Myers' O(ND) algorithm in linear space,
//     validate/edit_script.hpp): k ops removed from a log come out as exactly k missing, k ops
//     inserted as exactly k extra;
//  2. among scripts of that length, runs of missing (extra) ops slid over equal ops to meet the
//     other side's changes ("X X X" against "X Y X" drops the middle X beside Y);
//  3. in each run of differences between two matched ops, the missing and the extra ops of the
//     same name are paired in order (their longest common subsequence of names): each pair is
//     one resized op, the rest stay missing or extra;
//  4. a missing op, one matched op and an extra op equal to the missing one are one swapped pair.
// A resized op is therefore an op whose size alone changed in place; an op removed here and one
// of the same name inserted elsewhere stay one missing and one extra.
//
// Memory is linear; time about n + m + D² for D missing and extra ops (a resized or swapped op
// counts one of each). The search is for a minimum while D can be at most `max_edits` (a count of
// each op's occurrences on both sides bounds D from below in linear time: two unrelated logs are
// known to be past it at once) and its steps stay within `max_work`; past either, each part of the
// problem is cut at the furthest point a search of `fallback_d` steps reached (GNU diff's
// heuristic): still a valid script, not necessarily a minimum, `exact` false, and the report says
// so. That bounds the time by about max_work + (n + m) x fallback_d steps.
struct AlignLimits {
    size_t max_edits = 100000;
    uint64_t max_work = 1000000000ull;   // D up to about 25,000 at 1,000,000 ops; a few seconds
    size_t fallback_d = 64;
};

struct Alignment {
    std::vector<DiffEntry> entries;
    bool exact = true;   // false: the counts are those of a valid script, an upper bound on the minimum
};

Alignment align_ops(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const AlignLimits& limits = {});

}  // namespace zerosim
