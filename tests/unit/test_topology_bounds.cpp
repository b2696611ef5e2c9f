// Issue 33: every topology figure at the edges of its physical range. The ranges are the ones
// topologies/README.md "Bounds" states (copied here from the document, not from the reader): a
// value just inside each end is read, one just outside is refused naming the field, as are 0 where
// the range is open there, -1 and 1e308; NaN written in the file is not JSON and is refused with
// its line. scripts/topology_bound_seeds.py writes the same values as fuzz_topology's seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "core/json_input.hpp"
#include "timing/topology.hpp"

using namespace zerosim;

namespace {

struct Bound {
    const char* path;   // a.b or a.b.c
    double lo;
    bool lo_in;
    double hi;
    bool hi_in;
};

const Bound kBounds[] = {
    {"gpu.compute_efficiency", 0, false, 1, true},
    {"gpu.memory_efficiency", 0, false, 1, true},
    {"nics.efficiency", 0, false, 1, true},
    {"gpu.memory_bandwidth_gbs", 0, false, 100000, true},
    {"intra_node.bandwidth_gbs", 0, false, 100000, true},
    {"intra_node.nccl_channel_bandwidth_gbs", 0, false, 100000, true},
    {"nics.bandwidth_gbs", 0, false, 100000, true},
    {"host.pcie_gbps", 0, true, 100000, true},
    {"host.cpu_adam_gbs", 0, true, 100000, true},
    {"gpu.launch_overhead_us", 0, true, 1000000, true},
    {"nics.latency_us", 0, true, 1000000, true},
    {"host.hook_us", 0, true, 1000000, true},
    {"host.kernel_launch_us", 0, true, 1000000, true},
    {"gpu.peak_tflops.bf16", 0, false, 100000, true},
    {"gpu.memory_gb", 0, false, 100000, true},
    {"calibration.bandwidth_scale", 0.001, true, 1000, true},
    {"calibration.latency_scale", 0.001, true, 1000, true},
    {"network.oversubscription", 1, true, 1000, true},
    {"network.background_spine_load", 0, true, 1, false},
};

Json base_topology() {
    std::ifstream in(std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-a100.json");
    std::stringstream s;
    s << in.rdbuf();
    return Json::parse(s.str());
}

Json& at_path(Json& doc, const std::string& path) {
    Json* j = &doc;
    std::string rest = path;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) j = &(*j)[rest.substr(0, dot)];
    return (*j)[rest];
}

// The next value past x a reader can tell apart (relative 1e-9, or 1e-9 at 0).
double nudge(double x, bool up) {
    double step = x != 0 ? std::fabs(x) * 1e-9 : 1e-9;
    return up ? x + step : x - step;
}

// The figure `b.path` set to v: "" when it is read, else the refusal.
std::string read_with(const Bound& b, double v) {
    Json doc = base_topology();
    at_path(doc, b.path) = v;
    auto t = parse_topology("t.json", doc.dump());
    return t.ok() ? "" : t.error().what();
}

}  // namespace

TEST(TopologyBounds, JustInsideEachEndIsRead) {
    for (const Bound& b : kBounds) {
        const double lo = b.lo_in ? b.lo : nudge(b.lo, true), hi = b.hi_in ? b.hi : nudge(b.hi, false);
        EXPECT_EQ(read_with(b, lo), "") << b.path << " = " << lo;
        EXPECT_EQ(read_with(b, hi), "") << b.path << " = " << hi;
    }
}

TEST(TopologyBounds, JustOutsideZeroNegativeAndHugeAreRefusedNamingTheField) {
    for (const Bound& b : kBounds) {
        const double lo_out = b.lo_in ? nudge(b.lo, false) : b.lo, hi_out = b.hi_in ? nudge(b.hi, true) : b.hi;
        for (double v : {lo_out, hi_out, -1.0, 1e308}) {
            const std::string e = read_with(b, v);
            EXPECT_NE(e.find(std::string("field '") + b.path), std::string::npos) << b.path << " = " << v << ": " << e;
        }
        if (!b.lo_in && b.lo == 0) EXPECT_NE(read_with(b, 0), "") << b.path << " = 0";
    }
}

TEST(TopologyBounds, NanWrittenInTheFileIsRefusedWithItsLine) {
    Json doc = base_topology();
    at_path(doc, "nics.bandwidth_gbs") = 12345.5;
    std::string text = doc.dump(1);
    text.replace(text.find("12345.5"), 7, "NaN");
    auto t = parse_topology("t.json", text);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().what().find("malformed JSON at line"), std::string::npos) << t.error().what();
}
