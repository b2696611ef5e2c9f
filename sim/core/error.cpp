#include "core/error.hpp"

#include <iostream>

namespace zerosim {

int print_input_error(const std::string& program, const Error& e, bool print) {
    if (print) std::cerr << program << ": error: " << e.what() << '\n';
    return 2;
}

void warn_ignored_keys(const std::string& program, const std::string& file, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    std::cerr << program << ": warning: " << file << ": ignoring keys zerosim does not know: " << list << '\n';
}

}  // namespace zerosim
