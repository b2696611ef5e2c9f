// Warnings and notes echo what the user gave (file names, keys) as error lines do: each on one
// line, control characters escaped (core/error.hpp printable), as issue 33 asks of every echoed string.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/measured_logs.hpp"
#include "core/json_input.hpp"
#include "inputs/ds_config.hpp"
#include "test_helpers.hpp"

TEST(WarningLines, AFileNameAndAKeyWithControlCharactersStayOnOneEscapedLine) {
    const std::string dir = ::testing::TempDir() + "/warning-lines";
    std::filesystem::create_directories(dir);
    const std::string cfg = dir + "/a\nb.json";
    // An unknown key inside activation_checkpointing (DeepSpeed ignores it; zerosim warns), named with a tab and ESC.
    std::ofstream(cfg) << "{\"train_micro_batch_size_per_gpu\": 1, \"activation_checkpointing\": {\"x\\t\\u001b[31my\": true}}";
    auto r = zerosim::test::run_zerosim("memory --deepspeed 0.14.2 --ds-config " + zerosim::test::q(cfg) + " --model " +
                                        zerosim::test::q(zerosim::test::reference("deepspeed-v0.14.2-cpu/model.json")) +
                                        " --world 2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const size_t at = r.out.find("zerosim: warning: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("a\\nb.json"), std::string::npos) << line;
    EXPECT_NE(line.find("x\\t\\x1b[31my"), std::string::npos) << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << "a raw escape sequence reached the terminal";
}

// Found by fuzz_logs in the fresh-clone CI run: a line holding "comm op:" without the space after
// it threw std::out_of_range out of the reader (substr at npos) instead of a located error.
TEST(FuzzRegressions, ACommOpLineWithoutItsSpaceIsAnErrorNotACrash) {
    for (const char* line : {"[Rank 0] comm op:all_reduce | time (ms): 1,5", "comm op:", "x comm op:| msg size: 8 B"}) {
        SCOPED_TRACE(line);
        zerosim::Result<zerosim::MeasuredLog> log = zerosim::Error{};
        EXPECT_NO_THROW(log = zerosim::parse_log(std::string(line) + "\n", "fuzz.log"));
        EXPECT_FALSE(log.ok());
    }
}

// Found by fuzz_ds_config in the fresh-clone CI run: an unterminated string in a DeepSpeed config
// left the hjson scan where it was, forever (a hang, not an error).
TEST(FuzzRegressions, AnUnterminatedStringInAConfigIsAnErrorNotAHang) {
    auto c = zerosim::parse_ds_config("ds.json", "{\"zero_optimization\": {\"stage\": 3, \"x");
    EXPECT_FALSE(c.ok());
}

// Found by fuzz_ds_config after quoteless hjson values (issue 33): a value of only form feeds
// (whitespace to Python's strip, not to hjson's tokenizer) left the scan where it was, forever.
// hjson-py reads it as the empty string; the input is the fuzzer's, shortened.
TEST(FuzzRegressions, AQuotelessValueOfOnlyFormFeedsIsReadNotAHang) {
    auto doc = zerosim::parse_hjson_text("{\n a: \f\f\n b: x\f \n}", "ds.json");
    ASSERT_TRUE(doc.ok()) << doc.error().what();
    EXPECT_EQ(doc.value().dump(), R"({"a":"","b":"x"})");
    // The fuzzer's own input: an array, then bytes 0xff, form feeds and NULs; refused, not a hang.
    std::string found = "{\n a: [\n  {b: 2}\n\xff\xff\f\f\f\fe";
    found += std::string(1, '\0') + "\f\f\x1c\f\r\f\f\xff\xff\f\f\x01" + std::string(3, '\0') + "\f\f ]\n}";
    EXPECT_FALSE(zerosim::parse_ds_config("ds.json", found).ok());
}
