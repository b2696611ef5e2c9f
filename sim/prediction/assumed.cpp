#include "prediction/assumed.hpp"

#include <sstream>

namespace zerosim {

namespace {

// Figures whose section's source does not speak for them: the section names the hardware, these
// are fits of what the hardware does beyond it.
bool only_own_source(const std::string& key) { return key == "nics.bulk_call_us" || key == "nics.ring_channel_gbs"; }

// The source a figure has: its own key's, else its section's ("host" for "host.hook_us").
const std::string* source_of(const Topology& t, const std::string& key) {
    auto it = t.sources.find(key);
    if (it == t.sources.end() && !only_own_source(key)) it = t.sources.find(key.substr(0, key.find('.')));
    return it == t.sources.end() ? nullptr : &it->second;
}

}  // namespace

std::vector<AssumedFigure> assumed_figures(const Topology& t, const ScheduleMeta& meta) {
    std::vector<AssumedFigure> used = {{"gpu.compute_efficiency", t.compute_efficiency, "", false},
                                       {"gpu.memory_efficiency", t.mem_efficiency, "", false}};
    if (t.host_kernel_launch_us > 0) used.push_back({"host.kernel_launch_us", t.host_kernel_launch_us, "us", false});
    if (meta.stage == 3 && t.host_hook_us > 0) used.push_back({"host.hook_us", t.host_hook_us, "us", false});
    if (meta.offload_optimizer || meta.offload_param) {
        used.push_back({"host.pcie_gbps", t.host_pcie_gbs * 8, "Gb/s", false});
        if (meta.offload_optimizer) used.push_back({"host.cpu_adam_gbs", t.host_cpu_adam_gbs, "GB/s", false});
    }
    // Across nodes: the bulk protocols' call cost (0 unless calibrate fitted it from nccl-tests).
    // and the rings' channel ceiling (none: the rings reach the NICs, unless calibrate fitted one).
    if (t.nodes > 1 && t.nics_per_node > 0) {
        used.push_back({"nics.bulk_call_us", t.nic_bulk_call_us, "us", false});
        used.push_back({"nics.ring_channel_gbs", t.ring_channel_gbs, "GB/s", false, true});
    }
    std::vector<AssumedFigure> out;
    for (auto& f : used) {
        const std::string* src = source_of(t, f.key);
        if (src && src->rfind("assumption", 0) != 0) continue;   // a datasheet, a measurement, a fit
        f.unsourced = src == nullptr;
        out.push_back(std::move(f));
    }
    return out;
}

std::string assumed_line(const Topology& t, const std::vector<AssumedFigure>& figures) {
    if (figures.empty()) return "";
    std::ostringstream said, unsourced;
    for (const auto& f : figures) {
        std::ostringstream one;
        if (f.zero_is_none && f.value == 0) one << f.key << " none";
        else one << f.key << " " << f.value << (f.unit.empty() ? "" : " " + f.unit);
        std::ostringstream& into = f.unsourced ? unsourced : said;
        into << (into.tellp() > 0 ? ", " : "") << one.str();
    }
    std::string line = "assumed, fitted to no measurement: ";
    if (said.tellp() > 0) line += said.str() + " (" + t.source + "'s sources say \"assumption\")";
    if (unsourced.tellp() > 0) line += std::string(said.tellp() > 0 ? "; " : "") + unsourced.str() + " (no source)";
    return line;
}

}  // namespace zerosim
