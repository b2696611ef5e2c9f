// libFuzzer target for the schedule IR's JSON reader (formats/schedule_outputs.hpp
// parse_schedule_json, the text entry point of read_schedule_json that zerorun uses).
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/schedule_outputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto s = zerosim::parse_schedule_json(text, "fuzz.json");
    if (s.ok()) (void)s->ops.size();
    return 0;
}
