#include "edit_script.hpp"

#include <algorithm>

namespace zerosim::validate_detail {

size_t EditScript::edits() const {
    size_t n = 0;
    for (uint8_t d : deleted) n += d;
    for (uint8_t i : inserted) n += i;
    return n;
}

namespace {

// The furthest x each diagonal k = x - y has reached from one corner, in that corner's own
// coordinates (the reverse search counts x and y from the ends of both sequences).
struct Frontier {
    std::vector<int64_t> v;             // indexed by k + offset; -1: not reached
    int64_t cut_lo = 0, cut_hi = 0;     // diagonals at either end that ran off the grid
    int64_t best_x = 0, best_y = 0;     // the point reached that is furthest along (x + y)
};

// Where a subproblem is cut, in its forward coordinates; `reverse_side` when the part known to be
// cheap is the one after the cut (a heuristic cut taken from the reverse search).
struct Cut {
    int64_t x = 0, y = 0;
    bool reverse_side = false;
};

class MyersSearch {
  public:
    MyersSearch(const std::vector<int32_t>& a, const std::vector<int32_t>& b, const EditLimits& lim, EditScript& out);
    void solve(int64_t a0, int64_t a1, int64_t b0, int64_t b1);

  private:
    Cut middle(int64_t a0, int64_t n, int64_t b0, int64_t m);
    template <bool Reverse>
    bool advance(Frontier& f, const Frontier& other, int64_t d, bool check, Cut& hit);
    void reset(Frontier& f);
    Cut furthest_cut() const;

    const int32_t* a_;
    const int32_t* b_;
    int64_t a0_ = 0, b0_ = 0, n_ = 0, m_ = 0;   // the subproblem being searched
    Frontier fwd_, rev_;
    int64_t offset_ = 0;
    int64_t exact_d_ = 0, fallback_d_ = 1;
    uint64_t max_work_ = 0;
    bool exact_ = true;
    EditScript& out_;
};

MyersSearch::MyersSearch(const std::vector<int32_t>& a, const std::vector<int32_t>& b, const EditLimits& lim, EditScript& out)
    : a_(a.data()), b_(b.data()), out_(out) {
    const int64_t whole = static_cast<int64_t>(a.size() + b.size() + 1) / 2;
    // A script of D edits meets in the middle after ceil(D / 2) steps from each corner.
    exact_d_ = std::min<int64_t>(whole, static_cast<int64_t>((lim.max_edits + 1) / 2));
    fallback_d_ = std::min<int64_t>(std::max<int64_t>(whole, 1), std::max<int64_t>(1, static_cast<int64_t>(lim.fallback_d)));
    max_work_ = lim.max_work;
    exact_ = exact_d_ > 0;   // else every search is bounded by fallback_d from the start
    offset_ = std::max(exact_d_, fallback_d_) + 2;
    fwd_.v.assign(static_cast<size_t>(2 * offset_ + 1), -1);
    rev_.v.assign(static_cast<size_t>(2 * offset_ + 1), -1);
}

// Each step clears the two diagonals beyond its reach before reading them (advance), so a search
// costs its steps, not the size of the arrays.
void MyersSearch::reset(Frontier& f) {
    f.v[static_cast<size_t>(offset_ - 1)] = -1;
    f.v[static_cast<size_t>(offset_ + 1)] = 0;   // so that step 0 starts at (0, 0)
    f.cut_lo = f.cut_hi = 0;
    f.best_x = f.best_y = 0;
}

// One step of cost d from one corner (Myers §3: each diagonal's furthest point is one edit from
// a neighbour's, then down the snake of equal elements). With `check`, a point that reaches past
// the other search's furthest point on the same diagonal closes the search: a shortest path
// runs through it (Myers §4b, Lemma 3).
template <bool Reverse>
bool MyersSearch::advance(Frontier& f, const Frontier& other, int64_t d, bool check, Cut& hit) {
    // Locals, not members: the stores into `v` could otherwise alias them and force reloads.
    int64_t* v = f.v.data() + offset_;
    const int64_t* ov = other.v.data() + offset_;
    const int64_t n = n_, m = m_, delta = n - m;
    const int32_t* a = Reverse ? a_ + a0_ + n - 1 : a_ + a0_;   // element x from this corner: a[x] or a[-x]
    const int32_t* b = Reverse ? b_ + b0_ + m - 1 : b_ + b0_;
    int64_t best = f.best_x + f.best_y, cut_lo = f.cut_lo, cut_hi = f.cut_hi;
    uint64_t work = 0;
    bool met = false;
    if (d > 0) v[-d - 1] = v[d + 1] = -1;   // first read at this step: whatever an earlier search left there goes
    for (int64_t k = -d + cut_lo; k <= d - cut_hi; k += 2) {
        int64_t x = (k == -d || (k != d && v[k - 1] < v[k + 1])) ? v[k + 1] : v[k - 1] + 1;
        int64_t y = x - k;
        const int64_t x0 = x;
        while (x < n && y < m && (Reverse ? a[-x] == b[-y] : a[x] == b[y])) ++x, ++y;
        work += static_cast<uint64_t>(1 + x - x0);
        v[k] = x;
        if (x > n || y > m) {   // ran off the grid: the diagonals beyond are out of it from here on
            (x > n ? cut_hi : cut_lo) += 2;
            continue;
        }
        if (x + y > best) best = x + y, f.best_x = x, f.best_y = y;
        const int64_t ko = delta - k;   // the same diagonal seen from the other corner
        if (!check || ko < -d || ko > d) continue;
        const int64_t xo = ov[ko];
        if (xo < 0 || xo > n || xo - ko < 0 || xo - ko > m || x + xo < n) continue;
        hit = Reverse ? Cut{n - x, m - y, false} : Cut{x, y, false};
        met = true;
        break;
    }
    f.cut_lo = cut_lo, f.cut_hi = cut_hi;
    out_.work += work;
    return met;
}

// The cut at the furthest point either search reached (GNU diff's heuristic when the search is
// too expensive): the part on that search's side costs at most the steps taken.
Cut MyersSearch::furthest_cut() const {
    if (fwd_.best_x + fwd_.best_y >= rev_.best_x + rev_.best_y) return {fwd_.best_x, fwd_.best_y, false};
    return {n_ - rev_.best_x, m_ - rev_.best_y, true};
}

Cut MyersSearch::middle(int64_t a0, int64_t n, int64_t b0, int64_t m) {
    a0_ = a0, b0_ = b0, n_ = n, m_ = m;
    const int64_t dlim = std::min<int64_t>(exact_ ? exact_d_ : fallback_d_, (n + m + 1) / 2);
    reset(fwd_);
    reset(rev_);
    // Odd delta: the two searches meet during a forward step; even: during a reverse one.
    const bool odd = (n - m) % 2 != 0;
    Cut hit;
    for (int64_t d = 0; d <= dlim; ++d) {
        if (advance<false>(fwd_, rev_, d, odd, hit)) return hit;
        if (advance<true>(rev_, fwd_, d, !odd, hit)) return hit;
        if (exact_ && out_.work > max_work_) break;
    }
    exact_ = false;   // more than max_edits edits, or past max_work: no longer a minimum
    out_.exact = false;
    return furthest_cut();
}

void MyersSearch::solve(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
    for (;;) {
        while (a0 < a1 && b0 < b1 && a_[a0] == b_[b0]) ++a0, ++b0;
        while (a0 < a1 && b0 < b1 && a_[a1 - 1] == b_[b1 - 1]) --a1, --b1;
        if (a0 == a1 || b0 == b1) {
            std::fill(out_.deleted.begin() + a0, out_.deleted.begin() + a1, uint8_t{1});
            std::fill(out_.inserted.begin() + b0, out_.inserted.begin() + b1, uint8_t{1});
            return;
        }
        Cut c = middle(a0, a1 - a0, b0, b1 - b0);
        // A cut at a corner would leave the problem whole; it cannot come out of the search on a
        // trimmed problem (D >= 2 there), but a loop must never depend on that: drop one element.
        if ((c.x == 0 && c.y == 0) || (c.x == a1 - a0 && c.y == b1 - b0)) {
            c = {1, 0, false};
            out_.exact = false;
        }
        // Recurse on the side known to be cheap and loop on the other, so that the depth stays
        // logarithmic even when heuristic cuts chip a long problem away from one end.
        if (c.reverse_side) {
            solve(a0 + c.x, a1, b0 + c.y, b1);
            a1 = a0 + c.x, b1 = b0 + c.y;
        } else {
            solve(a0, a0 + c.x, b0, b0 + c.y);
            a0 += c.x, b0 += c.y;
        }
    }
}

// For each gap between kept elements (gap t: after the t-th kept one, t = 0 before the first),
// whether a changed element lies in it.
std::vector<uint8_t> gaps_with_changes(const std::vector<uint8_t>& changed) {
    std::vector<uint8_t> g(1, 0);
    for (uint8_t c : changed)
        if (c)
            g.back() = 1;
        else
            g.push_back(0);
    return g;
}

// How far the run [s, e) of changed elements, in gap t, may move to reach the nearest gap where the
// other side changes too: negative up, positive down, 0 to stay. A step moves the run over one
// equal element and never onto a neighbouring run.
int64_t nearest_meeting(const std::vector<int32_t>& x, const std::vector<uint8_t>& changed, int64_t s, int64_t e, int64_t t,
                        const std::vector<uint8_t>& other_gaps) {
    const int64_t n = static_cast<int64_t>(x.size());
    int64_t up = 0, down = 0;
    for (int64_t u = 1; s - u >= 0 && !changed[static_cast<size_t>(s - u)] && x[static_cast<size_t>(s - u)] == x[static_cast<size_t>(e - u)] &&
                        (s - u == 0 || !changed[static_cast<size_t>(s - u - 1)]);
         ++u)
        if (other_gaps[static_cast<size_t>(t - u)]) {
            up = u;
            break;
        }
    for (int64_t u = 1; e + u - 1 < n && !changed[static_cast<size_t>(e + u - 1)] &&
                        x[static_cast<size_t>(e + u - 1)] == x[static_cast<size_t>(s + u - 1)] && (e + u == n || !changed[static_cast<size_t>(e + u)]);
         ++u)
        if (other_gaps[static_cast<size_t>(t + u)]) {
            down = u;
            break;
        }
    if (up && (!down || up <= down)) return -up;
    return down;
}

void slide_side(const std::vector<int32_t>& x, std::vector<uint8_t>& changed, const std::vector<uint8_t>& other_gaps) {
    const int64_t n = static_cast<int64_t>(x.size());
    int64_t kept = 0;
    for (int64_t i = 0; i < n;) {
        if (!changed[static_cast<size_t>(i)]) {
            ++kept, ++i;
            continue;
        }
        int64_t e = i;
        while (e < n && changed[static_cast<size_t>(e)]) ++e;
        const int64_t shift = other_gaps[static_cast<size_t>(kept)] ? 0 : nearest_meeting(x, changed, i, e, kept, other_gaps);
        if (shift != 0) {
            std::fill(changed.begin() + i, changed.begin() + e, uint8_t{0});
            std::fill(changed.begin() + (i + shift), changed.begin() + (e + shift), uint8_t{1});
        }
        kept += shift;   // the elements the run moved over change sides of it
        i = e + shift;
    }
}

// A lower bound on the edits, in linear time: each element occurring more often on one side than on
// the other is deleted or inserted that many times at least. Two unrelated logs are thus known to
// be past max_edits before any search (which would spend max_work finding it out).
size_t histogram_bound(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    int32_t top = 0;
    for (int32_t x : a) top = std::max(top, x);
    for (int32_t x : b) top = std::max(top, x);
    if (top >= (int32_t{1} << 24)) return 0;   // not dense codes: no bound
    std::vector<int64_t> diff(static_cast<size_t>(top) + 1, 0);
    for (int32_t x : a) diff[static_cast<size_t>(std::max(x, 0))]++;
    for (int32_t x : b) diff[static_cast<size_t>(std::max(x, 0))]--;
    size_t bound = 0;
    for (int64_t d : diff) bound += static_cast<size_t>(d < 0 ? -d : d);
    return bound;
}

}  // namespace

EditScript shortest_edit_script(const std::vector<int32_t>& a, const std::vector<int32_t>& b, const EditLimits& limits) {
    EditScript s;
    s.deleted.assign(a.size(), 0);
    s.inserted.assign(b.size(), 0);
    EditLimits lim = limits;
    if (histogram_bound(a, b) > lim.max_edits) lim.max_edits = 0;   // no long search: bounded ones from the start
    MyersSearch search(a, b, lim, s);
    search.solve(0, static_cast<int64_t>(a.size()), 0, static_cast<int64_t>(b.size()));
    return s;
}

void slide_runs_together(const std::vector<int32_t>& a, const std::vector<int32_t>& b, EditScript& script) {
    slide_side(a, script.deleted, gaps_with_changes(script.inserted));
    slide_side(b, script.inserted, gaps_with_changes(script.deleted));
}

}  // namespace zerosim::validate_detail
