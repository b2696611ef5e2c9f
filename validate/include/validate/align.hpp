// Aligning two op sequences, predicted against measured, as an edit script: which ops match,
// which are missing on either side, which changed size, which two neighbours swapped.
#pragma once

#include <cstddef>
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

// Edit-distance alignment on (op, printed size); callers are advisory (they differ between
// DeepSpeed versions) and do not break a match. Costs: a missing or an extra op 2, a resized op 3
// (so two swapped neighbours read as a swap, 2 + 2, not as two resized ops, 6), a different op 6
// (never better than missing + extra).
//
// Logs whose DP table fits `exact_cells` get the exact minimum-cost alignment. Longer ones (a real
// training run logs millions of ops) are aligned in linear memory: ops are matched one for one
// while the logs agree; at a disagreement the exact alignment of the next window of ops is
// computed and kept up to the first run of matches after its last edit (the logs are back in
// step), the window doubling up to `max_window` until they are. Memory O(max_window²) besides the
// result, time O(n + m + d·w²) for d disagreements resolved within w ops. Sparse differences (a
// few ops in a thousand) come out as the exact alignment does (tests/unit/test_align.cpp checks
// it against the exact one); a gap longer than the window in a log that repeats with a shorter
// period can be put back in step at more than one place, and then the first one is kept.
struct AlignLimits {
    size_t exact_cells = size_t{1} << 24;   // 16 MiB of traceback
    size_t max_window = 2048;
    size_t resync_run = 8;                 // matches in a row that mean "back in step"
};
std::vector<DiffEntry> align_ops(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas,
                                 const AlignLimits& limits = {});

}  // namespace zerosim
