// The shortest edit script between two sequences of integers (private to validate/): Myers' O(ND)
// difference algorithm with its linear-space refinement (E. W. Myers, "An O(ND) Difference
// Algorithm and Its Variations", Algorithmica 1(2), 1986: the greedy furthest-reaching search
// from both corners, §3-4b; the "middle snake" splits the problem, so memory is linear and time
// O((N + M) D) at worst, about N + M + D² on logs that differ in a few places).
//
// Only deletions and insertions are edits (unit cost each); the script is given as two masks: the
// elements of `a` and of `b` left out of the common subsequence. Elements are small codes (0 to
// a few million: op ids). With at most `max_edits` edits the script is a minimum one, as long as
// the search stays within `max_work` steps. When the codes' counts on both sides already differ by
// more than `max_edits` (a lower bound on the edits), or the search passes `max_work`, every later
// split of the problem stops its search after `fallback_d` steps and cuts at the furthest point
// either side reached (GNU diff's "too expensive" heuristic): the script is still valid, its
// length an upper bound, and `exact` is false. `exact` is true exactly when no such cut was made
// (every split found its middle snake), and then the script is a minimum one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zerosim::validate_detail {

struct EditLimits {
    size_t max_edits = 0;
    uint64_t max_work = 0;   // furthest-point updates plus matched elements walked, over all splits
    size_t fallback_d = 64;
};

struct EditScript {
    std::vector<uint8_t> deleted;    // per element of a: 1 when it is not in the common subsequence
    std::vector<uint8_t> inserted;   // per element of b
    bool exact = true;
    uint64_t work = 0;
    size_t edits() const;
};

EditScript shortest_edit_script(const std::vector<int32_t>& a, const std::vector<int32_t>& b, const EditLimits& limits);

// Among scripts of the same length, moves each run of deletions (then of insertions) along runs of
// equal elements to where the other sequence has a change between the same two kept elements, so
// that what changed together is reported together ("X X X" against "X Y X" deletes the middle X
// beside the inserted Y, not the last one). The common subsequence, and so the counts, stay as
// they are; each run moves at most to its neighbouring runs, so the pass is linear.
void slide_runs_together(const std::vector<int32_t>& a, const std::vector<int32_t>& b, EditScript& script);

}  // namespace zerosim::validate_detail
