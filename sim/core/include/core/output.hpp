// Where the front ends write what they produce: standard output, or a file written whole or not at
// all (a temporary unique to the process beside it, then a rename), never over a file the command
// read. Every write and close is checked.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// The exit codes of both front ends (README "Exit codes"): 0 success; 1 a failed verdict or a failed
// run; 2 bad input, including an output path that cannot be used, found before any work; 3 a
// runtime fault once the input was accepted (out of memory, a write that fails, a communication
// failure in zerorun).
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitRuntimeFault = 3;

// An output path usable before any work is done: not a directory, not one of `inputs` by file
// identity (device and inode, through hard and symbolic links), and in a folder that exists and may
// be written. "" and "-" (standard output) always pass.
Status check_output_path(const std::string& program, const std::string& path, const std::string& flag,
                         const std::vector<std::string>& inputs);

// Writes to `path` ("" or "-": standard output) what `write` produces. A regular file goes through
// a temporary made by mkstemp beside it (.NAME.tmp-PROGRAM-XXXXXX) and a rename, so a failed run
// leaves no half file and two processes writing the same path never share a temporary; a device or
// FIFO (/dev/null) is written in place. Failures print one "PROGRAM: error: ..." line (naming
// `flag`, the option that gave the path, where one did) and return the exit code:
// kExitBadInput for a path that cannot be used (a directory, an input, a folder where no file can be
// created), kExitRuntimeFault for a write, close or rename that failed; 0 on success.
int write_output(const std::string& program, const std::string& path, const std::string& flag,
                 const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write);

// Flushes standard output and reports a failure there (a full disk, a closed pipe): one
// "PROGRAM: error: standard output: cannot write: ..." line and kExitRuntimeFault, else 0.
int check_standard_output(const std::string& program);

// An output path must be usable before minutes of work go into it (check_output_path without
// inputs).
Status check_writable(const std::string& path, const std::string& flag);

}  // namespace zerosim
