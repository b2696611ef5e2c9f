#include "formats/zerorun_log.hpp"

#include <algorithm>

#include "core/json_input.hpp"

namespace zerosim {

Result<MeasuredMemory> read_zerorun_memory(const std::string& path) {
    auto doc = read_json_file(path);
    if (!doc) return doc.error();
    MeasuredMemory m;
    try {
        JsonField root(doc.value(), path, "");
        if (!root.has("format") || root.at("format").as_string().find("zerorun") == std::string::npos)
            root.fail_here("expected a zerorun --json log (\"format\": \"zerorun-...\")");
        m.stage = static_cast<int>(root.at("stage").as_integer());
        m.world = root.at("world").as_integer();
        auto ranks = root.at("ranks");
        ranks.expect_array();
        for (size_t i = 0; i < ranks.size(); ++i) {
            auto mem = ranks.at(i).at("memory");
            // Categories are objects with a peak; other entries (state_peak) are totals.
            for (auto it = mem.raw().begin(); it != mem.raw().end(); ++it)
                if (it.value().is_object() && it.value().contains("peak")) {
                    int64_t peak = mem.at(it.key()).at("peak").as_integer();
                    m.peak[it.key()] = std::max(m.peak[it.key()], peak);
                }
        }
    } catch (const InputFailure& f) {
        return f.error;
    }
    return m;
}

}  // namespace zerosim
