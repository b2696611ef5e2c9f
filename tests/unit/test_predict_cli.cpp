// `zerosim predict` and `zerosim bench` as a user runs them: outputs that parse back with the
// readers the validator uses, determinism, and the one-line errors for bad topologies and flags.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "formats/comms_log.hpp"
#include "schedule/schedule.hpp"
#include "test_helpers.hpp"
#include "formats/nccl_tests.hpp"

using namespace zerosim;
using zerosim::test::run_zerosim;

namespace {

std::string topo(const std::string& name) { return std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/" + name + ".json"; }
std::string q(const std::string& s) { return "'" + s + "'"; }
const std::string kRef = test::reference("deepspeed-v0.14.2-cpu");

std::string predict_args(const std::string& extra) {
    return "predict --ds-config " + q(kRef + "/z3_default_w4/ds_config.json") + " --model " + q(kRef + "/model.json") +
           " --topology " + q(topo("dgx-a100")) + " --world 4 --steps 3 " + extra;
}

TEST(PredictCli, DeepSpeedFormatParsesBackAsTheSchedule) {
    // Every predicted line reads back with the validator's parser, in the schedule's order, with
    // a positive time and DeepSpeed's bandwidth formulas applied to it.
    auto out = test::temp_file("pred.log", "");
    auto r = run_zerosim(predict_args("-o " + q(out)));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto cfg = load_ds_config(kRef + "/z3_default_w4/ds_config.json");
    auto model = load_model(kRef + "/model.json");
    ScheduleOptions o;
    o.world = 4;
    o.steps = 3;
    auto s = build_schedule(model.value(), cfg.value(), o);
    ASSERT_TRUE(s.ok());
    std::vector<const Op*> ops;
    for (const auto& op : s->ops)
        if (is_collective(op.kind)) ops.push_back(&op);
    std::istringstream in(test::read_file(out));
    std::string line;
    size_t i = 0;
    while (std::getline(in, line)) {
        auto p = parse_ds_verbose_line(line);
        if (!p || p->op.record == "log_summary_barrier") continue;
        ASSERT_LT(i, ops.size());
        EXPECT_EQ(p->op.record, op_record_name(ops[i]->kind));
        EXPECT_EQ(p->op.caller, ops[i]->caller);
        EXPECT_EQ(p->size_text, ds_size_string(ops[i]->bytes()));
        if (ops[i]->kind != OpKind::Barrier) {
            EXPECT_GT(p->op.time_ms, 0.0) << line;
            // The bandwidth comes from the unrounded time; compare where 2 decimals are precise.
            if (p->op.time_ms >= 1.0) {
                auto bw = ds_bandwidth(p->op.record, ops[i]->bytes(), p->op.time_ms, 4);
                EXPECT_NEAR(p->op.algbw_gbps, bw.algbw_gbps, 0.006 + bw.algbw_gbps * 0.01) << line;
            }
        }
        ++i;
    }
    EXPECT_EQ(i, ops.size());
    std::string text = test::read_file(out);
    EXPECT_NE(text.find("Comm. Op"), std::string::npos);
    EXPECT_NE(text.find("exposed comm"), std::string::npos);
}

TEST(PredictCli, SameInputsSameBytes) {
    // Compared through -o files: stderr may carry progress lines (and sanitizer notes in CI).
    auto fa = test::temp_file("same-a.json", ""), fb = test::temp_file("same-b.json", "");
    ASSERT_EQ(run_zerosim(predict_args("--format json -o " + q(fa))).exit_code, 0);
    ASSERT_EQ(run_zerosim(predict_args("--format json -o " + q(fb))).exit_code, 0);
    std::string a = test::read_file(fa), b = test::read_file(fb);
    EXPECT_GT(a.size(), 1000u);
    EXPECT_EQ(a, b);
}

TEST(PredictCli, JsonCsvAndTrace) {
    auto trace = test::temp_file("trace.json", "");
    auto j = run_zerosim(predict_args("--format json --trace " + q(trace)));
    ASSERT_EQ(j.exit_code, 0) << j.out;
    auto doc = nlohmann::json::parse(j.out.substr(j.out.find('{')));
    EXPECT_EQ(doc["format"], "zerosim-prediction");
    EXPECT_EQ(doc["steps"].size(), 3u);
    for (const auto& st : doc["steps"]) {
        EXPECT_GT(st["step_ms"].get<double>(), 0.0);
        // Exposed communication is the part of the step compute does not cover.
        EXPECT_NEAR(st["exposed_comm_ms"].get<double>(), st["step_ms"].get<double>() - st["compute_ms"].get<double>(), 1e-9);
    }
    auto t = nlohmann::json::parse(test::read_file(trace));
    ASSERT_TRUE(t.contains("traceEvents"));
    size_t complete = 0;
    for (const auto& e : t["traceEvents"])
        if (e["ph"] == "X") {
            ++complete;
            EXPECT_GE(e["dur"].get<double>(), 0.0);
        }
    EXPECT_GT(complete, 100u);
    auto c = run_zerosim(predict_args("--format csv"));
    ASSERT_EQ(c.exit_code, 0);
    // (the progress line goes to stderr, which run_zerosim merges in)
    EXPECT_NE(c.out.find("id,step,micro,phase,stream,kind,caller,bytes,algorithm,protocol,logged_ms,start_ms,end_ms\n"),
              std::string::npos);
}

TEST(BenchCli, TableReadsBackAsNcclTests) {
    // The predicted table is an nccl-tests table: the same reader takes it, sizes 8 B .. 8 GiB by 2.
    auto r = run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --op all_reduce --min 8 --max 8G");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto tables = parse_nccl_tests(r.out);
    ASSERT_EQ(tables.size(), 1u);
    ASSERT_EQ(tables[0].rows.size(), 31u);
    EXPECT_EQ(tables[0].rows.back().bytes, 8LL << 30);
    for (const auto& row : tables[0].rows) {
        EXPECT_GT(row.time_us, 0.0);
        // busbw = algbw x 2(n-1)/n for all_reduce on 8 ranks (each printed to 2 decimals)
        EXPECT_NEAR(row.busbw_gbs, row.algbw_gbs * 1.75, 0.015);
    }
    EXPECT_NE(r.out.find("N/A"), std::string::npos);
}

TEST(BenchCli, AlgoAndProtoRestrictTheTunerAsNcclEnvDoes) {
    // The tuner's picks are named after the table, one range per algorithm/protocol.
    auto all = run_zerosim("bench --topology " + q(topo("dgx-h100")) + " --min 8 --max 1G");
    ASSERT_EQ(all.exit_code, 0) << all.out;
    EXPECT_NE(all.out.find("# Algorithm/protocol (predicted tuner choice): ring/LL 8.0 B to"), std::string::npos) << all.out;
    EXPECT_NE(all.out.find("nvls/Simple"), std::string::npos) << all.out;
    // NCCL_ALGO=Ring on 8 x H200 (reference Table C1, 8 GiB, NVLS off): 365.6 GB/s busbw; held
    // back from the model's figures, so within 10% here.
    auto ring = run_zerosim("bench --topology " + q(topo("dgx-h100")) + " --algo RING --min 8G --max 8G");
    ASSERT_EQ(ring.exit_code, 0) << ring.out;
    auto t = parse_nccl_tests(ring.out);
    ASSERT_EQ(t.size(), 1u);
    ASSERT_EQ(t[0].rows.size(), 1u);
    EXPECT_NEAR(t[0].rows[0].busbw_gbs, 365.6, 36.6);
    EXPECT_NE(ring.out.find("choice): ring/Simple 8.0 GB\n"), std::string::npos) << ring.out;
    // Protocol only: every size on LL.
    auto ll = run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --proto ll --min 1K --max 1G");
    ASSERT_EQ(ll.exit_code, 0) << ll.out;
    EXPECT_NE(ll.out.find("choice): ring/LL 1.0 KB to 1.0 GB\n"), std::string::npos) << ll.out;
}

void expect_input_error(const test::RunResult& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("zerosim: error: ", 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    for (const auto& n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << "missing '" << n << "' in " << r.out;
}

std::string topo_with(const std::string& name, const std::string& from, const std::string& to) {
    std::string text = test::read_file(topo("dgx-a100"));
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    text.replace(pos, from.size(), to);
    return test::temp_file(name, text);
}

TEST(BenchCli, BadInputs) {
    auto typo = topo_with("typo.json", "\"gpus_per_node\"", "\"gpu_per_node\"");
    expect_input_error(run_zerosim("bench --topology " + q(typo)), {"typo.json", "gpu_per_node", "did you mean 'gpus_per_node'"});
    auto zero = topo_with("zero.json", "\"bandwidth_gbs\": 300", "\"bandwidth_gbs\": 0");
    expect_input_error(run_zerosim("bench --topology " + q(zero)), {"zero.json", "intra_node.bandwidth_gbs", "positive"});
    auto neg = topo_with("neg.json", "\"bandwidth_gbs\": 25", "\"bandwidth_gbs\": -25");
    expect_input_error(run_zerosim("bench --topology " + q(neg)), {"neg.json", "nics.bandwidth_gbs"});
    // NIC affinity: one list per NIC, GPU indices inside the node, every GPU on some list.
    auto short_aff = topo_with("aff1.json", "\"latency_us\": 0", "\"latency_us\": 0, \"gpu_affinity\": [[0], [1]]");
    expect_input_error(run_zerosim("bench --topology " + q(short_aff)), {"aff1.json", "nics.gpu_affinity", "one list of GPU indices per NIC (8)"});
    auto far = topo_with("aff2.json", "\"latency_us\": 0", "\"latency_us\": 0, \"gpu_affinity\": [[0], [1], [2], [3], [4], [5], [6], [8]]");
    expect_input_error(run_zerosim("bench --topology " + q(far)), {"aff2.json", "nics.gpu_affinity[7][0]", "0 to 7", "8"});
    auto orphan = topo_with("aff3.json", "\"latency_us\": 0", "\"latency_us\": 0, \"gpu_affinity\": [[0, 1], [0, 1], [2, 3], [2, 3], [4, 5], [4, 5], [6], [6]]");
    expect_input_error(run_zerosim("bench --topology " + q(orphan)), {"aff3.json", "nics.gpu_affinity", "GPU 7"});
    auto fine = topo_with("aff4.json", "\"latency_us\": 0", "\"latency_us\": 0, \"gpu_affinity\": [[0, 1], [0, 1], [2, 3], [2, 3], [4, 5], [4, 5], [6, 7], [6, 7]]");
    EXPECT_EQ(run_zerosim("bench --topology " + q(fine) + " --min 1M --max 1M").exit_code, 0);
    // Two nodes with no NICs: disconnected.
    std::string text = test::read_file(topo("localhost"));
    text.replace(text.find("\"nodes\": 1"), 10, "\"nodes\": 2");
    auto split = test::temp_file("split.json", text);
    expect_input_error(run_zerosim("bench --topology " + q(split)), {"split.json", "disconnected"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --op all_to_all"), {"--op", "all_to_all"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " -g 9"), {"--gpus-per-thread", "1 to 8"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --world 16"), {"--world", "--nodes"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --min 1X"), {"--min"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --algo nvls"),
                       {"dgx-a100.json", "--algo", "no nvls", "ring/LL"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --algo tree --op all_gather"),
                       {"--algo", "all_gather", "ring/Simple"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --algo collnet"), {"--algo", "collnet", "ring, tree or nvls"});
    expect_input_error(run_zerosim("bench --topology " + q(topo("dgx-a100")) + " --proto ll256"), {"--proto", "ll256", "LL, LL128 or Simple"});
}

TEST(PredictCli, WorldLargerThanTheTopology) {
    auto r = run_zerosim("predict --ds-config " + q(kRef + "/z1_seed_w4/ds_config.json") + " --model " + q(kRef + "/model.json") +
                         " --topology " + q(topo("dgx-a100")) + " --world 16");
    expect_input_error(r, {"--world", "--nodes 2"});
    // --nodes scales the node design.
    auto ok = run_zerosim("predict --ds-config " + q(kRef + "/z1_seed_w4/ds_config.json") + " --model " + q(kRef + "/model.json") +
                          " --topology " + q(topo("dgx-a100")) + " --world 16 --nodes 2 --format summary");
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

}  // namespace
