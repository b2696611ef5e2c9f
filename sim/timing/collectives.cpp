#include "timing/collectives.hpp"

#include <algorithm>
#include <cctype>

#include "timing/collective_model.hpp"

namespace zerosim {

namespace {
std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace

const char* algorithm_name(Algorithm a) {
    switch (a) {
        case Algorithm::Ring: return "ring";
        case Algorithm::Tree: return "tree";
        case Algorithm::NVLS: return "nvls";
        case Algorithm::NVLSTree: return "nvlstree";
        case Algorithm::CollNetDirect: return "collnetdirect";
        case Algorithm::CollNetChain: return "collnetchain";
        case Algorithm::PAT: return "pat";
    }
    return "?";
}

std::string algorithm_protocol_name(Algorithm a, Protocol p) {
    return std::string(algorithm_name(a)) + "/" + protocol_name(p);
}

std::optional<Algorithm> algorithm_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::NVLS, Algorithm::NVLSTree, Algorithm::CollNetDirect,
                        Algorithm::CollNetChain, Algorithm::PAT})
        if (n == algorithm_name(a)) return a;
    return std::nullopt;
}

std::optional<Protocol> protocol_named(const std::string& name) {
    std::string n = lowercase(name);
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
        if (n == lowercase(protocol_name(p))) return p;
    return std::nullopt;
}

const char* protocol_name(Protocol p) {
    switch (p) {
        case Protocol::LL: return "LL";
        case Protocol::LL128: return "LL128";
        case Protocol::Simple: return "Simple";
    }
    return "?";
}

double CollectivePlan::time_alone_s() const {
    double t = 0;
    if (intra_bytes > 0) t = std::max(t, intra_bytes / intra_rate);
    if (inter_bytes > 0) t = std::max(t, inter_bytes / inter_rate);
    return latency_s + t;
}

std::string algorithm_protocol_name(const CollectivePlan& plan) {
    const NcclChoice c = plan.reported_pair();
    return algorithm_protocol_name(c.algorithm, c.protocol);
}

std::vector<TunerCandidate> tuner_candidates(const Topology& t, OpKind kind, int64_t world) {
    return collective_model_of(t).candidates(t, kind, world);
}

CollectivePlan plan_collective(const Topology& t, OpKind kind, double logged, int64_t world, const TunerChoice& only) {
    return collective_model_of(t).plan(t, kind, logged, world, only);
}

CollectivePlan plan_collective_with(const Topology& t, OpKind kind, double logged, int64_t world, Algorithm a, Protocol p) {
    return collective_model_of(t).plan_with(t, kind, logged, world, a, p);
}

double back_to_back_call_us(const Topology& t, double collective_us, int gpus_per_thread) {
    return std::max(collective_us, static_cast<double>(std::max(1, gpus_per_thread)) * t.launch_overhead_us);
}

Result<TunerChoice> tuner_choice_named(const std::string& algo, const std::string& proto, const Topology& t, OpKind kind,
                                       const std::string& op_name, int64_t world) {
    TunerChoice c;
    if (!algo.empty()) {
        c.algorithm = algorithm_named(algo);
        if (!c.algorithm) return Error{"", "--algo", "unknown algorithm '" + algo + "'; expected ring, tree, nvls, nvlstree, collnetdirect, collnetchain or pat"};
    }
    if (!proto.empty()) {
        c.protocol = protocol_named(proto);
        if (!c.protocol) return Error{"", "--proto", "unknown protocol '" + proto + "'; expected LL, LL128 or Simple"};
    }
    if (algo.empty() && proto.empty()) return c;
    std::vector<TunerCandidate> all = tuner_candidates(t, kind, world);
    if (all.empty())
        return Error{t.source, algo.empty() ? "--proto" : "--algo",
                     t.collective_model + " picks its own algorithm for " + op_name + " on " + t.name +
                         "; --algo and --proto choose among NCCL's"};
    if (std::none_of(all.begin(), all.end(), [&](const TunerCandidate& x) { return c.allows(x); })) {
        std::string avail;
        for (const auto& x : all) avail += (avail.empty() ? "" : ", ") + algorithm_protocol_name(x.algorithm, x.protocol);
        return Error{t.source, algo.empty() ? "--proto" : "--algo",
                     "NCCL has no " + (algo.empty() ? std::string("") : algo + " ") + (proto.empty() ? std::string("") : proto + " ") +
                         "for " + op_name + " on " + std::to_string(world) + " ranks of " + t.name + "; it weighs " + avail};
    }
    return c;
}

}  // namespace zerosim
