// Errors are values at the boundaries: a reader returns Result<T>, never throws at the user.
// The command-line front prints Error::what() as one line and exits with code 2.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace zerosim {

struct Error {
    std::string file;     // the file the user gave (empty for command-line flags)
    std::string field;    // the JSON path or flag, e.g. zero_optimization.stage or --world
    std::string message;  // what was expected and what was found

    // "FILE: field 'F': MESSAGE" as one readable line: each part through printable(), so a file
    // name with a newline or an escape sequence prints as text, and a value of a million digits
    // echoed in the message prints as its head and tail.
    std::string what() const;
};

// `text` as it may be echoed on one terminal line: control characters and DEL as \n, \t, \r,
// \xNN, and past `max` bytes the middle cut out ("...[N bytes cut]...", at UTF-8 boundaries).
std::string printable(const std::string& text, size_t max = 1024);

// A minimal expected<T, Error> (std::expected is C++23; Debian 12's g++ 12 lacks it).
template <typename T>
class Result {
  public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error err) : v_(std::move(err)) {}
    bool ok() const { return std::holds_alternative<T>(v_); }
    explicit operator bool() const { return ok(); }
    T& value() & { return std::get<T>(v_); }
    const T& value() const& { return std::get<T>(v_); }
    T&& value() && { return std::get<T>(std::move(v_)); }
    const Error& error() const { return std::get<Error>(v_); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

  private:
    std::variant<T, Error> v_;
};

// For operations that return nothing but may fail.
using Status = std::optional<Error>;

// The front ends' one error line on stderr, "PROGRAM: error: FILE: field 'F': ..." (zerosim, zerorun);
// returns 2, the exit code of bad input. `print` false returns the code silently (zerorun's ranks
// other than 0 fail the same way and leave the line to rank 0).
int print_input_error(const std::string& program, const Error& e, bool print = true);

// The one warning line for config keys zerosim does not know (none: nothing printed):
// "PROGRAM: warning: FILE: ignoring keys zerosim does not know: a, b".
void warn_ignored_keys(const std::string& program, const std::string& file, const std::vector<std::string>& keys);

}  // namespace zerosim
