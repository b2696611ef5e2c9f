// Small statistics and number formats shared by the validator's reports (private to validate/).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace zerosim::validate_detail {

// The median (mean of the two middle values for an even count); 0 for no values.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t k = v.size() / 2;
    return v.size() % 2 ? v[k] : (v[k - 1] + v[k]) / 2;
}

// A fraction as a percentage with one decimal: 0.1234 -> "12.3%".
inline std::string percent_text(double fraction) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", fraction * 100);
    return b;
}

}  // namespace zerosim::validate_detail
