#include "core/json_input.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <sstream>

namespace zerosim {

namespace {

// nlohmann reports a byte offset; people want a line and a column.
std::pair<size_t, size_t> line_and_column(const std::string& text, size_t byte) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return {line, col};
}

}  // namespace

std::string json_type_name(const Json& v) {
    switch (v.type()) {
        case Json::value_t::null: return "null";
        case Json::value_t::object: return "an object";
        case Json::value_t::array: return "an array";
        case Json::value_t::string: return "a string";
        case Json::value_t::boolean: return "a boolean";
        case Json::value_t::number_integer:
        case Json::value_t::number_unsigned: return "an integer";
        case Json::value_t::number_float: return "a number";
        default: return "an unsupported value";
    }
}

Result<Json> parse_json_text(const std::string& text, const std::string& name) {
    try {
        return Json::parse(text);
    } catch (const Json::parse_error& e) {
        // e.byte is one past the offending character.
        size_t at = e.byte > 0 ? e.byte - 1 : 0;
        auto [line, col] = line_and_column(text, at);
        std::string what = e.what();
        // Keep nlohmann's description but drop its "[json.exception.parse_error.101] parse error at ..." prefix.
        auto pos = what.find(": ");
        std::string detail = pos == std::string::npos ? what : what.substr(pos + 2);
        return Error{name, "", "malformed JSON at line " + std::to_string(line) + ", column " +
                                   std::to_string(col) + ": " + detail};
    } catch (const Json::out_of_range& e) {
        // A number beyond a double (1e400): nlohmann gives no position, only the text it could
        // not convert ("number overflow parsing '1e400'"), so find that text to place it.
        std::string what = e.what();
        auto open = what.find('\''), close = what.rfind('\'');
        std::string token = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
        auto at = token.empty() ? std::string::npos : text.find(token);
        std::string where = "";
        if (at != std::string::npos) {
            auto [line, col] = line_and_column(text, at);
            where = " at line " + std::to_string(line) + ", column " + std::to_string(col);
        }
        return Error{name, "", "number out of range" + where + ": '" + token + "' does not fit a double"};
    }
}

Result<std::string> read_text_file(const std::string& path, const std::string& what) {
    return read_input_file(path, what);   // the one opener (core/input_file.hpp): regular files, capped
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j)
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest_key(const std::string& key, const std::vector<std::string>& candidates) {
    auto distance = edit_distance;
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const auto& c : candidates) {
        size_t d = distance(key, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    // Close means a few edits, or a third of the key for long dotted names.
    return best_d <= std::max<size_t>(3, key.size() / 3) ? best : std::string();
}

Result<Json> read_json_file(const std::string& path) {
    auto text = read_text_file(path, "JSON file");
    if (!text) return text.error();
    return parse_json_text(text.value(), path);
}

JsonField JsonField::at(const std::string& key) const {
    expect_object();
    if (!v_->contains(key)) fail(file_, child_path(key), "required field is missing");
    return JsonField((*v_)[key], file_, child_path(key));
}

JsonField JsonField::at(size_t index) const {
    expect_array();
    if (index >= v_->size()) fail(file_, path_, "index " + std::to_string(index) + " out of range");
    return JsonField((*v_)[index], file_, path_ + "[" + std::to_string(index) + "]");
}

void JsonField::expect_object() const {
    if (!v_->is_object()) fail_here("expected an object, found " + json_type_name(*v_));
}

void JsonField::expect_array() const {
    if (!v_->is_array()) fail_here("expected an array, found " + json_type_name(*v_));
}

std::string JsonField::as_string() const {
    if (!v_->is_string()) fail_here("expected a string, found " + json_type_name(*v_));
    return v_->get<std::string>();
}

bool JsonField::as_bool() const {
    if (!v_->is_boolean()) fail_here("expected true or false, found " + json_type_name(*v_) + " " + v_->dump());
    return v_->get<bool>();
}

double JsonField::as_number() const {
    if (!v_->is_number()) fail_here("expected a number, found " + json_type_name(*v_) + " " + v_->dump());
    double d = v_->get<double>();
    if (!std::isfinite(d)) fail_here("expected a finite number, found " + v_->dump());
    return d;
}

namespace {

// A bound as people read it: 9223372036854775807 is "2^63 - 1", other numbers as they are.
std::string bound_text(int64_t v) {
    if (v == INT64_MAX) return "9223372036854775807 (2^63 - 1)";
    return std::to_string(v);
}

std::string number_text(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

}  // namespace

double JsonField::as_number_in(double lo, double hi) const {
    double d = as_number();
    if (d < lo || d > hi)
        fail_here((hi == std::numeric_limits<double>::max() ? "expected a number >= " + number_text(lo)
                                                           : "expected a number from " + number_text(lo) + " to " + number_text(hi)) +
                  ", found " + v_->dump());
    return d;
}

int64_t JsonField::as_integer() const {
    // nlohmann keeps integers above INT64_MAX as unsigned; reading one as int64_t would wrap it
    // to a negative number, so it is refused here with the digits the file holds.
    if (v_->is_number_unsigned()) {
        if (v_->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
            fail_here("expected a whole number up to " + bound_text(INT64_MAX) + ", found " + v_->dump());
        return static_cast<int64_t>(v_->get<uint64_t>());
    }
    if (v_->is_number_integer()) return v_->get<int64_t>();
    if (v_->is_number_float()) {
        double d = v_->get<double>();
        if (!std::isfinite(d) || d != std::floor(d)) fail_here("expected a whole number, found " + v_->dump());
        // 2^63 is the first double beyond int64_t; every double below it converts exactly.
        if (std::fabs(d) >= 9223372036854775808.0)
            fail_here("expected a whole number from -2^63 to " + bound_text(INT64_MAX) + ", found " + v_->dump());
        return static_cast<int64_t>(d);
    }
    fail_here("expected a whole number, found " + json_type_name(*v_) + " " + v_->dump());
}

int64_t JsonField::as_integer_in(int64_t lo, int64_t hi) const {
    int64_t v = as_integer();
    if (v < lo || v > hi) {
        std::string range = hi == INT64_MAX ? (lo == 1 ? "a positive whole number" : "a whole number >= " + std::to_string(lo))
                                            : "a whole number from " + std::to_string(lo) + " to " + bound_text(hi);
        fail_here("expected " + range + ", found " + v_->dump());
    }
    return v;
}

}  // namespace zerosim
