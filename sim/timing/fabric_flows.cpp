// Fabric mode's flows (timing/fabric.hpp): a collective algorithm's steady-state traffic as
// concurrent flows between the ranks it pairs, run once on the fabric platform by SimGrid's
// max-min sharing, against the time the same flows take when only their endpoints' ports limit.
//
// The patterns follow how NCCL connects ranks (docs/collectives.md; NCCL src/graph/rings.cc,
// trees.cc, connect.cc): a ring per channel through a node's GPUs and out of it through one NIC,
// one channel per NIC the group's GPUs own (a rail: NIC j of one node sends to NIC j of the next);
// a tree is a chain inside the node and a double binary tree across nodes (src/graph/trees.cc,
// ncclGetBtree: rank r's parent is found by clearing its lowest set bit and setting the next one),
// whose second tree is the first mirrored (rank r as n-1-r) so one node's inner roles are spread,
// each edge busy both ways (the reduction up, the broadcast down, pipelined); all_to_all sends
// from every member to every other, rail to rail (PXN moves a message over NVLink to the GPU
// beside the peer's rail first).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "fabric_impl.hpp"

namespace zerosim {

namespace {

// The unit of traffic per flow; the ratio does not depend on it.
constexpr double kFlowBytes = 1e8;
constexpr int64_t kMaxFlows = 16384;

// The parent of node position r in a binary tree over n positions rooted at 0 (-1 for the root).
int64_t btree_parent(int64_t r, int64_t n) {
    if (r == 0) return -1;
    int64_t bit = r & -r;
    int64_t up = (r ^ bit) | (bit << 1);
    return up < n ? up : (r ^ bit);
}

// Node positions a pattern connects across nodes: (from, to) pairs, each a flow.
std::vector<std::pair<int64_t, int64_t>> across_nodes(FlowPattern p, int64_t m, int tree, int64_t max_shifts) {
    std::vector<std::pair<int64_t, int64_t>> e;
    if (m < 2) return e;
    if (p == FlowPattern::Ring) {
        for (int64_t i = 0; i < m; ++i) e.push_back({i, (i + 1) % m});
    } else if (p == FlowPattern::Tree) {
        for (int64_t r = 1; r < m; ++r) {
            int64_t a = r, b = btree_parent(r, m);
            if (tree == 1) a = m - 1 - a, b = m - 1 - b;
            e.push_back({a, b});
            e.push_back({b, a});
        }
    } else {
        // Every pair (node i to node i + s for every shift s); past `max_shifts` shifts an even
        // sample of them, each the middle of its stretch, which keeps the share of traffic that
        // crosses each leaf boundary.
        std::vector<int64_t> shifts;
        if (m - 1 <= max_shifts)
            for (int64_t s = 1; s < m; ++s) shifts.push_back(s);
        else
            for (int64_t i = 0; i < max_shifts; ++i) shifts.push_back(1 + (2 * i + 1) * (m - 1) / (2 * max_shifts));
        for (int64_t s : shifts)
            for (int64_t i = 0; i < m; ++i) e.push_back({i, (i + s) % m});
    }
    return e;
}

// Inside one node, among its members (ascending ranks).
void inside_node(FlowPattern p, const std::vector<int>& on, std::vector<std::pair<int, int>>& out) {
    const size_t m = on.size();
    if (m < 2) return;
    if (p == FlowPattern::Ring) {
        for (size_t i = 0; i < m; ++i) out.push_back({on[i], on[(i + 1) % m]});
    } else if (p == FlowPattern::Tree) {
        for (size_t i = 0; i + 1 < m; ++i) {
            out.push_back({on[i], on[i + 1]});
            out.push_back({on[i + 1], on[i]});
        }
    } else {
        for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < m; ++j)
                if (i != j) out.push_back({on[i], on[j]});
    }
}

// The slowest flow's time over its ideal: the most bytes any endpoint port must carry over that
// port's nominal capacity.
// `design` is the same traffic on the node design (every node with all its NICs): its endpoint
// loads set the ideal, so NICs a node lacks show as a slowdown.
double slowdown(const std::vector<std::pair<int64_t, int64_t>>& pairs, const std::vector<std::pair<int64_t, int64_t>>& design,
                const std::vector<simgrid::s4u::Host*>& hosts, double capacity, int& simulations) {
    if (pairs.empty()) return 1.0;
    std::map<int64_t, double> out, in;
    std::vector<FabricFlow> flows;
    flows.reserve(pairs.size());
    for (auto [a, b] : design) {
        out[a] += kFlowBytes;
        in[b] += kFlowBytes;
    }
    for (auto [a, b] : pairs) flows.push_back({hosts[static_cast<size_t>(a)], hosts[static_cast<size_t>(b)], kFlowBytes});
    double most = 0;
    for (const auto& [k, v] : out) most = std::max(most, v);
    for (const auto& [k, v] : in) most = std::max(most, v);
    ++simulations;
    // To 6 digits: SimGrid's shares carry rounding in the last bits, which would make an
    // unslowed plan differ from the representative one by 1 ulp.
    return std::round(run_fabric_flows(flows) / (most / capacity) * 1e6) / 1e6;
}

}  // namespace

FabricFactors FabricModel::factors(FlowPattern p, const std::vector<std::vector<int>>& groups) {
    Impl& im = *impl_;
    std::vector<std::pair<int64_t, int64_t>> intra, inter, inter_design;
    for (const auto& members : groups) {
        // The group's nodes in rank order, each with its members.
        std::vector<int64_t> nodes;
        std::map<int64_t, std::vector<int>> on;
        for (int r : members) {
            int64_t n = im.node_of(r);
            if (!on.count(n)) nodes.push_back(n);
            on[n].push_back(r);
        }
        std::vector<std::pair<int, int>> local;
        for (int64_t n : nodes) inside_node(p, on[n], local);
        for (auto [a, b] : local) intra.push_back({a, b});
        if (nodes.size() < 2 || im.platform->nic.empty()) continue;
        // The NICs (rails) each node's members own, in order; one channel per rail.
        // The channels are the node design's; a node with fewer NICs takes them on the NICs it has.
        std::vector<std::vector<int64_t>> rails(nodes.size()), design(nodes.size());
        size_t channels = 0;
        for (size_t i = 0; i < nodes.size(); ++i) {
            std::set<int64_t> seen, seen_design;
            for (int r : on[nodes[i]]) {
                if (seen.insert(im.nic_of(r)).second) rails[i].push_back(im.nic_of(r));
                if (seen_design.insert(im.design_nic_of(r)).second) design[i].push_back(im.design_nic_of(r));
            }
            channels = std::max(channels, design[i].size());
        }
        const auto m = static_cast<int64_t>(nodes.size());
        // all_to_all's shifts: all up to 64, fewer where the groups' flows would pass about 16K
        // (SimGrid's sharing is solved again at each flow's end: its cost grows faster than the flows), at least 4.
        const int64_t budget = kMaxFlows / std::max<int64_t>(1, m * static_cast<int64_t>(channels * groups.size()));
        const int64_t max_shifts = std::clamp<int64_t>(budget, 4, 64);
        for (size_t c = 0; c < channels; ++c) {
            // A tree channel per rail, the two trees on alternate rails (both on a single rail).
            for (int tree = 0; tree < 2; ++tree) {
                if (p != FlowPattern::Tree && tree == 1) break;
                if (p == FlowPattern::Tree && channels > 1 && static_cast<int>(c % 2) != tree) continue;
                for (auto [a, b] : across_nodes(p, m, tree, max_shifts)) {
                    const auto& ra = rails[static_cast<size_t>(a)];
                    const auto& rb = rails[static_cast<size_t>(b)];
                    inter.push_back({ra[c % ra.size()], rb[c % rb.size()]});
                    const auto& da = design[static_cast<size_t>(a)];
                    const auto& db = design[static_cast<size_t>(b)];
                    inter_design.push_back({da[c % da.size()], db[c % db.size()]});
                }
            }
        }
    }
    im.apply();
    FabricFactors f;
    f.intra = slowdown(intra, intra, im.platform->gpu, im.gpu_capacity, im.simulations);
    f.inter = slowdown(inter, inter_design, im.platform->nic, im.nic_capacity, im.simulations);
    return f;
}

}  // namespace zerosim
