// libFuzzer target for the validator's log reader (DeepSpeed comms_logger output, nccl-tests
// tables, zerosim JSON logs): any input must give a log or a clean Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/measured_logs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto log = zerosim::parse_log(text, "fuzz.log");
    if (log.ok()) {
        // Touch what a caller reads.
        size_t n = log->ops.size() + log->summary.size() + log->tables.size();
        (void)n;
    }
    return 0;
}
