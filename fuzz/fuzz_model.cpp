// libFuzzer target for the model readers (inputs/model.hpp): a parameter list and a Hugging Face
// config.json, from text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "inputs/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto list = zerosim::model_from_param_list_json("fuzz.json", text);
    if (list.ok()) (void)list->params.size();
    auto hf = zerosim::model_from_hf_config_json("fuzz.json", text);
    if (hf.ok()) (void)hf->params.size();
    return 0;
}
