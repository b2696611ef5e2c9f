// libFuzzer target for GPT-NeoX's YAML configs (inputs/neox_config.hpp parse_neox_config): the YAML
// reading, the merge, the model and the DeepSpeed config built from them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "inputs/neox_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    (void)zerosim::parse_neox_config({"fuzz.yml"}, {text}, 50277, zerosim::kBaselineRelease);
    return 0;
}
