// libFuzzer target for the nccl-tests table reader on its own (tables inside any text): a table
// or an error naming the row, never a crash, a hang or an impossible row.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "formats/nccl_tests.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto tables = zerosim::parse_nccl_tests(text, "fuzz.txt");
    if (tables.ok())
        for (const auto& t : tables.value())
            for (const auto& r : t.rows)
                if (r.bytes < 0 || r.count < 0 || !(r.time_us >= 0) || !std::isfinite(r.time_us)) std::abort();
    return 0;
}
