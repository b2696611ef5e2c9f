// libFuzzer target for the DeepSpeed config reader (inputs/ds_config.hpp parse_ds_config) and the
// batch arithmetic done on what it read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "inputs/ds_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto cfg = zerosim::parse_ds_config("fuzz.json", text);
    if (cfg.ok()) (void)zerosim::resolve_batch(cfg.value(), 4);
    return 0;
}
