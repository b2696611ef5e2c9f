#include "formats/zerorun_log.hpp"

#include <algorithm>

#include "core/json_input.hpp"

namespace zerosim {

Result<MeasuredMemory> read_zerorun_memory(const std::string& path) {
    auto text = read_text_file(path, "zerorun JSON log");
    if (!text) return text.error();
    return parse_zerorun_memory(text.value(), path);
}

Result<MeasuredMemory> parse_zerorun_memory(const std::string& text, const std::string& path) {
    auto doc = parse_json_text(text, path);
    if (!doc) return doc.error();
    MeasuredMemory m;
    try {
        JsonField root(doc.value(), path, "");
        root.expect_object();
        // The format and version runtime/executor/run_log.cpp writes, and nothing else.
        if (!root.has("format") || root.at("format").as_string() != "zerorun-log")
            root.fail_here("expected a zerorun --json log (\"format\": \"zerorun-log\")");
        if (root.has("version") && root.at("version").as_integer() != 1)
            root.at("version").fail_here("expected 1 (the version this zerosim reads)");
        m.stage = static_cast<int>(root.at("stage").as_integer());
        if (m.stage < 0 || m.stage > 3) root.at("stage").fail_here("expected a ZeRO stage, 0 to 3");
        m.world = root.at("world").as_integer();
        if (m.world < 1) root.at("world").fail_here("expected a whole number, 1 or more");
        auto ranks = root.at("ranks");
        ranks.expect_array();
        for (size_t i = 0; i < ranks.size(); ++i) {
            auto mem = ranks.at(i).at("memory");
            // Categories are objects with a peak; other entries (state_peak) are totals.
            for (auto it = mem.raw().begin(); it != mem.raw().end(); ++it)
                if (it.value().is_object() && it.value().contains("peak")) {
                    int64_t peak = mem.at(it.key()).at("peak").as_integer();
                    if (peak < 0) mem.at(it.key()).at("peak").fail_here("expected bytes, 0 or more");
                    m.peak[it.key()] = std::max(m.peak[it.key()], peak);
                }
        }
    } catch (const InputFailure& f) {
        return f.error;
    }
    return m;
}

}  // namespace zerosim
