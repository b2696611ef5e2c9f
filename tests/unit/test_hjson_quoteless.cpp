// Issue 33: DeepSpeed reads its config with hjson.load (deepspeed/runtime/config.py), so the
// quoteless parts of hjson are read as DeepSpeed reads them. Every expected value below is what
// hjson-py (hjson/hjson-py 9351a27, hjson.loads) returned for the same text, run by hand; the
// refusals are texts hjson-py refuses too ("Bad key name (eof)", "Found whitespace in your key
// name", "Found a punctuator character").
#include <gtest/gtest.h>

#include <string>

#include "core/json_input.hpp"
#include "inputs/ds_config.hpp"

using namespace zerosim;

namespace {

Json read_ok(const std::string& text) {
    auto doc = parse_hjson_text(text, "c.hjson");
    EXPECT_TRUE(doc.ok()) << (doc.ok() ? "" : doc.error().what()) << "\n" << text;
    return doc.ok() ? doc.value() : Json();
}

std::string refusal(const std::string& text) {
    auto doc = parse_hjson_text(text, "c.hjson");
    EXPECT_FALSE(doc.ok()) << text << "\nread as " << (doc.ok() ? doc.value().dump() : "");
    return doc.ok() ? "" : doc.error().what();
}

}  // namespace

// The config of the hjson README's kind: no quotes on keys or strings, no commas between lines.
TEST(HjsonQuoteless, KeysAndValuesWithoutQuotesAreRead) {
    Json j = read_ok("{\n  train_batch_size: 8\n  optimizer: {\n    type: Adam\n    params: { lr: 1e-4 }\n  }\n}\n");
    EXPECT_EQ(j.dump(), R"({"train_batch_size":8,"optimizer":{"type":"Adam","params":{"lr":0.0001}}})");
    EXPECT_TRUE(j["train_batch_size"].is_number_integer());
    EXPECT_TRUE(j["optimizer"]["type"].is_string());
}

// scantfnns: a keyword or number ends at , } ] or a comment only if that is all; a string runs to
// the end of its line, # and commas included, trimmed.
TEST(HjsonQuoteless, AQuotelessValueIsANumberOrKeywordOnlyWhenThatIsAll) {
    Json j = read_ok("{\n a: Adam # not a comment\n b: 5 # a comment\n c: true // c\n d: null /* d */\n e: x, y\n}");
    EXPECT_EQ(j.dump(), R"({"a":"Adam # not a comment","b":5,"c":true,"d":null,"e":"x, y"})");
    // NUMBER_RE: no leading zero, no bare '.', no '1.'; what it does not match whole is a string.
    Json n = read_ok("{\n a: 08\n b: -0\n d: 1 2\n e: true x\n f: 1.25\n g: -\n h: 1.\n i: .5\n}");
    EXPECT_EQ(n.dump(), R"({"a":"08","b":0,"d":"1 2","e":"true x","f":1.25,"g":"-","h":"1.","i":".5"})");
    // hjson-py gives 1500 for 1.5e3 (an int: integral and below 1e10); the value is the same.
    EXPECT_DOUBLE_EQ(read_ok("{ a: 1.5e3\n}")["a"].get<double>(), 1500.0);
    // Backslashes in a quoteless string are its characters, not escapes.
    EXPECT_EQ(read_ok("{\n a: \\u0041 \n b: x\\ty\n}").dump(), R"({"a":"\\u0041","b":"x\\ty"})");
}

TEST(HjsonQuoteless, CommasMayBeLeftOutAndArraysHoldQuotelessItems) {
    EXPECT_EQ(read_ok("{\n \"a\": 1\n \"b\": \"x\" \"c\": 2\n}").dump(), R"({"a":1,"b":"x","c":2})");
    EXPECT_EQ(read_ok("{\n b: [1, 2, 3]\n c: [\n  one\n  two\n ]\n d: [\n  {b: 1}\n  {b: 2}\n ]\n}").dump(),
              R"({"b":[1,2,3],"c":["one","two"],"d":[{"b":1},{"b":2}]})");
    EXPECT_EQ(read_ok("{\n a:1\n b: {}\n c: []\n d: [ ]\n}").dump(), R"({"a":1,"b":{},"c":[],"d":[]})");
}

TEST(HjsonQuoteless, SingleQuotedAndMultiLineStrings) {
    EXPECT_EQ(read_ok("{\n a: 'single \"q\"'\n 'b c': 2\n d: \"it\\'s\"\n}").dump(), R"({"a":"single \"q\"","b c":2,"d":"it's"})");
    // mlscanstring: the indent of the opening ''' is taken off each line; one newline after the
    // opening and before the closing quotes dropped.
    EXPECT_EQ(read_ok("{\n  text:\n    '''\n    first\n      second\n    '''\n  n: 1\n}").dump(), R"({"text":"first\n  second","n":1})");
    EXPECT_EQ(read_ok("{\n a: '''one'''\n}").dump(), R"({"a":"one"})");
}

// What hjson-py refuses stays refused, with strict JSON's error placed in the file as written
// (the column of the text given, not of the JSON it was rewritten to).
TEST(HjsonQuoteless, WhatHjsonRefusesIsRefusedWithItsLineAndColumn) {
    // On one line "Adam } }" is a string to the end of the line: the braces never close (hjson-py:
    // "Bad key name (eof): line 1 column 51").
    EXPECT_NE(refusal("{ train_batch_size: 8, optimizer: { type: Adam } }").find("line 1, column 51"), std::string::npos);
    EXPECT_NE(refusal("{ a b: 1 }").find("line 1, column 3"), std::string::npos);   // whitespace in a key
    EXPECT_NE(refusal("{\n a: ,\n}").find("line 2, column 5"), std::string::npos);   // a punctuator for a value
    EXPECT_NE(refusal("{ a: [1 2] }").find("line 1, column 13"), std::string::npos);
    EXPECT_NE(refusal("{\n a: 1\n}\nextra").find("line 4, column 1"), std::string::npos);
    // A quoted string never ends: strict JSON's error at the line it breaks.
    EXPECT_NE(refusal("{\n a: \"unterminated\n}").find("line 2"), std::string::npos);
    // Columns are the file's own: the '}' at column 10 of line 3, after a line whose key and
    // value each gained two quotes in the rewritten JSON.
    EXPECT_NE(refusal("{\n key: value\n a: [1, 2}\n}").find("line 3, column 10"), std::string::npos);
}

// A key given twice is refused whichever way it is written (runtime/config_utils.py
// dict_raise_error_on_duplicate_keys).
TEST(HjsonQuoteless, AQuotelessKeyGivenTwiceIsRefused) {
    EXPECT_NE(refusal("{ a: 1, a: 2 }").find("key \"a\" given twice"), std::string::npos);
    EXPECT_NE(refusal("{\n a: 1\n \"a\": 2\n}").find("line 3: key \"a\" given twice in one object (first on line 2)"), std::string::npos);
}

// The DeepSpeed config reader reads the quoteless config through the same scan.
TEST(HjsonQuoteless, DeepSpeedConfigWithoutQuotes) {
    auto c = parse_ds_config("ds.hjson",
                             "{\n  train_micro_batch_size_per_gpu: 2\n  gradient_accumulation_steps: 1\n"
                             "  zero_optimization: {\n    stage: 2\n    overlap_comm: true\n    reduce_bucket_size: 5e7\n  }\n"
                             "  fp16: { enabled: true\n  }\n}\n",
                             Release{});
    ASSERT_TRUE(c.ok()) << c.error().what();
    EXPECT_EQ(c.value().zero.stage, 2);
    EXPECT_TRUE(c.value().zero.overlap_comm);
    EXPECT_EQ(c.value().zero.reduce_bucket_size, 50000000);
}
