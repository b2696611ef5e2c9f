#include "core/number_list.hpp"

#include <sstream>
#include <stdexcept>

namespace zerosim {

Result<std::vector<int>> parse_int_list(const std::string& text, const std::string& flag, const std::string& what) {
    std::vector<int> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        try {
            size_t used = 0;
            int v = std::stoi(item, &used);
            if (used != item.size()) throw std::invalid_argument(item);
            out.push_back(v);
        } catch (const std::exception&) {
            return Error{"", flag, "expected comma-separated " + what + ", found '" + item + "'"};
        }
    }
    return out;
}

Result<std::vector<int64_t>> parse_size_list(const std::string& text, const std::string& flag) {
    auto sizes = parse_int_list(text, flag, "sizes");
    if (!sizes || sizes->empty()) return Error{"", flag, "expected sizes such as 1,2,4, found '" + text + "'"};
    std::vector<int64_t> out;
    for (int n : sizes.value()) {
        if (n < 1) return Error{"", flag, "sizes must be at least 1, found " + std::to_string(n)};
        out.push_back(n);
    }
    return out;
}

}  // namespace zerosim
