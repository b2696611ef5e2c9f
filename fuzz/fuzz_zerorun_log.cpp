// libFuzzer target for zerorun's --json log, both ways it is read: as a measured log (validate,
// report) and for its memory peaks (`zerosim memory --measured`). Any input must give a result or
// a clean Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/measured_logs.hpp"
#include "formats/zerorun_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto log = zerosim::parse_log(text, "fuzz.json");
    if (log.ok())
        for (const auto& op : log->ops) (void)op.time_ms;
    auto mem = zerosim::parse_zerorun_memory(text, "fuzz.json");
    if (mem.ok()) (void)mem->peak.size();
    return 0;
}
