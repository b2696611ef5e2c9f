// Whole numbers on the command line are decimal, on every integer flag of both programs. CLI11
// (2.1, TypeTools.hpp integral_conversion) reads them with strtoll(..., 0): "010" would be octal 8,
// "09" unreadable and "0x10" 16. One transform, put in front of every integer option's own checks
// before parsing, makes the text plain decimal ("010" is 10) or refuses it.
// Header only: the two front ends link CLI11, zerosim_core does not.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace zerosim {

// "[+-]digits" with the leading zeros dropped ("010" -> "10", "-007" -> "-7", "000" -> "0"); empty
// when `text` is not a decimal whole number.
inline std::string decimal_integer_text(const std::string& text) {
    size_t i = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
    if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos) return "";
    size_t first = text.find_first_not_of('0', i);
    std::string digits = first == std::string::npos ? "0" : text.substr(first);
    return (text[0] == '-' && digits != "0" ? "-" : "") + digits;
}

// Every option of `app` and its subcommands whose value is a whole number (CLI11's "INT" and
// "UINT"); call it once all flags are added.
inline void decimal_integer_options(CLI::App& app) {
    for (CLI::Option* o : app.get_options()) {
        const std::string type = o->get_type_name();
        if (type != "INT" && type != "UINT") continue;
        // Only what CLI11 would misread is touched: a decimal with leading zeros is rewritten, a
        // 0x/0o/0b literal refused; other text ("all" for --rank, "abc") goes on to the option's
        // own checks and CLI11's conversion, as before.
        o->transform(CLI::Validator(
            [](std::string& value) -> std::string {
                const size_t at = !value.empty() && (value[0] == '+' || value[0] == '-') ? 1 : 0;
                if (value.size() < at + 2 || value[at] != '0') return "";
                std::string decimal = decimal_integer_text(value);
                if (decimal.empty()) return "expected a decimal whole number, found '" + value + "'";
                value = decimal;
                return "";
            },
            ""));
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) decimal_integer_options(*sub);
}

}  // namespace zerosim
