#include "validate/align.hpp"

#include <string_view>
#include <unordered_map>

#include "edit_script.hpp"

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

using validate_detail::EditLimits;
using validate_detail::EditScript;

bool same_op(const LoggedOp& a, const LoggedOp& b) { return a.record == b.record && a.size_text == b.size_text; }

// Each op as two small integers, equal exactly when the ops are: its name, and its name and
// printed size. The views point into the ops, which outlive them.
struct OpCodes {
    std::vector<int32_t> pred_op, meas_op, pred_name, meas_name;
};

OpCodes op_codes(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas) {
    std::unordered_map<std::string_view, int32_t> names, sizes;
    std::unordered_map<int64_t, int32_t> ops;
    auto code = [](auto& table, const auto& key) {
        return table.try_emplace(key, static_cast<int32_t>(table.size())).first->second;
    };
    OpCodes c;
    for (int side = 0; side < 2; ++side) {
        const auto& log = side == 0 ? pred : meas;
        auto& op = side == 0 ? c.pred_op : c.meas_op;
        auto& name = side == 0 ? c.pred_name : c.meas_name;
        op.reserve(log.size());
        name.reserve(log.size());
        for (const LoggedOp& o : log) {
            const int32_t n = code(names, std::string_view(o.record)), s = code(sizes, std::string_view(o.size_text));
            name.push_back(n);
            op.push_back(code(ops, (static_cast<int64_t>(n) << 32) | static_cast<uint32_t>(s)));
        }
    }
    return c;
}

// The limits of one search, with what is left of the alignment's work budget (shared by the ops'
// script and every run's names, so that the whole alignment stays within max_work).
struct Budget {
    AlignLimits limits;
    uint64_t left;
    EditLimits next() const { return {limits.max_edits, left, limits.fallback_d}; }
    void spend(uint64_t w) { left = w >= left ? 0 : left - w; }
};

// One run of differences: predicted ops [p0, p1) and measured ops [m0, m1) between two matches.
// Ops of the same name pair up as resized, in the order of the names' shortest edit script.
void emit_run(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const OpCodes& c, size_t p0, size_t p1,
              size_t m0, size_t m1, Budget& budget, Alignment& out) {
    EditScript names;
    if (p0 < p1 && m0 < m1) {
        const std::vector<int32_t> a(c.pred_name.begin() + static_cast<long>(p0), c.pred_name.begin() + static_cast<long>(p1)),
            b(c.meas_name.begin() + static_cast<long>(m0), c.meas_name.begin() + static_cast<long>(m1));
        names = validate_detail::shortest_edit_script(a, b, budget.next());
        budget.spend(names.work);
        out.exact = out.exact && names.exact;
    } else {
        names.deleted.assign(p1 - p0, 1);
        names.inserted.assign(m1 - m0, 1);
    }
    size_t i = 0, j = 0;
    while (p0 + i < p1 || m0 + j < m1) {
        if (p0 + i < p1 && names.deleted[i]) {
            out.entries.push_back({DiffKind::Missing, static_cast<int>(p0 + i++), -1});
        } else if (m0 + j < m1 && names.inserted[j]) {
            out.entries.push_back({DiffKind::Extra, -1, static_cast<int>(m0 + j++)});
        } else {
            // Equal ops inside a run only come from a script that is not a minimum (exact false).
            const DiffKind k = same_op(pred[p0 + i], meas[m0 + j]) ? DiffKind::Match : DiffKind::Resized;
            out.entries.push_back({k, static_cast<int>(p0 + i++), static_cast<int>(m0 + j++)});
        }
    }
}

// The script as entries in order: matches one for one, each run of differences through emit_run.
void emit_entries(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const OpCodes& c, const EditScript& s,
                  Budget& budget, Alignment& out) {
    const size_t n = pred.size(), m = meas.size();
    out.entries.reserve(std::max(n, m));
    size_t i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && !s.deleted[i] && !s.inserted[j]) {
            out.entries.push_back({DiffKind::Match, static_cast<int>(i++), static_cast<int>(j++)});
            continue;
        }
        size_t i1 = i, j1 = j;
        while (i1 < n && s.deleted[i1]) ++i1;
        while (j1 < m && s.inserted[j1]) ++j1;
        emit_run(pred, meas, c, i, i1, j, j1, budget, out);
        i = i1, j = j1;
    }
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

Alignment align_ops(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const AlignLimits& limits) {
    const OpCodes c = op_codes(pred, meas);
    Budget budget{limits, limits.max_work};
    EditScript s = validate_detail::shortest_edit_script(c.pred_op, c.meas_op, budget.next());
    budget.spend(s.work);
    validate_detail::slide_runs_together(c.pred_op, c.meas_op, s);
    Alignment out;
    out.exact = s.exact;
    emit_entries(pred, meas, c, s, budget, out);
    out.entries = fold_swaps(out.entries, pred, meas);
    return out;
}

}  // namespace zerosim
