#include "prediction/sweep_network.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace zerosim {

const std::vector<std::string>& network_keys() {
    static const std::vector<std::string> keys = {"network.oversubscription", "network.nodes_per_leaf",
                                                  "network.background_spine_load"};
    return keys;
}

bool is_network_key(const std::string& key) {
    const auto& k = network_keys();
    return std::find(k.begin(), k.end(), key) != k.end();
}

Status check_network_value(const std::string& key, const std::string& value) {
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && end == value.c_str() + value.size() && std::isfinite(v);
    if (key == "network.oversubscription" && !(number && v >= 1.0))
        return Error{"", "--set", "'" + key + "': expected 1 (non-blocking) or more, found '" + value + "'"};
    if (key == "network.nodes_per_leaf" && !(number && v >= 1.0 && v == std::floor(v)))
        return Error{"", "--set", "'" + key + "': expected a positive whole number, found '" + value + "'"};
    if (key == "network.background_spine_load" && !(number && v >= 0.0 && v < 1.0))
        return Error{"", "--set", "'" + key + "': expected the share of the spine other traffic takes, from 0 to below 1, found '" + value + "'"};
    return std::nullopt;
}

void apply_network_value(Topology& t, const std::string& key, const std::string& value) {
    const double v = std::strtod(value.c_str(), nullptr);
    if (key == "network.oversubscription") t.oversubscription = v;
    if (key == "network.nodes_per_leaf") t.nodes_per_leaf = static_cast<int64_t>(v);
    if (key == "network.background_spine_load") t.background_spine_load = v;
}

Result<std::shared_ptr<FabricModel>> fabric_model_for_point(const Topology& t, int64_t world, const SweepFabric& f) {
    FabricOptions o = f.options;   // the topology's whatif block, then the flags'
    for (const auto& [target, share] : t.whatif_degrade) o.degrade.insert(o.degrade.begin(), {target, share, t.source, "whatif.degrade." + target});
    for (const auto& [target, share] : t.whatif_straggler) o.straggler.insert(o.straggler.begin(), {target, share, t.source, "whatif.straggler." + target});
    return FabricModel::build(t, world, o);
}

Result<Prediction> simulate_point(const Schedule& s, const Topology& t, int64_t gathered_budget, const SweepFabric& f) {
    if (!f.on) return simulate(s, t, TimingMode::Overlapped, gathered_budget);
    auto m = fabric_model_for_point(t, s.meta.world, f);
    if (!m) return m.error();
    EngineAdjust a = m.value()->engine_adjust(s.meta);
    return simulate(s, m.value()->ideal_topology(), TimingMode::Overlapped, gathered_budget, &a);
}

}  // namespace zerosim
