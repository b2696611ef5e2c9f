// sim/core's pieces both front ends share: the one size grammar (zerosim bench/validate and zerorun
// bench), comma-separated lists, the error and warning lines, and the atomic output writer.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "core/number_list.hpp"
#include "core/output.hpp"
#include "core/sizes.hpp"
#include "test_helpers.hpp"

using namespace zerosim;

namespace {

int64_t size_of(const std::string& text) {
    auto r = parse_size(text, "--max");
    EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().what());
    return r.ok() ? r.value() : -1;
}

std::string size_error(const std::string& text) {
    auto r = parse_size(text, "--max");
    EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? r.value() : 0);
    return r.ok() ? "" : r.error().what();
}

// Every spelling either parser took before they were one: zerosim's (digits, then K/M/G in either
// case) and zerorun's (a number strtold reads, then B, K/KB/k, M/MB/m, G/GB/g).
TEST(SizeGrammar, KeepsWhatEitherProgramAccepted) {
    EXPECT_EQ(size_of("8"), 8);
    EXPECT_EQ(size_of("8B"), 8);
    EXPECT_EQ(size_of("64K"), 65536);
    EXPECT_EQ(size_of("64k"), 65536);
    EXPECT_EQ(size_of("64KB"), 65536);
    EXPECT_EQ(size_of("8M"), 8 * 1048576);
    EXPECT_EQ(size_of("8m"), 8 * 1048576);
    EXPECT_EQ(size_of("8MB"), 8 * 1048576);
    EXPECT_EQ(size_of("8G"), 8LL << 30);
    EXPECT_EQ(size_of("8g"), 8LL << 30);
    EXPECT_EQ(size_of("8GB"), 8LL << 30);   // zerosim bench --max 8GB was refused
    EXPECT_EQ(size_of("+8"), 8);
    EXPECT_EQ(size_of("0.5K"), 512);
    EXPECT_EQ(size_of("1.5M"), 1572864);
    EXPECT_EQ(size_of("1e3"), 1000);
    EXPECT_EQ(size_of("2.5e1K"), 25600);
    EXPECT_EQ(size_of("8."), 8);
    EXPECT_EQ(size_of("0008"), 8);
}

TEST(SizeGrammar, RefusesTheRestNamingTheFlag) {
    for (const char* bad : {"", "0", "-8", "abc", "K", ".", "nan", "inf", " 8", "1.5", "0.1K", "1e-400"}) {
        std::string e = size_error(bad);
        EXPECT_NE(e.find("field '--max'"), std::string::npos) << e;
        EXPECT_NE(e.find("expected a size such as 8, 64K, 8M or 8GB"), std::string::npos) << bad << ": " << e;
    }
    // zerorun's test asserts this wording (tests/runtime/test_runtime.cpp, BadOptionsExitTwo).
    EXPECT_NE(size_error("12X").find("unknown size unit 'X'"), std::string::npos);
    EXPECT_NE(size_error("8kb").find("unknown size unit 'kb'"), std::string::npos);
    EXPECT_NE(size_error("8T").find("unknown size unit 'T'"), std::string::npos);
    EXPECT_NE(size_error("8e").find("unknown size unit 'e'"), std::string::npos);
    EXPECT_NE(size_error("0x10").find("unknown size unit 'x10'"), std::string::npos);   // strtold read hex
}

// INT64_MAX is 2^63 - 1 = 9223372036854775807: the largest size; one more is refused, never wrapped.
TEST(SizeGrammar, RefusesSizesBeyond64Bits) {
    EXPECT_EQ(size_of("9223372036854775807"), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(size_of("8589934591G"), (8589934591LL) << 30);   // 2^63 - 2^30
    for (const char* big : {"9223372036854775808", "8589934592G", "9300E15", "1e19", "1e400", "99999999999999999999999999",
                            "18446744073709551616"}) {
        std::string e = size_error(big);
        EXPECT_NE(e.find("more bytes than a 64-bit size holds"), std::string::npos) << big << ": " << e;
    }
}

TEST(NumberList, SkipsEmptyItemsAndNamesTheBadOne) {
    auto r = parse_int_list("1,,3", "--overflow-steps", "step numbers");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), (std::vector<int>{1, 3}));
    EXPECT_TRUE(parse_int_list("", "--nodes", "node counts")->empty());
    auto bad = parse_int_list("1,x2", "--overflow-steps", "step numbers");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().what(), "field '--overflow-steps': expected comma-separated step numbers, found 'x2'");
}

using test::stderr_of;

TEST(ErrorLines, OneLinePerProgramAndTheIgnoredKeysWarning) {
    Error e{"ds.json", "zero_optimization.stage", "expected a ZeRO stage 0, 1, 2 or 3, found 7"};
    int code = 0;
    EXPECT_EQ(stderr_of([&] { code = print_input_error("zerorun", e); }),
              "zerorun: error: ds.json: field 'zero_optimization.stage': expected a ZeRO stage 0, 1, 2 or 3, found 7\n");
    EXPECT_EQ(code, 2);
    EXPECT_EQ(stderr_of([&] { code = print_input_error("zerorun", e, false); }), "");
    EXPECT_EQ(code, 2);
    EXPECT_EQ(stderr_of([] { warn_ignored_keys("zerosim", "ds.json", {"foo", "zero_optimization.bar"}); }),
              "zerosim: warning: ds.json: ignoring keys zerosim does not know: foo, zero_optimization.bar\n");
    EXPECT_EQ(stderr_of([] { warn_ignored_keys("zerosim", "ds.json", {}); }), "");
}

TEST(WriteOutput, WholeFileOrNothingAndNeverOverAnInput) {
    namespace fs = std::filesystem;
    std::string input = test::temp_file("write-output-input.json", "{}");
    std::string out = fs::path(input).parent_path() / "write-output-result.txt";
    fs::remove(out);
    EXPECT_EQ(write_output("zerosim", out, "-o", {input}, [](std::ostream& o) { o << "hello\n"; }), 0);
    EXPECT_EQ(test::read_file(out), "hello\n");
    EXPECT_FALSE(fs::exists(out + ".tmp-zerosim"));
    int code = 0;
    std::string err = stderr_of([&] { code = write_output("zerosim", input, "-o", {input}, [](std::ostream& o) { o << "x"; }); });
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "zerosim: error: " + input + ": field '-o': is one of the inputs; zerosim never overwrites what it was given\n");
    EXPECT_EQ(test::read_file(input), "{}");
    // zerorun names no flag: its lines are "zerorun: error: PATH: ...".
    err = stderr_of([&] { code = write_output("zerorun", "/nonexistent-dir/x.log", "", {}, [](std::ostream& o) { o << "x"; }); });
    EXPECT_EQ(code, 2);
    EXPECT_EQ(err, "zerorun: error: /nonexistent-dir/x.log: cannot open for writing\n");
}

TEST(WriteOutput, WritableFolderCheckedBeforeTheWork) {
    EXPECT_FALSE(check_writable("", "-o").has_value());
    EXPECT_FALSE(check_writable("-", "-o").has_value());
    auto e = check_writable("/nonexistent-dir/sweep.csv", "--plot");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->what(), "/nonexistent-dir/sweep.csv: field '--plot': cannot write here: /nonexistent-dir is not a writable folder");
}

}  // namespace
