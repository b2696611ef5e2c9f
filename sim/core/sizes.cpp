#include "core/sizes.hpp"

#include <cctype>
#include <limits>

namespace zerosim {

namespace {

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The multiplier of a unit, 0 for one the grammar does not know.
int64_t unit_multiplier(const std::string& unit) {
    if (unit.empty() || unit == "B") return 1;
    if (unit == "K" || unit == "k" || unit == "KB") return int64_t{1} << 10;
    if (unit == "M" || unit == "m" || unit == "MB") return int64_t{1} << 20;
    if (unit == "G" || unit == "g" || unit == "GB") return int64_t{1} << 30;
    return 0;
}

}  // namespace

Result<int64_t> parse_size(const std::string& text, const std::string& flag) {
    const Error syntax{"", flag,
                       "expected a size such as 8, 64K, 8M or 8GB (a whole number of bytes, at least 1; K, M and G "
                       "are 1024-based), found '" + text + "'"};
    // The number as digits and a power of ten: value = digits x 10^scale.
    size_t i = 0;
    const size_t n = text.size();
    if (i < n && text[i] == '+') ++i;
    std::string digits;
    int64_t scale = 0;
    while (i < n && digit(text[i])) digits += text[i++];
    if (i < n && text[i] == '.') {
        ++i;
        while (i < n && digit(text[i])) {
            digits += text[i++];
            --scale;
        }
    }
    if (digits.empty()) return syntax;
    // An exponent needs its digits; "8e" is the number 8 with the unit "e".
    if (i < n && (text[i] == 'e' || text[i] == 'E')) {
        size_t j = i + 1;
        bool negative = false;
        if (j < n && (text[j] == '+' || text[j] == '-')) negative = text[j++] == '-';
        if (j < n && digit(text[j])) {
            int64_t e = 0;
            while (j < n && digit(text[j])) {
                e = std::min<int64_t>(e * 10 + (text[j] - '0'), 100000);   // far past any size either way
                ++j;
            }
            scale += negative ? -e : e;
            i = j;
        }
    }
    const std::string unit = text.substr(i);
    const int64_t mult = unit_multiplier(unit);
    if (mult == 0)
        return Error{"", flag, "unknown size unit '" + unit + "' in '" + text + "' (use K, M or G, with or without B)"};

    const Error too_large{"", flag, "'" + text + "' is more bytes than a 64-bit size holds (at most " +
                                        std::to_string(std::numeric_limits<int64_t>::max()) + ")"};
    size_t lead = digits.find_first_not_of('0');
    if (lead == std::string::npos) return syntax;   // zero bytes
    digits.erase(0, lead);
    while (scale < 0 && digits.back() == '0') {
        digits.pop_back();
        ++scale;
    }
    // Whole digits beyond 19 already exceed INT64_MAX (about 9.2e18) even before the unit.
    if (static_cast<int64_t>(digits.size()) + scale > 19) return too_large;
    // With at most 19 whole digits, 25 digits in all or a power of ten below 10^-36 leave a fraction
    // that no unit up to 2^30 makes whole.
    if (digits.size() > 25 || scale < -36) return syntax;
    __extension__ typedef unsigned __int128 Wide;   // g++ and clang; -Wpedantic knows it is not ISO
    const Wide limit = static_cast<Wide>(std::numeric_limits<int64_t>::max());
    Wide v = 0;
    for (char c : digits) v = v * 10 + static_cast<Wide>(c - '0');   // below 10^25 < 2^84
    v *= static_cast<Wide>(mult);                                      // below 2^114: no wrap
    for (; scale > 0; --scale) {
        v *= 10;
        if (v > limit) return too_large;
    }
    if (scale < 0) {
        Wide p = 1;
        for (int64_t k = 0; k < -scale; ++k) p *= 10;
        if (v % p != 0) return syntax;   // not a whole number of bytes
        v /= p;
    }
    if (v > limit) return too_large;
    return static_cast<int64_t>(v);
}

}  // namespace zerosim
