#include "schedule/partition.hpp"

#include <algorithm>

namespace zerosim {

FlatGroupLayout flat_group_layout(const Model& m, int group, int64_t world, bool round_robin) {
    FlatGroupLayout L;
    L.group = group;
    std::vector<int> members;
    for (size_t i = 0; i < m.params.size(); ++i)
        if (m.params[i].group == group) members.push_back(static_cast<int>(i));
    if (round_robin) {
        // Only the first min(world, |members|) lists can be non-empty.
        size_t nlists = static_cast<size_t>(std::min<int64_t>(world, static_cast<int64_t>(members.size())));
        std::vector<std::vector<int>> lists(nlists);
        for (size_t i = 0; i < members.size(); ++i) lists[i % static_cast<size_t>(world)].push_back(members[i]);
        for (auto& l : lists) L.order.insert(L.order.end(), l.begin(), l.end());
    } else {
        L.order = members;
    }
    int64_t off = 0;
    for (int p : L.order) {
        L.flat_offset[p] = off;
        off += m.params[p].numel;
    }
    L.numel = off;
    L.partition_size = flat_partition_size(off, world);
    L.padded_numel = L.partition_size * world;
    return L;
}

int64_t flat_partition_size(int64_t numel, int64_t world) {
    int64_t align = kPartitionAlignment * world;
    return (numel + align - 1) / align * align / world;
}

std::vector<GradSlice> FlatGroupLayout::slices(const Model& m, int param) const {
    std::vector<GradSlice> out;
    int64_t start = flat_offset.at(param);
    int64_t end = start + m.params[param].numel;
    int64_t first = start / partition_size;
    for (int64_t part = first; part * partition_size < end; ++part) {
        int64_t lo = std::max(start, part * partition_size);
        int64_t hi = std::min(end, (part + 1) * partition_size);
        out.push_back(GradSlice{static_cast<int>(part), lo - start, hi - lo});
    }
    return out;
}

int64_t FlatGroupLayout::owned_real_elements(int rank) const {
    int64_t lo = rank * partition_size;
    int64_t hi = std::min(numel, lo + partition_size);
    return std::max<int64_t>(0, hi - lo);
}

}  // namespace zerosim
