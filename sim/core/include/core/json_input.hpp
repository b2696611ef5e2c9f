// Reading user-supplied JSON files with errors that name the file, the field and what was expected.
//
// Readers walk a document with the typed accessors below. A bad value raises InputFailure, which
// the reader's public entry point turns into an Error value (see error.hpp); the exception never
// crosses a library boundary.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace zerosim {

using Json = nlohmann::ordered_json;

struct InputFailure {
    Error error;
};

[[noreturn]] inline void fail(std::string file, std::string field, std::string message) {
    throw InputFailure{Error{std::move(file), std::move(field), std::move(message)}};
}

// A whole file as text through the one input opener, read_input_file (core/input_file.hpp): regular
// files only, capped; `what` names it in the error ("DeepSpeed config", "topology file").
Result<std::string> read_text_file(const std::string& path, const std::string& what);

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `key` by edit distance, for "did you mean" hints; "" if none is close.
std::string closest_key(const std::string& key, const std::vector<std::string>& candidates);

// Parse a whole file; malformed JSON is reported with its line and column.
Result<Json> read_json_file(const std::string& path);
// Parse text (for tests and for stdin); `name` stands for the file in messages. Linear in the
// text (an object of 100k keys too); a key given twice keeps its last value.
Result<Json> parse_json_text(const std::string& text, const std::string& name);
// A DeepSpeed config as DeepSpeed reads it (runtime/config.py: hjson.load with
// object_pairs_hook=dict_raise_error_on_duplicate_keys), by hjson-py's rules: comments (#, //,
// /* */), trailing and left-out commas, keys without quotes, quoteless values (a number, true,
// false or null when that is all up to the next , } ] or comment; else a string to the end of the
// line), 'single-quoted' and '''multi-line''' strings. A key given twice in one object is refused,
// naming both lines. What hjson also refuses gets strict JSON's error, placed in the file as given.
// Not read: a root object without its braces (DeepSpeed's configs have them).
Result<Json> parse_hjson_text(const std::string& text, const std::string& name);

// A view of one JSON value with its file and its path inside the file.
class JsonField {
  public:
    JsonField(const Json& value, std::string file, std::string path)
        : v_(&value), file_(std::move(file)), path_(std::move(path)) {}

    const Json& raw() const { return *v_; }
    const std::string& file() const { return file_; }
    const std::string& path() const { return path_; }

    bool has(const std::string& key) const { return v_->is_object() && v_->contains(key); }
    JsonField at(const std::string& key) const;  // required key
    JsonField at(size_t index) const;
    size_t size() const { return v_->size(); }
    std::string child_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

    void expect_object() const;
    void expect_array() const;
    bool is_null() const { return v_->is_null(); }
    bool is_string() const { return v_->is_string(); }

    std::string as_string() const;
    bool as_bool() const;
    // A finite number (JSON has no NaN or infinity; 1e400 is refused when the file is parsed).
    double as_number() const;
    // A finite number in [lo, hi]; `what` says what it is when it is not ("a clipping norm").
    double as_number_in(double lo, double hi) const;
    // A count that must be a whole number (DeepSpeed configs often write 5e8 for 500000000), one
    // that fits a signed 64-bit integer: 2^63 and beyond are refused with the number as written.
    int64_t as_integer() const;
    // A whole number in [lo, hi], refused with the range and the number as written.
    int64_t as_integer_in(int64_t lo, int64_t hi) const;

    [[noreturn]] void fail_here(const std::string& message) const { fail(file_, path_, message); }

  private:
    const Json* v_;
    std::string file_;
    std::string path_;
};

std::string json_type_name(const Json& v);

}  // namespace zerosim
