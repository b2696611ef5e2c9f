// Text placed in the HTML report and the SVG plots (private to prediction/).
#pragma once

#include <string>

namespace zerosim::prediction_detail {

// Escapes the characters that would end a text node or an attribute value.
inline std::string html_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

}  // namespace zerosim::prediction_detail
