// A DeepSpeed release, as `--deepspeed VERSION` names it: the tagged releases from v0.14.2 (the
// dialect zerosim was built on, docs/zero-comm.md) to v0.19.5 (the newest one the release rules of
// schedule/release_rules.hpp and the key table of ds_config_keys.cpp cover;
// ../shared/docs/deepspeed-releases.md lists every change between them).
#pragma once

#include <compare>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

struct Release {
    int major = 0, minor = 14, patch = 2;
    auto operator<=>(const Release&) const = default;
    // "v0.17.6"
    std::string name() const;
    // "0.17.6" (the form `deepspeed.__version__` and the dialect string use)
    std::string number() const;
};

// The library's default: the release every existing test and reference log of
// ../shared/reference/deepspeed-v0.14.2-cpu was written against.
inline constexpr Release kBaselineRelease{0, 14, 2};
// The newest release the rules cover: the command lines' default when --deepspeed is not given.
inline constexpr Release kNewestRelease{0, 19, 5};

// Every tagged release from kBaselineRelease to kNewestRelease, oldest first.
const std::vector<Release>& known_releases();

// "0.17.6" or "v0.17.6" -> that release; anything else (malformed, not a tag, out of range) an
// error on `field` naming the accepted range.
Result<Release> parse_release(const std::string& text, const std::string& field = "--deepspeed");

// Whether `r` lies in [first, last] (both inclusive).
inline bool in_releases(Release r, Release first, Release last) { return first <= r && r <= last; }

}  // namespace zerosim
