// Where the front ends write what they produce: standard output, or a file written whole or not at
// all (a temporary beside it, then a rename), never over a file the command read.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// Writes to `path` ("" or "-": standard output) what `write` produces. A file goes through
// PATH.tmp-PROGRAM and a rename, so a failed run leaves no half file; a path that is one of
// `inputs` is refused. Failures print one "PROGRAM: error: ..." line (naming `flag`, the option that
// gave the path, where one did) and return the exit code: 2 for a path that cannot be used, 1 for a
// write that failed; 0 on success.
int write_output(const std::string& program, const std::string& path, const std::string& flag,
                 const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write);

// An output path must be writable before minutes of work go into it: its folder exists and may be
// written ("" and "-", standard output, always pass).
Status check_writable(const std::string& path, const std::string& flag);

}  // namespace zerosim
