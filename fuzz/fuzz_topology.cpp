// libFuzzer target for the topology reader (timing/topology.hpp parse_topology), as read and
// scaled to other node counts (--nodes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "timing/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto t = zerosim::parse_topology("fuzz.json", text);
    if (t.ok()) (void)t->total_gpus();
    auto scaled = zerosim::parse_topology("fuzz.json", text, 3);
    if (scaled.ok()) (void)scaled->total_gpus();
    return 0;
}
