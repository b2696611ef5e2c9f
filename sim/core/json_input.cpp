#include "core/json_input.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>
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

// `json` parsed; its errors placed in `source` (the file as given) through `to_source`, which maps
// a byte of `json` to the byte of `source` it came from (the same text for plain JSON).
Result<Json> parse_json_located(const std::string& json, const std::string& name, const std::string& source,
                                const std::function<size_t(size_t)>& to_source) {
    const std::string& text = source;
    try {
        Json root;
        LinearJsonBuilder builder(root);
        Json::sax_parse(json, &builder);
        return root;
    } catch (const Json::parse_error& e) {
        // e.byte is one past the offending character.
        size_t at = to_source(e.byte > 0 ? e.byte - 1 : 0);
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

}  // namespace

Result<Json> parse_json_text(const std::string& text, const std::string& name) {
    return parse_json_located(text, name, text, [](size_t b) { return b; });
}

namespace {

bool hjson_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// s as the body of a JSON string: quotes, backslashes and control characters escaped.
std::string json_string_body(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else out += static_cast<char>(c);
    }
    return out;
}

// A DeepSpeed config as hjson reads it, rewritten as the JSON it means, in one pass (linear; no
// recursion). DeepSpeed reads its config with hjson.load (deepspeed/runtime/config.py); each rule
// below follows hjson-py's decoder.py (hjson/hjson-py 9351a27):
// - comments (#, //, /* */) become spaces (getNext), a comma before a closing bracket too;
// - members and elements need no comma between them (JSONObject, JSONArray: the comma is optional);
// - a key without quotes runs to its ':' and holds no whitespace or {}[], (scanKeyName);
// - a value that starts with none of " ' { [ is quoteless (scantfnns): null, true, false or a number
//   when the text up to the next , } ] # // /* or end of line is exactly that (NUMBER_RE), else a
//   string to the end of the line, trimmed; '''...''' is a multi-line string (mlscanstring);
//   'single-quoted' strings and \' inside strings are read as hjson reads them.
// Whatever hjson also refuses is copied unchanged from there on, so nlohmann's strict JSON error
// (line and column mapped back to the file, json_source_byte) says what is wrong. A key given twice
// in one object is refused, naming both lines (DeepSpeed's dict_raise_error_on_duplicate_keys).
// Newlines are kept, so every line number stays right.
class HjsonToJson {
  public:
    HjsonToJson(const std::string& text, const std::string& name) : s_(text), name_(name) { out_.reserve(text.size() + 64); }

    Status run() {
        while (i_ < s_.size() && !raw_) {
            const char c = s_[i_];
            if (hjson_space(c)) {
                line_ += c == '\n';
                out_ += c;
                ++i_;
            } else if (!comment()) {
                if (auto e = token(c)) return e;
            }
            sync();
        }
        if (raw_) out_.append(s_, i_, std::string::npos);
        return std::nullopt;
    }
    const std::string& json() const { return out_; }
    // The byte of the source that the JSON's byte `b` came from (for error positions).
    size_t source_byte(size_t b) const {
        auto it = std::upper_bound(shifts_.begin(), shifts_.end(), std::make_pair(b, LONG_MAX));
        long delta = it == shifts_.begin() ? 0 : std::prev(it)->second;
        long at = static_cast<long>(b) - delta;
        return static_cast<size_t>(std::clamp<long>(at, 0, static_cast<long>(s_.size())));
    }

  private:
    enum class Want { Value, Key, Colon, After };
    struct Frame {
        bool object;
        std::unordered_map<std::string, int> keys;   // key -> the line it was first given on
    };

    Status token(char c) {
        if (want_ == Want::After) {
            if (frames_.empty()) return copy_rest();   // after the root value: nlohmann says "extra data"
            if (c == ',') {
                out_ += closes_next() ? ' ' : ',';   // hjson's trailing comma
                ++i_;
                want_ = frames_.back().object ? Want::Key : Want::Value;
                return std::nullopt;
            }
            if (c == '}' || c == ']') return close(c);
            out_ += ',';   // the next member on its own line (or after a string): hjson needs no comma
            want_ = frames_.back().object ? Want::Key : Want::Value;
        }
        if (want_ == Want::Colon) {
            if (c != ':') return copy_rest();
            out_ += ':';
            ++i_;
            want_ = Want::Value;
            return std::nullopt;
        }
        return want_ == Want::Key ? key(c) : value(c);
    }
    Status copy_rest() {
        raw_ = true;
        return std::nullopt;
    }
    Status close(char c) {
        if (frames_.empty() || frames_.back().object != (c == '}')) return copy_rest();
        frames_.pop_back();
        out_ += c;
        ++i_;
        want_ = Want::After;
        return std::nullopt;
    }
    Status key(char c) {
        if (c == '}') return close(c);
        std::string body;
        if (c == '"' || c == '\'') {
            if (!quoted(c, body)) return copy_rest();
        } else if (!quoteless_key(body)) {
            return copy_rest();
        }
        want_ = Want::Colon;
        // runtime/config_utils.py dict_raise_error_on_duplicate_keys: "Duplicate keys in DeepSpeed config".
        auto [it, fresh] = frames_.back().keys.emplace(body, line_);
        if (fresh) return std::nullopt;
        return Error{name_, "", "line " + std::to_string(line_) + ": key \"" + body + "\" given twice in one object (first on line " +
                                    std::to_string(it->second) + "); DeepSpeed's config loader refuses duplicate keys"};
    }
    Status value(char c) {
        if (c == '{' || c == '[') {
            frames_.push_back({c == '{', {}});
            out_ += c;
            ++i_;
            want_ = c == '{' ? Want::Key : Want::Value;
            return std::nullopt;
        }
        if (c == ']') return close(c);
        std::string body;
        want_ = Want::After;
        if (s_.compare(i_, 3, "'''") == 0) return multiline() ? std::nullopt : copy_rest();
        if (c == '"' || c == '\'') return quoted(c, body) ? std::nullopt : copy_rest();
        if (frames_.empty() || c == '}' || c == ',' || c == ':') return copy_rest();   // not a value: strict JSON's error
        quoteless_value();
        return std::nullopt;
    }

    // A "..." or '...' string from i_, written as a JSON string; `body` is what is written between
    // the quotes. False when it does not end (nlohmann then says where).
    bool quoted(char q, std::string& body) {
        size_t j = i_ + 1;
        for (; j < s_.size() && s_[j] != q; ++j) {
            char ch = s_[j];
            if (ch == '\\' && j + 1 < s_.size()) {
                ch = s_[++j];
                if (ch == '\'') body += '\'';   // hjson's \' (not JSON's)
                else body += '\\', body += ch;
            } else if (ch == '"') {
                body += "\\\"";   // inside '...'
            } else {
                body += ch;
            }
        }
        if (j >= s_.size()) return false;
        out_ += '"' + body + '"';
        i_ = j + 1;
        return true;
    }
    // hjson-py scanKeyName: up to ':', whitespace only just before it.
    bool quoteless_key(std::string& body) {
        size_t j = i_, last = i_;
        for (; j < s_.size() && s_[j] != ':'; ++j) {
            const char ch = s_[j];
            if (ch == '{' || ch == '}' || ch == '[' || ch == ']' || ch == ',') return false;
            if (!hjson_space(ch)) {
                if (last != j) return false;   // whitespace inside the name
                last = j + 1;
            }
        }
        if (j >= s_.size() || last == i_) return false;
        body = json_string_body(s_.substr(i_, last - i_));
        out_ += '"' + body + '"';
        i_ = last;   // the spaces before ':' are copied as they are
        return true;
    }
    void quoteless_value();
    bool multiline();
    bool comment();
    bool closes_next() const;
    // Records where the JSON's bytes stop lining up with the source's (after each token).
    void sync() {
        long d = static_cast<long>(out_.size()) - static_cast<long>(i_);
        if (shifts_.empty() ? d != 0 : shifts_.back().second != d) shifts_.push_back({out_.size(), d});
    }

    const std::string& s_;
    const std::string& name_;
    std::string out_;
    size_t i_ = 0;
    int line_ = 1;
    bool raw_ = false;   // from here on the source is copied as it is
    Want want_ = Want::Value;
    std::vector<Frame> frames_;
    std::vector<std::pair<size_t, long>> shifts_;   // (JSON byte, JSON byte - source byte from there on)
};

// The end of NUMBER_RE's match at `b` ([\t ]*-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?[\t ]*), or npos.
size_t hjson_number_end(const std::string& s, size_t b) {
    auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
    size_t k = b;
    if (k < s.size() && s[k] == '-') ++k;
    if (!digit(k)) return std::string::npos;
    if (s[k] == '0') ++k;
    else
        while (digit(k)) ++k;
    if (k < s.size() && s[k] == '.' && digit(k + 1))
        for (++k; digit(k);) ++k;
    if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
        size_t e = k + 1;
        if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
        if (digit(e))
            for (k = e; digit(k);) ++k;
    }
    while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) ++k;
    return k;
}

// hjson-py scantfnns: a keyword or number ends at the first , } ] # // /* that leaves exactly one;
// anything else is a string to the end of the line.
void HjsonToJson::quoteless_value() {
    const size_t begin = i_, number_end = hjson_number_end(s_, begin);
    const char first = s_[begin];
    for (size_t end = begin;; ++end) {
        const char ch = end < s_.size() ? s_[end] : '\n';
        const bool eol = ch == '\r' || ch == '\n';
        const bool comment_next = ch == '/' && end + 1 < s_.size() && (s_[end + 1] == '/' || s_[end + 1] == '*');
        if (!eol && ch != ',' && ch != '}' && ch != ']' && ch != '#' && !comment_next) continue;
        size_t last = end;
        while (last > begin && (s_[last - 1] == ' ' || s_[last - 1] == '\t' || s_[last - 1] == '\f' || s_[last - 1] == '\v')) --last;
        auto is = [&](const char* word, size_t n) { return last - begin == n && s_.compare(begin, n, word) == 0; };
        const bool keyword = (first == 'n' && is("null", 4)) || (first == 't' && is("true", 4)) || (first == 'f' && is("false", 5));
        if (keyword || number_end == end) {
            out_.append(s_, begin, end - begin);
            i_ = end;
            return;
        }
        if (eol) {   // (no substring before this: a line of many commas stays linear)
            out_ += '"' + json_string_body(s_.substr(begin, last - begin)) + '"';
            // The trimmed tail as spaces: \f and \v are not hjson's whitespace between tokens
            // (left to the main loop, a value of only "\f" never moved on: found by fuzz_ds_config).
            out_.append(end - last, ' ');
            i_ = end;
            return;
        }
    }
}

// hjson-py mlscanstring: '''...''', each line's indent up to the opening quotes' column dropped,
// one newline after the opening and before the closing quotes dropped.
bool HjsonToJson::multiline() {
    const size_t line_start = i_ == 0 ? std::string::npos : s_.rfind('\n', i_ - 1);
    const size_t indent = line_start == std::string::npos ? i_ : i_ - line_start - 1;
    auto skip_indent = [&](size_t k, size_t n) {
        for (; k < s_.size() && n > 0 && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\r'); --n) ++k;
        return k;
    };
    size_t j = skip_indent(i_ + 3, std::string::npos);
    if (j < s_.size() && s_[j] == '\n') j = skip_indent(j + 1, indent);
    std::string text;
    int newlines = 0, quotes = 0;
    for (; j < s_.size() && quotes < 3; ++j) {
        const char ch = s_[j];
        if (ch == '\'') {
            ++quotes;
            continue;
        }
        text.append(static_cast<size_t>(quotes), '\'');
        quotes = 0;
        if (ch == '\n') {
            text += '\n';
            ++newlines;
            j = skip_indent(j + 1, indent) - 1;
        } else if (ch != '\r') {
            text += ch;
        }
    }
    if (quotes < 3) return false;   // "Bad multiline string": strict JSON's error at the quotes
    if (!text.empty() && text.back() == '\n') text.pop_back();
    out_ += '"' + json_string_body(text) + '"';
    out_.append(static_cast<size_t>(newlines), '\n');   // the line numbers after it stay right
    line_ += newlines;
    i_ = j;
    return true;
}

// #, // and /* */ outside strings (hjson's three comment forms, getNext), as spaces.
bool HjsonToJson::comment() {
    const bool hash = s_[i_] == '#', line = s_.compare(i_, 2, "//") == 0, block = s_.compare(i_, 2, "/*") == 0;
    if (!hash && !line && !block) return false;
    size_t end = block ? s_.find("*/", i_ + 2) : s_.find('\n', i_);
    end = end == std::string::npos ? s_.size() : block ? end + 2 : end;
    for (size_t k = i_; k < end; ++k) {
        line_ += s_[k] == '\n';
        out_ += s_[k] == '\n' ? '\n' : ' ';
    }
    i_ = end;
    return true;
}

bool HjsonToJson::closes_next() const {
    size_t j = i_ + 1;
    while (j < s_.size()) {
        const char c = s_[j];
        if (hjson_space(c)) ++j;
        else if (c == '#' || s_.compare(j, 2, "//") == 0 || s_.compare(j, 2, "/*") == 0) {
            size_t end = c == '#' || s_[j + 1] == '/' ? s_.find('\n', j) : s_.find("*/", j + 2);
            if (end == std::string::npos) return false;
            j = s_[end] == '*' ? end + 2 : end;
        } else {
            return c == '}' || c == ']';
        }
    }
    return false;
}

}  // namespace

Result<Json> parse_hjson_text(const std::string& text, const std::string& name) {
    HjsonToJson scan(text, name);
    if (auto e = scan.run()) return *e;
    return parse_json_located(scan.json(), name, text, [&](size_t b) { return scan.source_byte(b); });
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
