// Validation per rank (docs/validate.md, "One log per rank"): the "[Rank N]" the reader takes from
// log_dist's prefix, a log of several ranks split by it, the rank a file name says, the pairing
// of predicted and measured logs by rank and its refusals, and each rank of the exact reference
// runs (tensor and Ulysses) validated against its own prediction.
#include <gtest/gtest.h>

#include <sstream>

#include "formats/comms_log.hpp"
#include "formats/measured_logs.hpp"
#include "reference_3d.hpp"
#include "validate/per_rank.hpp"

namespace zerosim {
namespace {

const std::string kPrefix = "[2026-12-01 20:16:38,384] [INFO] [logging.py:96:log_dist] ";

std::string line(int64_t rank, const std::string& size = "8.0 KB") {
    return kPrefix + "[Rank " + std::to_string(rank) + "] comm op: all_reduce | [Caller Func: forward] | time (ms): 1.00 | msg size: " +
           size + " | algbw (Gbps): 0.01 | busbw (Gbps): 0.00\n";
}

MeasuredLog parsed(const std::string& text, const std::string& name) {
    auto log = parse_log(text, name);
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().what());
    return log.ok() ? log.value() : MeasuredLog{};
}

TEST(RankReader, TakesTheRankOfLogDistsPrefix) {
    auto p = parse_ds_verbose_line(line(2));
    ASSERT_TRUE(p);
    EXPECT_TRUE(p->rank_named);
    EXPECT_EQ(p->op.rank, 2);
    // A launcher's own prefix before log_dist's: the rank is still log_dist's.
    p = parse_ds_verbose_line("[Rank 7] worker-3: " + line(13));
    ASSERT_TRUE(p);
    EXPECT_EQ(p->op.rank, 13);
    // No rank, or log_dist's "-1" before torch.distributed is up: not named, rank 0 by default.
    for (const std::string& text : {std::string("rank=0 | comm op: all_reduce | msg size: 4.0 B"),
                                    kPrefix + "[Rank -1] comm op: all_reduce | msg size: 4.0 B"}) {
        p = parse_ds_verbose_line(text);
        ASSERT_TRUE(p) << text;
        EXPECT_FALSE(p->rank_named) << text;
        EXPECT_EQ(p->op.rank, 0) << text;
    }
    // A "[Rank N]" after "comm op:" (a caller's text) is not the prefix's.
    p = parse_ds_verbose_line("comm op: all_reduce | [Caller Func: x] | [Rank 3] | msg size: 4.0 B");
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->rank_named);
}

TEST(RankReader, SplitsALogOfSeveralRanks) {
    MeasuredLog log = parsed(line(1) + line(0, "4.0 B") + line(1, "16.0 KB") + line(0), "all.log");
    EXPECT_EQ(log.ranks, (std::vector<int64_t>{0, 1}));
    auto parts = split_by_rank(log);
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), 2u);
    EXPECT_EQ((*parts)[0].ranks, std::vector<int64_t>{0});
    ASSERT_EQ((*parts)[0].ops.size(), 2u);
    EXPECT_EQ((*parts)[0].ops[0].size_text, "4.0 B");
    EXPECT_EQ((*parts)[0].ops[1].line, 4);
    ASSERT_EQ((*parts)[1].ops.size(), 2u);
    EXPECT_EQ((*parts)[1].ops[1].size_text, "16.0 KB");
    // A line that names no rank among lines of two: whose it is cannot be told.
    log = parsed(line(0) + "comm op: all_reduce | msg size: 4.0 B\n" + line(1), "mixed.log");
    auto refused = split_by_rank(log);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().file, "mixed.log:2");
    // One rank's log comes back whole, summary table and all.
    log = parsed(line(3) + line(3), "rank3.log");
    parts = split_by_rank(log);
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), 1u);
    EXPECT_EQ((*parts)[0].ops.size(), 2u);
}

TEST(RankReader, RankInFileName) {
    EXPECT_EQ(rank_in_file_name("RUN/rank0.log"), 0);
    EXPECT_EQ(rank_in_file_name("/a/b/rank12.json"), 12);
    EXPECT_EQ(rank_in_file_name("rank3"), 3);
    for (const char* other : {"rank.log", "rank0x.log", "ranks0.log", "myrank0.log", "rank0/x.log"})
        EXPECT_FALSE(rank_in_file_name(other)) << other;
}

std::map<int64_t, MeasuredLog> by_rank(const std::vector<MeasuredLog>& logs) {
    auto m = logs_by_rank(logs);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().what());
    return m.ok() ? m.value() : std::map<int64_t, MeasuredLog>{};
}

TEST(RankPairing, RefusesWhatIsNotOneLogPerRank) {
    // The same rank twice: in two files, or a file's lines and another's name.
    auto twice = logs_by_rank({parsed(line(1), "a/rank1.log"), parsed(line(1), "b/rank1.log")});
    ASSERT_FALSE(twice.ok());
    EXPECT_EQ(twice.error().file, "b/rank1.log");
    EXPECT_NE(twice.error().message.find("a second log of rank 1 (the first: a/rank1.log)"), std::string::npos);
    // Lines and name that disagree.
    auto renamed = logs_by_rank({parsed(line(2), "RUN/rank0.log")});
    ASSERT_FALSE(renamed.ok());
    EXPECT_EQ(renamed.error().message, "its lines are rank 2's (\"[Rank 2]\") but its name says rank 0");
    // A log that says no rank: rank 0's when alone, refused among others.
    std::string bare = "comm op: all_reduce | msg size: 4.0 B\n";
    EXPECT_EQ(by_rank({parsed(bare, "x.log")}).begin()->first, 0);
    auto unknown = logs_by_rank({parsed(bare, "x.log"), parsed(line(1), "y.log")});
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.error().file, "x.log");

    auto pred = by_rank({parsed(line(0) + line(1) + line(2) + line(3), "pred.log")});
    // A rank outside the predicted world.
    auto outside = pair_ranks(pred, by_rank({parsed(line(0), "rank0.log"), parsed(line(4), "rank4.log")}), "pred.log", "RUN");
    ASSERT_FALSE(outside.ok());
    EXPECT_EQ(outside.error().file, "rank4.log");
    EXPECT_EQ(outside.error().message, "rank 4 is outside the predicted world (pred.log holds ranks 0-3)");
    // A rank's log missing among several.
    auto missing = pair_ranks(pred, by_rank({parsed(line(0), "rank0.log"), parsed(line(1), "rank1.log"), parsed(line(3), "rank3.log")}),
                              "pred.log", "RUN");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().file, "RUN");
    EXPECT_EQ(missing.error().message, "no log of rank 2 (measured ranks 0, 1, 3, predicted 0-3); give one log per rank, or rank 0's alone");
    // A prediction with a rank left out.
    auto gap = pair_ranks(by_rank({parsed(line(0) + line(2), "pred.log")}), by_rank({parsed(line(0), "rank0.log")}), "pred.log", "RUN");
    ASSERT_FALSE(gap.ok());
    EXPECT_EQ(gap.error().message, "no prediction of rank 1 (it holds ranks 0, 2; a world of 3 needs every rank from 0)");
    // Rank 0's log alone (a user's real log): paired, the others named as not measured.
    auto alone = pair_ranks(pred, by_rank({parsed(line(0), "rank0.log")}), "pred.log", "RUN");
    ASSERT_TRUE(alone.ok());
    ASSERT_EQ(alone->pairs.size(), 1u);
    EXPECT_EQ(alone->unmeasured, (std::vector<int64_t>{1, 2, 3}));
}

// Rank R's predicted log, as `zerosim schedule ... --rank R --format deepspeed` writes it.
MeasuredLog predicted(const std::string& run, const std::string& kind, int64_t rank) {
    auto s = test::reference_3d_schedule(run, kind, rank);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
    std::ostringstream out;
    if (s.ok()) write_schedule_deepspeed(out, s.value(), DeepSpeedLogOptions{});
    return parsed(out.str(), "pred/rank" + std::to_string(rank) + ".log");
}

MeasuredLog measured(const std::string& run, int64_t rank) {
    auto log = read_log(test::reference(test::kReference3d + run + "/rank" + std::to_string(rank) + ".log"));
    EXPECT_TRUE(log.ok());
    return log.ok() ? log.value() : MeasuredLog{};
}

TEST(RankPairing, EveryRankOfTheExactRunsPasses) {
    for (auto [run, kind] : {std::pair{"tp2_dp2_z1", "tensor"}, {"tp2_dp2_z3", "tensor"}, {"sp2_dp2_z3", "ulysses"}, {"sp4_dp1_z1", "ulysses"}}) {
        SCOPED_TRACE(run);
        std::vector<MeasuredLog> preds, logs;
        for (int64_t r = 0; r < 4; ++r) {
            preds.push_back(predicted(run, kind, r));
            logs.push_back(measured(run, r));
            EXPECT_EQ(logs.back().ranks, std::vector<int64_t>{r});
        }
        auto pred = by_rank(preds), meas = by_rank(logs);
        auto pairs = pair_ranks(pred, meas, "pred", run);
        ASSERT_TRUE(pairs.ok());
        ASSERT_EQ(pairs->pairs.size(), 4u);
        for (const auto& p : pairs->pairs) {
            DiffReport d = diff_logs(*p.pred, *p.meas, 0.15, DiffScope::Ops);
            EXPECT_TRUE(d.pass()) << "rank " << p.rank << ": " << d.missing << " missing, " << d.extra << " extra";
            EXPECT_EQ(d.matched, p.meas->ops.size());
        }
    }
}

// Rank 0's prediction against rank 2's log where the ranks differ (pipeline stages would; tensor
// ranks share their ops, so the swap is a dropped line): the diff names what differs.
TEST(RankPairing, ADroppedLineFailsItsRank) {
    MeasuredLog log = measured("tp2_dp2_z1", 2);
    ASSERT_GT(log.ops.size(), 10u);
    log.ops.erase(log.ops.begin() + 9);
    DiffReport d = diff_logs(predicted("tp2_dp2_z1", "tensor", 2), log, 0.15, DiffScope::Ops);
    EXPECT_FALSE(d.pass());
    EXPECT_EQ(d.missing, 1u);
    EXPECT_EQ(d.extra, 0u);
    EXPECT_EQ(d.matched, 25u);
}

}  // namespace
}  // namespace zerosim
