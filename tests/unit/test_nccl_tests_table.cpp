// The nccl-tests table: one writer, read back by the one reader; rows as nccl-tests prints them
// (the example row of shared docs/collectives.md).
#include <gtest/gtest.h>

#include <sstream>

#include "formats/nccl_tests.hpp"

using namespace zerosim;

namespace {

NcclTestsRow example_row() {
    NcclTestsRow r;
    r.bytes = 134217728;
    r.count = 33554432;
    r.type = "float";
    r.redop = "sum";
    r.root = -1;
    r.time_us = 1305.0;
    r.algbw_gbs = 102.85;
    r.busbw_gbs = 179.99;
    r.wrong = 0;
    r.inplace_time_us = 1312.3;
    r.inplace_algbw_gbs = 102.27;
    r.inplace_busbw_gbs = 178.98;
    r.inplace_wrong = 0;
    return r;
}

}  // namespace

TEST(NcclTestsTable, RowAsNcclTestsPrintsIt) {
    std::ostringstream out;
    write_nccl_tests_row(out, example_row(), NcclTestsLayout{});
    EXPECT_EQ(out.str(),
              "   134217728      33554432     float     sum      -1   1305.0  102.85  179.99      0   1312.3  102.27  178.98      0\n");
}

TEST(NcclTestsTable, TimeDecimalsAndUncheckedFollowTheLayout) {
    NcclTestsRow r = example_row();
    r.time_us = 99.994;
    r.inplace_time_us = 12345.6;
    r.wrong = r.inplace_wrong = -1;
    std::ostringstream a, b;
    write_nccl_tests_row(a, r, NcclTestsLayout{});
    // 2 decimals below 100 us, none from 10000; N/A in #wrong.
    EXPECT_NE(a.str().find("-1    99.99  102.85  179.99    N/A    12346  102.27"), std::string::npos) << a.str();
    write_nccl_tests_row(b, r, NcclTestsLayout{.time_width = 8, .one_decimal_from_us = 100, .not_checked = "   N/A"});
    EXPECT_NE(b.str().find("-1     99.99  102.85  179.99     N/A     12346  102.27"), std::string::npos) << b.str();
    r.time_us = 500;
    std::ostringstream c;
    write_nccl_tests_row(c, r, NcclTestsLayout{.time_width = 7, .one_decimal_from_us = 1000, .not_checked = "N/A"});
    EXPECT_NE(c.str().find("-1   500.00  102.85"), std::string::npos) << c.str();
}

TEST(NcclTestsTable, WrittenTableReadsBack) {
    std::ostringstream out;
    out << "# all_reduce_perf\n";
    write_nccl_tests_header(out);
    NcclTestsRow a = example_row(), b = example_row();
    b.bytes = 1024;
    b.count = 256;
    b.redop = "none";
    b.root = 0;
    b.time_us = 12.5;
    b.wrong = 3;
    b.inplace_wrong = -1;
    write_nccl_tests_row(out, a, NcclTestsLayout{});
    write_nccl_tests_row(out, b, NcclTestsLayout{});
    write_nccl_tests_footer(out, "0 OK", "123.45");
    auto tables = parse_nccl_tests(out.str());
    ASSERT_EQ(tables.size(), 1u);
    EXPECT_EQ(tables[0].title, "# all_reduce_perf");
    ASSERT_EQ(tables[0].rows.size(), 2u);
    const NcclTestsRow& x = tables[0].rows[0];
    EXPECT_EQ(x.bytes, a.bytes);
    EXPECT_EQ(x.count, a.count);
    EXPECT_EQ(x.type, "float");
    EXPECT_EQ(x.redop, "sum");
    EXPECT_EQ(x.root, -1);
    EXPECT_DOUBLE_EQ(x.time_us, 1305.0);
    EXPECT_DOUBLE_EQ(x.algbw_gbs, 102.85);
    EXPECT_DOUBLE_EQ(x.busbw_gbs, 179.99);
    EXPECT_EQ(x.wrong, 0);
    EXPECT_DOUBLE_EQ(x.inplace_time_us, 1312.3);
    EXPECT_DOUBLE_EQ(x.inplace_algbw_gbs, 102.27);
    EXPECT_DOUBLE_EQ(x.inplace_busbw_gbs, 178.98);
    EXPECT_EQ(x.inplace_wrong, 0);
    const NcclTestsRow& y = tables[0].rows[1];
    EXPECT_EQ(y.redop, "none");
    EXPECT_EQ(y.root, 0);
    EXPECT_DOUBLE_EQ(y.time_us, 12.5);
    EXPECT_EQ(y.wrong, 3);
    EXPECT_EQ(y.inplace_wrong, -1);   // N/A
    EXPECT_NE(out.str().find("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 123.45 \n"), std::string::npos);
}

TEST(NcclTestsTable, OlderTableWithoutRootOrInPlace) {
    // No root column, an "error" column in place of #wrong, out-of-place only.
    auto tables = parse_nccl_tests(
        "#  size   count    type   redop    time   algbw   busbw  error\n"
        "   1024     256   float     sum    10.5    0.10    0.17  0e+00\n");
    ASSERT_EQ(tables.size(), 1u);
    ASSERT_EQ(tables[0].rows.size(), 1u);
    EXPECT_EQ(tables[0].rows[0].root, -1);
    EXPECT_DOUBLE_EQ(tables[0].rows[0].time_us, 10.5);
    EXPECT_EQ(tables[0].rows[0].wrong, 0);
    EXPECT_DOUBLE_EQ(tables[0].rows[0].inplace_time_us, -1);
}
