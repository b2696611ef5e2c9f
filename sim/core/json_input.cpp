#include "core/json_input.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <sstream>
#include <unordered_map>

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

namespace {

// Builds the document in linear time. Json is nlohmann's ordered_json, whose objects are a vector
// searched on every insert: Json::parse took quadratic time in an object's keys (a config of 100k
// unknown keys: 27 s). Here a member is appended without a search; a key given twice keeps its
// last value, as Json::parse does (readers that refuse duplicates check first, parse_hjson_text).
class LinearJsonBuilder : public nlohmann::json_sax<Json> {
  public:
    explicit LinearJsonBuilder(Json& root) : root_(root) {}
    bool null() override { return put(Json(nullptr)); }
    bool boolean(bool v) override { return put(Json(v)); }
    bool number_integer(number_integer_t v) override { return put(Json(v)); }
    bool number_unsigned(number_unsigned_t v) override { return put(Json(v)); }
    bool number_float(number_float_t v, const string_t&) override { return put(Json(v)); }
    bool string(string_t& v) override { return put(Json(std::move(v))); }
    bool binary(binary_t& v) override { return put(Json::binary(std::move(v))); }
    bool start_object(std::size_t) override { return open(Json::object()); }
    bool start_array(std::size_t) override { return open(Json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override {
        auto& members = stack_.back()->get_ref<Json::object_t&>();
        if (Json* repeated = find(members, k)) {
            pending_ = repeated;   // a repeated key: its last value wins
            return true;
        }
        if (!seen_.back().empty()) seen_.back().emplace(k, members.size());
        members.emplace_back(std::move(k), nullptr);   // ordered_map is a vector: append, no search
        pending_ = &members.back().second;
        return true;
    }
    // The parser's own exception, with its position, thrown as Json::parse throws it.
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        if (auto* p = dynamic_cast<const Json::parse_error*>(&e)) throw *p;
        if (auto* r = dynamic_cast<const Json::out_of_range*>(&e)) throw *r;
        throw Json::parse_error::create(101, 0, e.what(), nullptr);
    }

  private:
    // A key of the open object: a scan while it is small (most are: no index to build), a hash
    // index from kIndexFrom members on.
    static constexpr size_t kIndexFrom = 32;
    Json* find(Json::object_t& members, const std::string& k) {
        auto& index = seen_.back();
        if (members.size() < kIndexFrom) {
            for (auto& m : members)
                if (m.first == k) return &m.second;
            return nullptr;
        }
        if (index.empty())
            for (size_t i = 0; i < members.size(); ++i) index.emplace((members.begin() + static_cast<std::ptrdiff_t>(i))->first, i);
        auto it = index.find(k);
        return it == index.end() ? nullptr : &(members.begin() + static_cast<std::ptrdiff_t>(it->second))->second;
    }
    Json* slot() {
        if (stack_.empty()) return &root_;
        if (stack_.back()->is_array()) {
            stack_.back()->get_ref<Json::array_t&>().emplace_back();
            return &stack_.back()->get_ref<Json::array_t&>().back();
        }
        return pending_;
    }
    bool put(Json v) {
        *slot() = std::move(v);
        return true;
    }
    bool open(Json v) {
        Json* at = slot();
        *at = std::move(v);
        stack_.push_back(at);
        seen_.emplace_back();
        return true;
    }
    bool close() {
        stack_.pop_back();
        seen_.pop_back();
        return true;
    }
    Json& root_;
    std::vector<Json*> stack_;   // open objects and arrays (pointers stay valid: a parent grows only while it is on top)
    std::vector<std::unordered_map<std::string, size_t>> seen_;   // each open object's keys, by position
    Json* pending_ = nullptr;
};

}  // namespace

Result<Json> parse_json_text(const std::string& text, const std::string& name) {
    try {
        Json root;
        LinearJsonBuilder builder(root);
        Json::sax_parse(text, &builder);
        return root;
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

namespace {

// One pass over a DeepSpeed config as hjson reads it: comments and trailing commas become spaces
// (so nlohmann's line and column stay right), and each object's keys are checked for repeats.
class HjsonScan {
  public:
    HjsonScan(std::string& text, const std::string& name) : t_(text), name_(name) {}

    Status run() {
        while (i_ < t_.size()) {
            const char c = t_[i_];
            if (c == '"') {
                if (auto e = string_token()) return e;
                continue;
            }
            if (comment()) continue;
            if (c == '{' || c == '[') frames_.push_back({c == '{', {}});
            if ((c == '}' || c == ']') && !frames_.empty()) frames_.pop_back();
            if (c == ',' && closes_next()) t_[i_] = ' ';   // hjson's trailing comma
            if (c == ':' && !frames_.empty() && frames_.back().object && last_string_end_ != std::string::npos &&
                only_space_between(last_string_end_, i_)) {
                if (auto e = key(last_string_, last_string_line_)) return e;
            }
            if (c == '\n') ++line_;
            ++i_;
        }
        return std::nullopt;
    }

  private:
    struct Frame {
        bool object;
        std::unordered_map<std::string, int> keys;   // key -> the line it was first given on
    };
    // A JSON string; its raw text (escapes as written) is what keys are compared by.
    Status string_token() {
        size_t j = i_ + 1;
        while (j < t_.size() && t_[j] != '"') j += t_[j] == '\\' ? 2 : 1;
        if (j >= t_.size()) {   // unterminated: nlohmann says where; the scan is done
            i_ = t_.size();
            return std::nullopt;
        }
        last_string_.assign(t_, i_ + 1, j - i_ - 1);
        last_string_line_ = line_;
        last_string_end_ = j + 1;
        i_ = j + 1;
        return std::nullopt;
    }
    // #, // and /* */ outside strings (hjson's three comment forms), blanked.
    bool comment() {
        const bool hash = t_[i_] == '#', line = t_.compare(i_, 2, "//") == 0, block = t_.compare(i_, 2, "/*") == 0;
        if (!hash && !line && !block) return false;
        size_t end = block ? t_.find("*/", i_ + 2) : t_.find('\n', i_);
        end = end == std::string::npos ? t_.size() : block ? end + 2 : end;
        for (size_t k = i_; k < end; ++k)
            if (t_[k] == '\n') ++line_;
            else t_[k] = ' ';
        i_ = end;
        return true;
    }
    bool closes_next() {
        size_t j = i_ + 1;
        while (j < t_.size()) {
            const char c = t_[j];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') ++j;
            else if (c == '#' || t_.compare(j, 2, "//") == 0 || t_.compare(j, 2, "/*") == 0) {
                size_t end = c == '#' || t_[j + 1] == '/' ? t_.find('\n', j) : t_.find("*/", j + 2);
                if (end == std::string::npos) return false;
                j = t_[end] == '*' ? end + 2 : end;
            } else {
                return c == '}' || c == ']';
            }
        }
        return false;
    }
    bool only_space_between(size_t from, size_t to) const {
        for (size_t k = from; k < to; ++k)
            if (t_[k] != ' ' && t_[k] != '\t' && t_[k] != '\r' && t_[k] != '\n') return false;
        return true;
    }
    // runtime/config_utils.py dict_raise_error_on_duplicate_keys: "Duplicate keys in DeepSpeed config".
    Status key(const std::string& k, int line) {
        auto [it, fresh] = frames_.back().keys.emplace(k, line);
        last_string_end_ = std::string::npos;
        if (fresh) return std::nullopt;
        return Error{name_, "", "line " + std::to_string(line) + ": key \"" + k + "\" given twice in one object (first on line " +
                                    std::to_string(it->second) + "); DeepSpeed's config loader refuses duplicate keys"};
    }

    std::string& t_;
    const std::string& name_;
    size_t i_ = 0;
    int line_ = 1;
    std::vector<Frame> frames_;
    std::string last_string_;
    int last_string_line_ = 0;
    size_t last_string_end_ = std::string::npos;
};

}  // namespace

Result<Json> parse_hjson_text(const std::string& text, const std::string& name) {
    std::string plain = text;
    if (auto e = HjsonScan(plain, name).run()) return *e;
    return parse_json_text(plain, name);
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
