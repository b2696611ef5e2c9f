// Alignment in linear memory: on logs too long for the exact table, the windowed alignment must
// report what the exact one reports (the exact dynamic programme is the oracle), and the edits
// made by hand must come back as exactly those edits.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "validate/align.hpp"

using namespace zerosim;

namespace {

LoggedOp op(const std::string& record, const std::string& size) {
    LoggedOp o;
    o.record = record;
    o.size_text = size;
    return o;
}

// A training-like log: the same step of `period` ops repeated, with runs of identical ops.
std::vector<LoggedOp> periodic_log(size_t n, size_t period) {
    const char* records[] = {"all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "all_reduce"};
    std::vector<LoggedOp> out;
    for (size_t i = 0; i < n; ++i) {
        size_t k = i % period;
        out.push_back(op(records[(k / 3) % 4], std::to_string(64 << (k % 5)) + " KB"));
    }
    return out;
}

struct Counts {
    size_t match = 0, missing = 0, extra = 0, resized = 0, swapped = 0;
    bool operator==(const Counts& o) const {
        return match == o.match && missing == o.missing && extra == o.extra && resized == o.resized && swapped == o.swapped;
    }
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

AlignLimits windowed_only() {
    AlignLimits l;
    l.exact_cells = 0;   // never the whole table
    return l;
}

}  // namespace

TEST(Align, WindowedReportsTheHandMadeEdits) {
    std::vector<LoggedOp> pred = periodic_log(3000, 37), meas = pred;
    // By hand: remove predicted ops 100 and 1500, insert a barrier before predicted op 2001 (now
    // at 1999), resize predicted op 2500 (two removed and one inserted before it: measured 2499).
    meas.erase(meas.begin() + 1500);
    meas.erase(meas.begin() + 100);
    meas.insert(meas.begin() + 1999, op("barrier", "0B"));
    meas[2499].size_text = "3.0 MB";
    auto e = align_ops(pred, meas, windowed_only());
    Counts c = count(e);
    EXPECT_EQ(c.missing, 2u);
    EXPECT_EQ(c.extra, 1u);
    EXPECT_EQ(c.resized, 1u);
    EXPECT_EQ(c.match, 3000u - 3u);
    for (const auto& x : e)
        if (x.kind == DiffKind::Resized) {
            EXPECT_EQ(x.pred, 2500);
            EXPECT_EQ(x.meas, 2499);
        } else if (x.kind == DiffKind::Extra) {
            EXPECT_EQ(meas[static_cast<size_t>(x.meas)].record, "barrier");
        }
}

TEST(Align, WindowedEqualsExactOnSparseRandomEdits) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<LoggedOp> pred = periodic_log(1500 + static_cast<size_t>(trial) * 37, 23 + static_cast<size_t>(trial)), meas = pred;
        // About 1% of the ops removed, inserted or resized, at random places.
        std::uniform_int_distribution<size_t> what(0, 2);
        for (int k = 0; k < 15; ++k) {
            std::uniform_int_distribution<size_t> at(0, meas.size() - 1);
            size_t i = at(rng);
            switch (what(rng)) {
                case 0: meas.erase(meas.begin() + static_cast<long>(i)); break;
                case 1: meas.insert(meas.begin() + static_cast<long>(i), op("all_reduce", "4.0 B")); break;
                default: meas[i].size_text = "9.99 GB"; break;
            }
        }
        Counts exact = count(align_ops(pred, meas));
        Counts windowed = count(align_ops(pred, meas, windowed_only()));
        EXPECT_TRUE(exact == windowed) << "trial " << trial << ": exact missing/extra/resized/swapped " << exact.missing << "/"
                                       << exact.extra << "/" << exact.resized << "/" << exact.swapped << ", windowed "
                                       << windowed.missing << "/" << windowed.extra << "/" << windowed.resized << "/"
                                       << windowed.swapped;
    }
}

TEST(Align, WindowedHandlesAGapLongerThanItsFirstWindow) {
    // 300 ops missing in one block: the window must grow past 32 and 256 to find the logs in step.
    // The ops do not repeat (a periodic log with a gap longer than the window can be put back in
    // step at more than one place, and the windowed alignment then keeps a local choice).
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> size(1, 1 << 20);
    std::vector<LoggedOp> pred;
    for (int i = 0; i < 4000; ++i) pred.push_back(op("all_gather_into_tensor", std::to_string(size(rng)) + " B"));
    std::vector<LoggedOp> meas = pred;
    meas.erase(meas.begin() + 1000, meas.begin() + 1300);
    Counts c = count(align_ops(pred, meas, windowed_only()));
    EXPECT_EQ(c.missing, 300u);
    EXPECT_EQ(c.extra, 0u);
    EXPECT_EQ(c.resized, 0u);
    EXPECT_EQ(c.match, 3700u);
}
