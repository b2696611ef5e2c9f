// libFuzzer target for the nccl-tests table reader on its own (tables inside any text).
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/nccl_tests.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto tables = zerosim::parse_nccl_tests(text);
    for (const auto& t : tables)
        for (const auto& r : t.rows) (void)r.time_us;
    return 0;
}
