#include "core/error.hpp"

#include <iostream>

namespace zerosim {

std::string printable(const std::string& text, size_t max) {
    std::string out;
    auto put = [&out](unsigned char c) {
        static const char* hex = "0123456789abcdef";
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        else out += static_cast<char>(c);
    };
    if (text.size() <= max) {
        for (unsigned char c : text) put(c);
        return out;
    }
    // The head says what the value was, the tail what was expected of it (messages end with it).
    // Cut at character boundaries: never inside a UTF-8 sequence.
    size_t head = max * 2 / 3, tail_at = text.size() - (max - head);
    auto continuation = [&text](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
    while (head > 0 && continuation(head)) --head;
    while (tail_at < text.size() && continuation(tail_at)) ++tail_at;
    for (size_t i = 0; i < head; ++i) put(static_cast<unsigned char>(text[i]));
    out += "...[" + std::to_string(tail_at - head) + " bytes cut]...";
    for (size_t i = tail_at; i < text.size(); ++i) put(static_cast<unsigned char>(text[i]));
    return out;
}

std::string Error::what() const {
    std::string s;
    if (!file.empty()) s += printable(file, 512);
    if (!field.empty()) s += (s.empty() ? "" : ": ") + std::string("field '") + printable(field, 256) + "'";
    if (!s.empty()) s += ": ";
    return s + printable(message);
}

int print_input_error(const std::string& program, const Error& e, bool print) {
    if (print) std::cerr << program << ": error: " << e.what() << '\n';
    return 2;
}

void warn_ignored_keys(const std::string& program, const std::string& file, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    std::cerr << program << ": warning: " << printable(file, 512) << ": ignoring keys zerosim does not know: " << printable(list)
              << '\n';
}

}  // namespace zerosim
