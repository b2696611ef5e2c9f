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

}  // namespace zerosim
