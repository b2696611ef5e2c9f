// libFuzzer target for one comms_logger line and DeepSpeed's size strings.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/comms_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto line = zerosim::parse_ds_verbose_line(text);
    if (line) (void)zerosim::ds_size_string(line->op.bytes < 0 ? 0 : line->op.bytes);
    (void)zerosim::parse_ds_size_string(text);
    return 0;
}
