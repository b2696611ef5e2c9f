// The zerosim command line, run as a real process: exit codes, the one-line error contract
// (exit 2, one "zerosim: error:" line naming file and field), -o safety and output formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_helpers.hpp"

using zerosim::test::read_file;
using zerosim::test::reference;
using zerosim::test::run_zerosim;
using zerosim::test::temp_file;

namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string ref_model() { return reference("deepspeed-v0.14.2-cpu/model.json"); }
std::string ref_z1() { return reference("deepspeed-v0.14.2-cpu/z1_seed_w4/ds_config.json"); }

std::string schedule_args(const std::string& ds, const std::string& model, const std::string& extra = "--world 4") {
    return "schedule --ds-config " + quote(ds) + " --model " + quote(model) + " " + extra;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    std::string line;
    while (std::getline(ss, line))
        if (!line.empty()) out.push_back(line);
    return out;
}

int count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
    return n;
}

// Bad input: exit 2 and exactly one line, "zerosim: error: ...", containing every `needle`.
void expect_one_error_line(const zerosim::test::RunResult& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.exit_code, 2) << r.out;
    auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0].rfind("zerosim: error: ", 0), 0u) << lines[0];
    for (const auto& n : needles) EXPECT_NE(lines[0].find(n), std::string::npos) << "missing '" << n << "' in: " << lines[0];
}

const char* kGoodDs = R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}})";

}  // namespace

// --help is a request, not an error: exit 0 and the option list.
TEST(Cli, ScheduleHelp) {
    auto r = run_zerosim("schedule --help");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--ds-config"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--world"), std::string::npos) << r.out;
}

// The reference z1 run: DeepSpeed broadcasts each of the 29 parameter tensors once at
// initialize (_broadcast_model); the real rank0.log has 29 "comm op: broadcast" lines.
TEST(Cli, ReferenceZ1DeepSpeedFormat) {
    auto r = run_zerosim(schedule_args(ref_z1(), ref_model(), "--world 4 --format deepspeed"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count(r.out, "comm op: broadcast"), 29) << r.out;
    EXPECT_EQ(count(read_file(reference("deepspeed-v0.14.2-cpu/z1_seed_w4/rank0.log")), "comm op: broadcast"), 29);
    EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;  // every key of that config is known
}

// --format json is the schedule IR: valid JSON tagged "zerosim-schedule", with the run's world and stage.
TEST(Cli, JsonFormatParses) {
    auto r = run_zerosim(schedule_args(ref_z1(), ref_model(), "--world 4 --format json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 500);
    EXPECT_EQ(j.value("format", ""), "zerosim-schedule");
    ASSERT_TRUE(j.contains("meta"));
    EXPECT_EQ(j["meta"]["world"], 4);
    EXPECT_EQ(j["meta"]["stage"], 1);
    EXPECT_EQ(j["meta"]["total_params"], 667136);
    ASSERT_TRUE(j["ops"].is_array());
    EXPECT_FALSE(j["ops"].empty());
}

// Malformed JSON config: the '}' after a trailing comma is at line 3, column 1.
TEST(Cli, MalformedConfig) {
    std::string ds = temp_file("cli_malformed.json", "{\n \"train_micro_batch_size_per_gpu\": 2,\n}\n");
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model())), {ds, "line 3, column 1"});
}

// A number past a double's range is an input error with its place, not a crash (found by
// fuzz_logs: nlohmann throws out_of_range, not parse_error, for it).
TEST(Cli, NumberBeyondADouble) {
    std::string ds = temp_file("cli_overflow.json", "{\n \"train_micro_batch_size_per_gpu\": 2e400\n}\n");
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model())), {ds, "line 2, column 36", "2e400", "does not fit"});
}

// Stage 7 does not exist.
TEST(Cli, BadStage) {
    std::string ds = temp_file("cli_stage7.json", R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 7}})");
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model())), {ds, "zero_optimization.stage"});
}

// A reduce bucket of 0 elements is refused.
TEST(Cli, ZeroReduceBucket) {
    std::string ds = temp_file("cli_bucket0.json",
                               R"({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "reduce_bucket_size": 0}})");
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model())), {ds, "zero_optimization.reduce_bucket_size"});
}

// --world 0: the flag is the field (there is no file to name).
TEST(Cli, WorldZero) {
    std::string ds = temp_file("cli_good_w0.json", kGoodDs);
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model(), "--world 0")), {"--world"});
}

// An unsupported model_type names the model file and the model_type field.
TEST(Cli, UnknownModelType) {
    std::string ds = temp_file("cli_good_mt.json", kGoodDs);
    std::string model = temp_file("cli_bert.json", R"({"model_type": "bert"})");
    expect_one_error_line(run_zerosim(schedule_args(ds, model)), {model, "model_type", "bert"});
}

// A zero dimension names parameters[0].shape.
TEST(Cli, ZeroSizedShape) {
    std::string ds = temp_file("cli_good_zs.json", kGoodDs);
    std::string model = temp_file("cli_zero_shape.json", R"({"parameters": [{"name": "a.weight", "shape": [0, 4]}]})");
    expect_one_error_line(run_zerosim(schedule_args(ds, model)), {model, "parameters[0].shape"});
}

// A model with no parameters.
TEST(Cli, NoParameters) {
    std::string ds = temp_file("cli_good_np.json", kGoodDs);
    std::string model = temp_file("cli_no_params.json", R"({"parameters": []})");
    expect_one_error_line(run_zerosim(schedule_args(ds, model)), {model, "parameters", "no parameters"});
}

// "auto" micro batch: names the field and the HF Trainer flag that would fill it.
TEST(Cli, AutoMicroBatch) {
    std::string ds = temp_file("cli_auto.json", R"({"train_micro_batch_size_per_gpu": "auto"})");
    expect_one_error_line(run_zerosim(schedule_args(ds, ref_model())),
                          {ds, "train_micro_batch_size_per_gpu", "--per_device_train_batch_size"});
}

// Missing files, config or model, are named.
TEST(Cli, MissingFiles) {
    std::string missing = ::testing::TempDir() + "/cli_does_not_exist.json";
    expect_one_error_line(run_zerosim(schedule_args(missing, ref_model())), {missing});
    std::string ds = temp_file("cli_good_mf.json", kGoodDs);
    expect_one_error_line(run_zerosim(schedule_args(ds, missing)), {missing});
}

// -o naming an input is refused and the input keeps its bytes.
TEST(Cli, OutputOverInputRefused) {
    std::string ds = temp_file("cli_input_ds.json", kGoodDs);
    std::string model = temp_file("cli_input_model.json", read_file(ref_model()));
    auto r = run_zerosim(schedule_args(ds, model, "--world 4 -o " + quote(ds)));
    expect_one_error_line(r, {ds, "-o"});
    EXPECT_EQ(read_file(ds), kGoodDs);
    auto r2 = run_zerosim(schedule_args(ds, model, "--world 4 -o " + quote(model)));
    EXPECT_EQ(r2.exit_code, 2) << r2.out;
    EXPECT_EQ(read_file(model), read_file(ref_model()));
}

// -o FILE writes the schedule there and nothing to the terminal.
TEST(Cli, OutputToNewFile) {
    std::string out = ::testing::TempDir() + "/cli_out_schedule.log";
    std::remove(out.c_str());
    auto r = run_zerosim(schedule_args(ref_z1(), ref_model(), "--world 4 --format deepspeed -o " + quote(out)));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "");
    std::string written = read_file(out);
    EXPECT_EQ(count(written, "comm op: broadcast"), 29);
}

// An unknown key is reported once on stderr (with -o, stdout stays empty, so all output here is
// stderr) and the run still succeeds.
TEST(Cli, UnknownKeyWarnsOnce) {
    std::string ds = temp_file("cli_unknown_key.json",
                               R"({"train_micro_batch_size_per_gpu": 2, "my_unknown_key": 1,
                                   "zero_optimization": {"stage": 1, "typo_key": true}})");
    std::string out = ::testing::TempDir() + "/cli_unknown_key_out.txt";
    auto r = run_zerosim(schedule_args(ds, ref_model(), "--world 4 -o " + quote(out)));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0].rfind("zerosim: warning: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find("my_unknown_key"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("zero_optimization.typo_key"), std::string::npos) << lines[0];
    EXPECT_FALSE(read_file(out).empty());
}
