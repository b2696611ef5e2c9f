#include "core/sizes.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

namespace {

// A number as a flag's error shows it: fixed notation without trailing zeros (0.5, 8, 1e9 as 1000000000).
std::string trimmed_number_text(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

}  // namespace

Result<int64_t> parse_int_flag(const std::string& text, const std::string& flag, int64_t min, int64_t max) {
    const std::string found = ", found '" + text + "'";
    const Error syntax{"", flag, "expected an integer" + found};
    const Error range{"", flag,
                      "expected an integer " +
                          (max == std::numeric_limits<int64_t>::max() ? "of at least " + std::to_string(min)
                                                                      : "from " + std::to_string(min) + " to " + std::to_string(max)) +
                          found};
    size_t i = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
    if (i == text.size()) return syntax;
    for (size_t j = i; j < text.size(); ++j)
        if (!digit(text[j])) return syntax;
    errno = 0;
    long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE || v < min || v > max) return range;   // past 64 bits is out of range, never wrapped
    return static_cast<int64_t>(v);
}

Result<double> parse_real_flag(const std::string& text, const std::string& flag, double min, bool min_exclusive) {
    const std::string found = ", found '" + text + "'";
    const Error syntax{"", flag, "expected a finite number" + found};
    // Decimal only: strtod also reads "inf", "nan" and hex floats, none of which a flag means.
    if (text.empty()) return syntax;
    for (char c : text)
        if (!digit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') return syntax;
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return syntax;
    if (min_exclusive ? !(v > min) : !(v >= min))
        return Error{"", flag, std::string("expected a number ") + (min_exclusive ? "greater than " : "of at least ") + trimmed_number_text(min) + found};
    return v;
}

Error command_line_error(const std::string& what) {
    // CLI11 2.x: ConversionError "Could not convert: NAME = VALUE"; RequiredError "NAME is required";
    // ValidationError and ArgumentMismatch "NAME: MSG".
    const std::string conv = "Could not convert: ";
    if (what.rfind(conv, 0) == 0) {
        std::string rest = what.substr(conv.size());
        size_t eq = rest.find(" = ");
        if (eq != std::string::npos)
            return Error{"", rest.substr(0, eq), "cannot read '" + rest.substr(eq + 3) + "'"};
    }
    if (!what.empty() && what[0] == '-') {
        size_t req = what.find(" is required");
        if (req != std::string::npos && what.find(' ') == req) return Error{"", what.substr(0, req), "required"};
        size_t colon = what.find(": ");
        if (colon != std::string::npos && what.find(' ') > colon) {
            std::string msg = what.substr(colon + 2);
            // ArgumentMismatch: "1 required INT missing" (the flag ended the command line).
            if (msg.find(" required ") != std::string::npos && msg.size() > 8 && msg.substr(msg.size() - 8) == " missing")
                msg = "expected a value after the flag";
            return Error{"", what.substr(0, colon), msg};
        }
    }
    return Error{"", "", what};
}

std::string binary_size_string(int64_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(bytes);
    int i = 0;
    while (i < 6 && std::fabs(v) >= 1024.0) {
        v /= 1024.0;
        ++i;
    }
    char buf[48];
    if (i == 0)
        std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.2f %s", v, units[i]);
    return buf;
}

}  // namespace zerosim
