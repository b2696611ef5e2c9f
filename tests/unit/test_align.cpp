// The alignment is a minimum edit script (validate/align.hpp): small cases whose script is worked
// out by hand, random cases against an independent longest-common-subsequence oracle (a plain
// dynamic programme; on long logs a bit-parallel one), and a long real-shaped log (a real
// DeepSpeed run's steps repeated to 100,000 ops) with ops removed, inserted and resized at known
// places, whose counts must come back exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "formats/measured_logs.hpp"
#include "test_helpers.hpp"
#include "validate/align.hpp"
#include "validate/diff.hpp"

using namespace zerosim;

namespace {

LoggedOp op(const std::string& record, const std::string& size) {
    LoggedOp o;
    o.record = record;
    o.size_text = size;
    return o;
}

// "AG:1 RS:2" -> all_gather_into_tensor 1 KB, reduce_scatter_tensor 2 KB (a name and a size each).
std::vector<LoggedOp> ops(const std::string& text) {
    static const std::map<std::string, std::string> names = {
        {"AG", "all_gather_into_tensor"}, {"RS", "reduce_scatter_tensor"}, {"AR", "all_reduce"}, {"BC", "broadcast"}, {"BA", "barrier"}};
    std::vector<LoggedOp> out;
    std::istringstream in(text);
    for (std::string t; in >> t;) out.push_back(op(names.at(t.substr(0, 2)), t.substr(3) + " KB"));
    return out;
}

struct Counts {
    size_t match = 0, missing = 0, extra = 0, resized = 0, swapped = 0;
};

Counts count(const std::vector<DiffEntry>& e) {
    Counts c;
    for (const auto& x : e) switch (x.kind) {
            case DiffKind::Match: ++c.match; break;
            case DiffKind::Missing: ++c.missing; break;
            case DiffKind::Extra: ++c.extra; break;
            case DiffKind::Resized: ++c.resized; break;
            case DiffKind::Swapped: ++c.swapped; break;
        }
    return c;
}

bool same(const LoggedOp& a, const LoggedOp& b) { return a.record == b.record && a.size_text == b.size_text; }

// The entries are an edit script of pred into meas: every op of each side once, in order; matched
// ops equal; resized ops of one name and two sizes; swapped pairs crosswise equal. Returns the
// length of the common subsequence the script keeps (each match, and one op of each swap: a swap
// is a missing op, a match and an extra op), or -1 with a failure recorded.
long check_script(const std::vector<LoggedOp>& pred, const std::vector<LoggedOp>& meas, const std::vector<DiffEntry>& e) {
    size_t i = 0, j = 0;
    long matched = 0;
    for (const auto& x : e) {
        const bool takes_pred = x.kind != DiffKind::Extra, takes_meas = x.kind != DiffKind::Missing;
        if ((takes_pred && x.pred != static_cast<int>(i)) || (takes_meas && x.meas != static_cast<int>(j))) {
            ADD_FAILURE() << diff_kind_name(x.kind) << " at " << x.pred << "/" << x.meas << ", expected " << i << "/" << j;
            return -1;
        }
        const LoggedOp *p = takes_pred ? &pred[i] : nullptr, *m = takes_meas ? &meas[j] : nullptr;
        bool ok = true;
        switch (x.kind) {
            case DiffKind::Match: ok = same(*p, *m); ++matched; break;
            case DiffKind::Resized: ok = p->record == m->record && p->size_text != m->size_text; break;
            case DiffKind::Swapped:
                ok = x.pred2 == x.pred + 1 && x.meas2 == x.meas + 1 && same(*p, meas[j + 1]) && same(pred[i + 1], *m);
                matched += 1, ++i, ++j;
                break;
            default: break;
        }
        if (!ok) {
            ADD_FAILURE() << diff_kind_name(x.kind) << " at " << x.pred << "/" << x.meas << " does not hold";
            return -1;
        }
        i += takes_pred, j += takes_meas;
    }
    EXPECT_EQ(i, pred.size());
    EXPECT_EQ(j, meas.size());
    return matched;
}

// The oracle: the longest common subsequence of ops by the textbook dynamic programme.
long lcs_table(const std::vector<LoggedOp>& a, const std::vector<LoggedOp>& b) {
    std::vector<long> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
    for (size_t i = 1; i <= a.size(); ++i) {
        for (size_t j = 1; j <= b.size(); ++j)
            cur[j] = same(a[i - 1], b[j - 1]) ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

// The same length on long logs: the bit-parallel LCS (L. Allison and T. I. Dix, "A bit-string
// longest-common-subsequence algorithm", IPL 23, 1986), one bit per op of `a`.
long lcs_bits(const std::vector<LoggedOp>& a, const std::vector<LoggedOp>& b) {
    std::map<std::string, std::vector<uint64_t>> match;
    const size_t words = (a.size() + 63) / 64;
    for (size_t i = 0; i < a.size(); ++i) {
        auto& m = match.try_emplace(a[i].record + "|" + a[i].size_text, words, 0).first->second;
        m[i / 64] |= uint64_t{1} << (i % 64);
    }
    std::vector<uint64_t> v(words, ~uint64_t{0});
    const std::vector<uint64_t> none(words, 0);
    for (const LoggedOp& o : b) {
        auto it = match.find(o.record + "|" + o.size_text);
        const std::vector<uint64_t>& m = it == match.end() ? none : it->second;
        uint64_t carry = 0;
        for (size_t w = 0; w < words; ++w) {
            const uint64_t u = v[w] & m[w], t = v[w] + u, sum = t + carry;
            carry = (t < v[w] || sum < t) ? 1 : 0;
            v[w] = sum | (v[w] & ~m[w]);
        }
    }
    long zeros = 0;
    for (size_t i = 0; i < a.size(); ++i) zeros += !((v[i / 64] >> (i % 64)) & 1);
    return zeros;
}

}  // namespace

// Each case's minimum script worked out by hand.
TEST(Align, HandBuiltCases) {
    struct Case {
        const char *pred, *meas;
        size_t match, missing, extra, resized, swapped;
    };
    const Case cases[] = {
        // B removed: the only longest common subsequence is A C D.
        {"AG:1 RS:2 AR:3 BC:4", "AG:1 AR:3 BC:4", 3, 1, 0, 0, 0},
        // One of three equal ops removed: two match, one missing (which one is immaterial).
        {"AG:1 AG:1 AG:1", "AG:1 AG:1", 2, 1, 0, 0, 0},
        // Z inserted.
        {"AG:1 RS:2", "AG:1 AR:9 RS:2", 2, 0, 1, 0, 0},
        // The middle of three equal ops resized: AG:9 must be inserted and one AG:1 dropped; only
        // the middle one shares AG:9's gap between the two kept ops, so one resized op.
        {"AG:1 AG:1 AG:1", "AG:1 AG:9 AG:1", 2, 0, 0, 1, 0},
        // A and B in the other order: missing A, match B, extra A -> one swapped pair.
        {"AG:1 RS:2 AR:3", "RS:2 AG:1 AR:3", 1, 0, 0, 0, 1},
        // An op replaced by one of another name: missing and extra, not resized.
        {"AG:1 RS:2 AR:3", "AG:1 BC:2 AR:3", 2, 1, 1, 0, 0},
        // Two neighbours both resized: their names pair in order, two resized ops.
        {"AR:1 AG:1 RS:1 BC:1", "AR:1 AG:2 RS:2 BC:1", 2, 0, 0, 2, 0},
        // The names in the other order: the names' longest common subsequence is one long, so one
        // pair is resized and the other op is missing on one side and extra on the other.
        {"AR:1 AG:1 RS:1 BC:1", "AR:1 RS:2 AG:2 BC:1", 2, 1, 1, 1, 0},
        // RS:2 removed after AG and an RS:3 inserted before BC: the only common subsequence of
        // four is AG AR BA BC, with the two edits in different gaps, so they stay missing and extra.
        {"AG:1 RS:2 AR:1 BA:1 BC:1", "AG:1 AR:1 BA:1 RS:3 BC:1", 4, 1, 1, 0, 0},
        // Empty sides.
        {"", "AG:1 RS:2 AR:3", 0, 0, 3, 0, 0},
        {"AG:1 RS:2", "", 0, 2, 0, 0, 0},
    };
    for (const Case& c : cases) {
        auto pred = ops(c.pred), meas = ops(c.meas);
        Alignment a = align_ops(pred, meas);
        Counts n = count(a.entries);
        EXPECT_TRUE(a.exact);
        EXPECT_GE(check_script(pred, meas, a.entries), 0) << c.pred << " | " << c.meas;
        EXPECT_EQ(n.match, c.match) << c.pred << " | " << c.meas;
        EXPECT_EQ(n.missing, c.missing) << c.pred << " | " << c.meas;
        EXPECT_EQ(n.extra, c.extra) << c.pred << " | " << c.meas;
        EXPECT_EQ(n.resized, c.resized) << c.pred << " | " << c.meas;
        EXPECT_EQ(n.swapped, c.swapped) << c.pred << " | " << c.meas;
    }
    // Where the resized op is: the middle one on both sides.
    Alignment r = align_ops(ops("AG:1 AG:1 AG:1"), ops("AG:1 AG:9 AG:1"));
    for (const auto& e : r.entries)
        if (e.kind == DiffKind::Resized) EXPECT_TRUE(e.pred == 1 && e.meas == 1) << e.pred << "/" << e.meas;
}

// On random logs over few distinct ops (many equal ones, the hard case) the script matches as
// many ops as the longest common subsequence holds: it is a minimum one.
TEST(Align, MatchesTheLongestCommonSubsequence) {
    std::mt19937 rng(2024);
    const char* names[] = {"AG", "RS", "AR"};
    for (int trial = 0; trial < 3000; ++trial) {
        const int kinds = 1 + trial % 3, sizes = 1 + (trial / 3) % 3;
        std::uniform_int_distribution<int> len(0, trial % 7 == 0 ? 8 : 60), name(0, kinds - 1), size(1, sizes);
        auto random_log = [&]() {
            std::string s;
            for (int i = len(rng); i > 0; --i) s += std::string(names[name(rng)]) + ":" + std::to_string(size(rng)) + " ";
            return ops(s);
        };
        auto pred = random_log(), meas = random_log();
        Alignment a = align_ops(pred, meas);
        ASSERT_TRUE(a.exact);
        const long matched = check_script(pred, meas, a.entries);
        ASSERT_EQ(matched, lcs_table(pred, meas)) << "trial " << trial;
    }
}

// Past its limits the alignment is still a valid script, and a minimum whenever it says it is
// exact.
TEST(Align, BeyondTheLimitsIsValidAndSaysSo) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> name(0, 1), size(1, 3);
    AlignLimits tight;
    tight.max_edits = 6;
    tight.fallback_d = 2;
    for (int trial = 0; trial < 500; ++trial) {
        std::string a, b;
        for (int i = 0; i < 40 + trial % 50; ++i) a += std::string(name(rng) ? "AG:" : "RS:") + std::to_string(size(rng)) + " ";
        for (int i = 0; i < 40 + trial % 37; ++i) b += std::string(name(rng) ? "AG:" : "RS:") + std::to_string(size(rng)) + " ";
        auto pred = ops(a), meas = ops(b);
        Alignment al = align_ops(pred, meas, tight);
        const long matched = check_script(pred, meas, al.entries);
        const long lcs = lcs_table(pred, meas);
        ASSERT_GE(matched, 0);
        EXPECT_LE(matched, lcs);
        if (al.exact) EXPECT_EQ(matched, lcs) << "trial " << trial;   // exact: no search was cut short
    }
    // Two logs with no op in common, 40,000 ops each: every op is an edit. With the limits set low
    // it stops searching at once; every op is of one name, so all pair up as resized.
    std::vector<LoggedOp> pred, meas;
    for (int i = 0; i < 40000; ++i) pred.push_back(op("all_reduce", std::to_string(i) + " B")), meas.push_back(op("all_reduce", std::to_string(i) + " KB"));
    AlignLimits low;
    low.max_edits = 1000;
    Alignment al = align_ops(pred, meas, low);
    EXPECT_FALSE(al.exact);
    EXPECT_EQ(check_script(pred, meas, al.entries), 0);
    EXPECT_EQ(count(al.entries).resized, 40000u);
}

namespace {

// A real-shaped log: the real z3 run's ops (DeepSpeed v0.14.2, ZeRO-3, 4 ranks) up to the end of
// its first step, then its later steps repeated in order to `n` ops, as a long run repeats its steps.
std::vector<LoggedOp> real_shaped_log(size_t n) {
    auto real = read_log(test::reference("deepspeed-v0.14.2-cpu/z3_default_w4/rank0.log"));
    EXPECT_TRUE(real.ok());
    if (!real.ok()) return {};
    std::vector<LoggedOp> head, step;
    for (const LoggedOp& o : real->ops) {
        if (o.phase.rfind("step1.", 0) == 0 || o.phase.rfind("step2.", 0) == 0)
            step.push_back(o);
        else if (o.phase.rfind("step", 0) != 0 || o.phase.rfind("step0.", 0) == 0)
            head.push_back(o);
    }
    EXPECT_GT(step.size(), 20u);
    std::vector<LoggedOp> out = head;
    for (size_t i = 0; out.size() < n; ++i) out.push_back(step[i % step.size()]);
    return out;
}

// The longest run of equal ops in a log: edits further apart than this cannot trade places.
size_t longest_equal_run(const std::vector<LoggedOp>& log) {
    size_t best = 0, run = 0;
    for (size_t i = 0; i < log.size(); ++i) {
        run = i > 0 && same(log[i], log[i - 1]) ? run + 1 : 1;
        best = std::max(best, run);
    }
    return best;
}

}  // namespace

// The case: 100,000 ops of a real run's steps, 60 ops removed, 40 real ops inserted and 30
// resized, every edit at least 500 ops from the next. The expected counts are the edits made; the
// bit-parallel LCS confirms that no shorter script exists (no two edits can cancel: the log's
// longest run of equal ops is far shorter than the spacing).
TEST(Align, LongRealShapedLogReportsExactlyTheEdits) {
    const std::vector<LoggedOp> pred = real_shaped_log(100000);
    ASSERT_EQ(pred.size(), 100000u);
    ASSERT_LT(longest_equal_run(pred), 100u);
    // Edit e (0..129) at predicted op 300 + 750 e: removed, inserted before, or resized.
    std::vector<LoggedOp> meas;
    std::vector<size_t> removed, resized;
    size_t inserted = 0;
    for (size_t i = 0, e = 0; i < pred.size(); ++i) {
        if (e < 130 && i == 300 + 750 * e) {
            const size_t kind = e % 13 < 6 ? 0 : e % 13 < 10 ? 1 : 2;   // 60 removed, 40 inserted, 30 resized
            ++e;
            if (kind == 0) {
                removed.push_back(i);
                continue;
            }
            if (kind == 1) {
                meas.push_back(pred[(i + 97) % pred.size()]);   // a real op from elsewhere in the run
                ++inserted;
            } else {
                LoggedOp o = pred[i];
                o.size_text = "777.0 MB";   // a size the run never logs
                meas.push_back(o);
                resized.push_back(i);
                continue;
            }
        }
        meas.push_back(pred[i]);
    }
    ASSERT_EQ(removed.size(), 60u);
    ASSERT_EQ(inserted, 40u);
    ASSERT_EQ(resized.size(), 30u);
    Alignment a = align_ops(pred, meas);
    EXPECT_TRUE(a.exact);
    const Counts c = count(a.entries);
    EXPECT_EQ(c.missing, 60u);
    EXPECT_EQ(c.extra, 40u);
    EXPECT_EQ(c.resized, 30u);
    EXPECT_EQ(c.swapped, 0u);
    EXPECT_EQ(c.match, pred.size() - 90);
    const long matched = check_script(pred, meas, a.entries);
    EXPECT_EQ(matched, lcs_bits(pred, meas));
    // Resized ops are reported where they were made; missing ones at that op or an equal neighbour.
    std::vector<size_t> got_resized, got_missing;
    for (const auto& x : a.entries) {
        if (x.kind == DiffKind::Resized) got_resized.push_back(static_cast<size_t>(x.pred));
        if (x.kind == DiffKind::Missing) got_missing.push_back(static_cast<size_t>(x.pred));
    }
    EXPECT_EQ(got_resized, resized);
    ASSERT_EQ(got_missing.size(), removed.size());
    for (size_t k = 0; k < removed.size(); ++k) {
        const size_t lo = std::min(got_missing[k], removed[k]), hi = std::max(got_missing[k], removed[k]);
        for (size_t i = lo; i < hi; ++i) EXPECT_TRUE(same(pred[i], pred[i + 1])) << "removed " << removed[k] << ", reported " << got_missing[k];
    }
}

// A whole block gone (a step the measured run did not log): exactly its ops missing, however
// often the same step repeats around it.
TEST(Align, ABlockRemovedFromARepeatingLogIsExactlyItsOps) {
    const std::vector<LoggedOp> pred = real_shaped_log(30000);
    std::vector<LoggedOp> meas = pred;
    meas.erase(meas.begin() + 12000, meas.begin() + 12500);
    meas.erase(meas.begin() + 2000, meas.begin() + 2003);
    Alignment a = align_ops(pred, meas);
    const Counts c = count(a.entries);
    EXPECT_TRUE(a.exact);
    EXPECT_EQ(c.missing, 503u);
    EXPECT_EQ(c.extra + c.resized + c.swapped, 0u);
    EXPECT_EQ(c.match, 30000u - 503u);
}

// Past the limits the report says so, in text and JSON: two logs of 60,000 ops with none in common
// need 120,000 edits, more than the 100,000 a minimum is searched for (AlignLimits).
TEST(Align, TheReportSaysWhenTheScriptIsNotAMinimum) {
    MeasuredLog pred, meas;
    for (int i = 0; i < 60000; ++i) {
        pred.ops.push_back(op("all_reduce", std::to_string(i) + " B"));
        meas.ops.push_back(op("broadcast", std::to_string(i) + " B"));
    }
    DiffReport r = diff_logs(pred, meas, 0.15, DiffScope::Ops);
    EXPECT_FALSE(r.alignment_exact);
    EXPECT_EQ(r.missing, 60000u);
    EXPECT_EQ(r.extra, 60000u);
    std::ostringstream text, json;
    write_diff_text(text, r);
    write_diff_json(json, r);
    EXPECT_NE(text.str().find("approximate: the logs differ in too many ops"), std::string::npos);
    EXPECT_NE(json.str().find("\"approximate\""), std::string::npos);
    // Logs that differ in one op say nothing of the kind.
    meas.ops = pred.ops;
    meas.ops.erase(meas.ops.begin() + 100);
    r = diff_logs(pred, meas, 0.15, DiffScope::Ops);
    EXPECT_TRUE(r.alignment_exact);
    std::ostringstream text2;
    write_diff_text(text2, r);
    EXPECT_EQ(text2.str().find("approximate"), std::string::npos);
}

// Runs of equal ops (a model's identical layers: 40 all_gathers of one size in a row): the search
// may put a resized op's deletion and its insertion at different places of the run (each is a
// minimum script); sliding them together is what makes it one resized op (without it: 14 resized,
// 26 missing, 6 extra). Every 100 ops, op 33 has its size changed and op 66 is removed: 20
// resized, 20 missing, nothing extra.
TEST(Align, ResizedInsideRunsOfEqualOpsAreFoundInPlace) {
    std::string step;
    for (int i = 0; i < 40; ++i) step += "AG:1 ";
    step += "RS:2 RS:2 RS:2 ";
    for (int i = 0; i < 40; ++i) step += "AG:3 ";
    step += "AR:4 ";
    std::vector<LoggedOp> pred;
    while (pred.size() < 2000) {
        auto s = ops(step);
        pred.insert(pred.end(), s.begin(), s.end());
    }
    pred.resize(2000);
    std::vector<LoggedOp> meas;
    std::vector<int> resized_at;
    for (int i = 0; i < 2000; ++i) {
        if (i % 100 == 66) continue;
        meas.push_back(pred[static_cast<size_t>(i)]);
        if (i % 100 == 33) meas.back().size_text = "9.0 MB", resized_at.push_back(i);
    }
    Alignment a = align_ops(pred, meas);
    const Counts c = count(a.entries);
    EXPECT_EQ(c.resized, 20u);
    EXPECT_EQ(c.missing, 20u);
    EXPECT_EQ(c.extra, 0u);
    EXPECT_EQ(check_script(pred, meas, a.entries), lcs_table(pred, meas));
    // Each resized entry pairs the measured 9.0 MB op with the op resized or an equal neighbour of it
    // (the predicted ops of a run are the same op).
    size_t k = 0;
    for (const auto& e : a.entries) {
        if (e.kind != DiffKind::Resized || k >= resized_at.size()) continue;
        EXPECT_EQ(meas[static_cast<size_t>(e.meas)].size_text, "9.0 MB");
        const int lo = std::min(e.pred, resized_at[k]), hi = std::max(e.pred, resized_at[k]);
        for (int i = lo; i < hi; ++i) EXPECT_TRUE(same(pred[static_cast<size_t>(i)], pred[static_cast<size_t>(i + 1)])) << e.pred;
        ++k;
    }
}
