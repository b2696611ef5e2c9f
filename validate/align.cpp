#include "validate/align.hpp"

#include <algorithm>
#include <cstdint>

namespace zerosim {

const char* diff_kind_name(DiffKind k) {
    switch (k) {
        case DiffKind::Match: return "match";
        case DiffKind::Resized: return "resized";
        case DiffKind::Missing: return "missing";
        case DiffKind::Extra: return "extra";
        case DiffKind::Swapped: return "swapped";
    }
    return "?";
}

namespace {

constexpr int32_t kIndel = 2, kResized = 3, kDifferent = 6;

bool same_op(const LoggedOp& a, const LoggedOp& b) { return a.record == b.record && a.size_text == b.size_text; }

// The exact minimum-cost alignment of pred[p0, p0 + n) with meas[m0, m0 + m), appended to `out`
// in order. A band around the (scaled) diagonal bounds the work on long windows; logs that differ
// by a few ops stay well inside it. Ties go to the diagonal, then to a missing op, from the end.
void align_exact(const std::vector<LoggedOp>& pred, size_t p0, size_t n, const std::vector<LoggedOp>& meas, size_t m0,
                 size_t m, std::vector<DiffEntry>& out) {
    const int64_t band = std::max<int64_t>(512, std::llabs(static_cast<int64_t>(n) - static_cast<int64_t>(m)) + 256);
    const int64_t INF = INT32_MAX / 2;
    std::vector<int32_t> prev(m + 1, static_cast<int32_t>(INF)), cur(m + 1);
    std::vector<uint8_t> dir((n + 1) * (m + 1), 0);  // 1 diagonal, 2 up (missing), 3 left (extra)
    for (size_t j = 0; j <= m; ++j) {
        prev[j] = static_cast<int32_t>(kIndel * j);
        dir[j] = 3;
    }
    for (size_t i = 1; i <= n; ++i) {
        std::fill(cur.begin(), cur.end(), static_cast<int32_t>(INF));
        int64_t centre = static_cast<int64_t>(static_cast<double>(i) * static_cast<double>(m) / static_cast<double>(std::max<size_t>(n, 1)));
        int64_t lo = std::max<int64_t>(0, centre - band), hi = std::min<int64_t>(static_cast<int64_t>(m), centre + band);
        if (lo == 0) {
            cur[0] = static_cast<int32_t>(kIndel * i);
            dir[i * (m + 1)] = 2;
        }
        for (int64_t jj = std::max<int64_t>(1, lo); jj <= hi; ++jj) {
            const size_t j = static_cast<size_t>(jj);
            const LoggedOp &a = pred[p0 + i - 1], &b = meas[m0 + j - 1];
            int32_t sub = same_op(a, b) ? 0 : (a.record == b.record ? kResized : kDifferent);
            int32_t d = prev[j - 1] + sub, u = prev[j] + kIndel, l = cur[j - 1] + kIndel;
            uint8_t best = 1;
            int32_t v = d;
            if (u < v) v = u, best = 2;
            if (l < v) v = l, best = 3;
            cur[j] = v;
            dir[i * (m + 1) + j] = best;
        }
        std::swap(prev, cur);
    }
    std::vector<DiffEntry> rev;
    size_t i = n, j = m;
    while (i > 0 || j > 0) {
        uint8_t d = dir[i * (m + 1) + j];
        const int pi = static_cast<int>(p0 + i - 1), mj = static_cast<int>(m0 + j - 1);
        if (i > 0 && j > 0 && d == 1) {
            rev.push_back({same_op(pred[p0 + i - 1], meas[m0 + j - 1]) ? DiffKind::Match : DiffKind::Resized, pi, mj});
            --i, --j;
        } else if (i > 0 && (d == 2 || j == 0)) {
            rev.push_back({DiffKind::Missing, pi, -1});
            --i;
        } else {
            rev.push_back({DiffKind::Extra, -1, mj});
            --j;
        }
    }
    out.insert(out.end(), rev.rbegin(), rev.rend());
}

// How many ops of each side an edit script consumes.
void advance(const DiffEntry& e, size_t& i, size_t& j) {
    if (e.kind != DiffKind::Extra) ++i;
    if (e.kind != DiffKind::Missing) ++j;
}

// Linear memory: match while the logs agree, resolve each disagreement in a window (see align.hpp).
std::vector<DiffEntry> align_windowed(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const AlignLimits& lim) {
    const size_t n = pred.size(), m = meas.size();
    std::vector<DiffEntry> out;
    out.reserve(std::max(n, m));
    size_t i = 0, j = 0;
    std::vector<DiffEntry> local;
    while (i < n || j < m) {
        if (i < n && j < m && same_op(pred[i], meas[j])) {
            out.push_back({DiffKind::Match, static_cast<int>(i), static_cast<int>(j)});
            ++i, ++j;
            continue;
        }
        for (size_t w = 32;; w *= 2) {
            const size_t wn = std::min(w, n - i), wm = std::min(w, m - j);
            local.clear();
            align_exact(pred, i, wn, meas, j, wm, local);
            if (i + wn == n && j + wm == m) {   // the window reaches both ends: all of it is exact
                out.insert(out.end(), local.begin(), local.end());
                i = n, j = m;
                break;
            }
            // Keep the edits up to the first run of matches after them; the run itself is matched
            // by the loop above. A window end that cuts the logs unevenly forces edits at its
            // end, which this never keeps.
            size_t keep = 0, run = 0;
            for (size_t k = 0; k < local.size(); ++k) {
                if (local[k].kind != DiffKind::Match) {
                    run = 0;
                    continue;
                }
                if (++run == lim.resync_run && k + 1 > run) {
                    keep = k + 1 - run;
                    break;
                }
            }
            if (keep == 0 && w < lim.max_window) continue;
            if (keep == 0) keep = std::max<size_t>(1, local.size() / 2);   // no resync in the widest window
            for (size_t k = 0; k < keep; ++k) {
                out.push_back(local[k]);
                advance(local[k], i, j);
            }
            break;
        }
    }
    return out;
}

// Two neighbours in the other order show up as missing + match + extra of the same op.
std::vector<DiffEntry> fold_swaps(const std::vector<DiffEntry>& e, const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas) {
    std::vector<DiffEntry> out;
    out.reserve(e.size());
    for (size_t k = 0; k < e.size(); ++k) {
        if (k + 2 < e.size() && e[k + 1].kind == DiffKind::Match) {
            const DiffEntry &a = e[k], &mid = e[k + 1], &c = e[k + 2];
            if (a.kind == DiffKind::Missing && c.kind == DiffKind::Extra && same_op(pred[static_cast<size_t>(a.pred)], meas[static_cast<size_t>(c.meas)])) {
                out.push_back({DiffKind::Swapped, a.pred, mid.meas, mid.pred, c.meas});
                k += 2;
                continue;
            }
            if (a.kind == DiffKind::Extra && c.kind == DiffKind::Missing && same_op(meas[static_cast<size_t>(a.meas)], pred[static_cast<size_t>(c.pred)])) {
                out.push_back({DiffKind::Swapped, mid.pred, a.meas, c.pred, mid.meas});
                k += 2;
                continue;
            }
        }
        out.push_back(e[k]);
    }
    return out;
}

}  // namespace

std::vector<DiffEntry> align_ops(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const AlignLimits& limits) {
    std::vector<DiffEntry> e;
    if ((pred.size() + 1) * (meas.size() + 1) <= limits.exact_cells)
        align_exact(pred, 0, pred.size(), meas, 0, meas.size(), e);
    else
        e = align_windowed(pred, meas, limits);
    return fold_swaps(e, pred, meas);
}

}  // namespace zerosim
