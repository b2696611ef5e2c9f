// --fabric, --degrade and --straggler (predict, bench, sweep): fabric mode (timing/fabric.hpp).
#include <iostream>

#include "command.hpp"

namespace zerosim::cli {

void add_fabric_flags(CLI::App* sub, FabricArgs& a) {
    sub->add_flag("--fabric", a.on,
                  "Fabric mode: every GPU, NIC and switch in the simulation and collectives as flows on their routes "
                  "(docs/fabric.md); the default is the representative mode");
    sub->add_option("--degrade", a.degrade,
                    "--fabric: a link at a share of its bandwidth: node<N>.nic<J>=S, node<N>.gpu<G>.nvlink=S or "
                    "leaf<L>.uplink=S (repeatable)");
    sub->add_option("--straggler", a.straggler, "--fabric: a GPU at a share of its compute: rank<R>=S (repeatable)");
}

Result<std::shared_ptr<FabricModel>> fabric_model_for(const FabricArgs& a, const Topology& t, int64_t world) {
    if (!a.on) {
        if (!a.degrade.empty() || !a.straggler.empty())
            return Error{"", a.degrade.empty() ? "--straggler" : "--degrade",
                         "needs --fabric (the representative mode times one rank and cannot slow one link or GPU)"};
        return std::shared_ptr<FabricModel>();
    }
    FabricOptions o;
    for (const auto& [target, share] : t.whatif_degrade) o.degrade.push_back({target, share, t.source, "whatif.degrade." + target});
    for (const auto& [target, share] : t.whatif_straggler) o.straggler.push_back({target, share, t.source, "whatif.straggler." + target});
    for (const auto& text : a.degrade) {
        auto w = parse_fabric_what_if(text, "--degrade");
        if (!w) return w.error();
        o.degrade.push_back(w.value());
    }
    for (const auto& text : a.straggler) {
        auto w = parse_fabric_what_if(text, "--straggler");
        if (!w) return w.error();
        o.straggler.push_back(w.value());
    }
    return FabricModel::build(t, world, o);
}

Status fabric_sweep_options(const FabricArgs& a, SweepFabric& out) {
    if (!a.on && (!a.degrade.empty() || !a.straggler.empty()))
        return Error{"", a.degrade.empty() ? "--straggler" : "--degrade", "needs --fabric"};
    out.on = a.on;
    for (const auto& text : a.degrade) {
        auto w = parse_fabric_what_if(text, "--degrade");
        if (!w) return w.error();
        out.options.degrade.push_back(w.value());
    }
    for (const auto& text : a.straggler) {
        auto w = parse_fabric_what_if(text, "--straggler");
        if (!w) return w.error();
        out.options.straggler.push_back(w.value());
    }
    return std::nullopt;
}

void note_fabric(const FabricModel& m) {
    std::cerr << "zerosim: note: fabric mode: " << m.flow_simulations() << " flow simulation(s)";
    if (m.compute_slowdown() > 1.0) std::cerr << ", compute x" << m.compute_slowdown() << " (the slowest rank)";
    std::cerr << '\n';
    for (const auto& line : m.summary()) std::cerr << "zerosim: note:   " << line << '\n';
}

}  // namespace zerosim::cli
