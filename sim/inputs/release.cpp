#include "inputs/release.hpp"

#include <cstdio>

namespace zerosim {

std::string Release::number() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string Release::name() const { return "v" + number(); }

const std::vector<Release>& known_releases() {
    // The tags of deepspeedai/DeepSpeed from v0.14.2 to v0.19.5 (deepspeed-releases.md §0).
    static const std::vector<Release> tags = {
        {0, 14, 2}, {0, 14, 3}, {0, 14, 4}, {0, 14, 5}, {0, 15, 0}, {0, 15, 1}, {0, 15, 2}, {0, 15, 3},
        {0, 15, 4}, {0, 16, 0}, {0, 16, 1}, {0, 16, 2}, {0, 16, 3}, {0, 16, 4}, {0, 16, 5}, {0, 16, 6},
        {0, 16, 7}, {0, 16, 8}, {0, 16, 9}, {0, 17, 0}, {0, 17, 1}, {0, 17, 2}, {0, 17, 3}, {0, 17, 4},
        {0, 17, 5}, {0, 17, 6}, {0, 18, 0}, {0, 18, 1}, {0, 18, 2}, {0, 18, 3}, {0, 18, 4}, {0, 18, 5},
        {0, 18, 6}, {0, 18, 7}, {0, 18, 8}, {0, 18, 9}, {0, 19, 0}, {0, 19, 1}, {0, 19, 2}, {0, 19, 3},
        {0, 19, 4}, {0, 19, 5}};
    return tags;
}

Result<Release> parse_release(const std::string& text, const std::string& field) {
    std::string t = !text.empty() && (text[0] == 'v' || text[0] == 'V') ? text.substr(1) : text;
    const std::string range = "a DeepSpeed release from " + kBaselineRelease.number() + " to " + kNewestRelease.number() +
                              " (the releases zerosim's rules cover), such as " + kNewestRelease.number();
    Release r;
    int used = 0;
    if (t.size() > 16 || std::sscanf(t.c_str(), "%d.%d.%d%n", &r.major, &r.minor, &r.patch, &used) != 3 ||
        used != static_cast<int>(t.size()) || t.find_first_not_of("0123456789.") != std::string::npos)
        return Error{"", field, "expected " + range + ", found '" + text + "'"};
    for (const auto& k : known_releases())
        if (k == r) return r;
    if (r < kBaselineRelease || r > kNewestRelease)
        return Error{"", field, "DeepSpeed " + r.number() + " is outside the releases zerosim's rules cover: expected " + range};
    return Error{"", field, "DeepSpeed " + r.number() + " is not a tagged release: expected " + range};
}

}  // namespace zerosim
