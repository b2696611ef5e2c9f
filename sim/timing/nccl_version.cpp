#include "timing/nccl_version.hpp"

#include <cctype>
#include <cstdlib>

namespace zerosim {

std::optional<NcclVersion> NcclVersion::parse(const std::string& text) {
    // major '.' minor, each a whole number; the rest (".5-1", "+cuda12.8") is a patch level the
    // tuner's constants do not depend on.
    size_t dot = text.find('.');
    if (dot == std::string::npos || dot == 0) return std::nullopt;
    size_t end = dot + 1;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end == dot + 1 || end - dot > 3) return std::nullopt;
    for (size_t i = 0; i < dot; ++i)
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    if (end < text.size() && text[end] != '.' && text[end] != '+' && text[end] != '-') return std::nullopt;
    NcclVersion v;
    v.major = std::atoi(text.substr(0, dot).c_str());
    v.minor = std::atoi(text.substr(dot + 1, end - dot - 1).c_str());
    if (v.major != 2 || v.minor < 12 || v.minor > 30) return std::nullopt;
    return v;
}

const char* known_nccl_versions() { return "2.12 to 2.30 (e.g. 2.18, 2.21, 2.23, 2.26, 2.28)"; }

}  // namespace zerosim
