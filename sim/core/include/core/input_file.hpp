// The one opener for every file a user gives as input (configs, models, topologies, logs, tables,
// saved schedules): regular files only, at most kMaxInputBytes, read whole. Every file it opens is
// remembered by identity, so that an output (core/output.hpp) is never written over anything the
// command read, whether or not the subcommand listed it among its inputs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// The most one input may hold: 2 GiB. The largest real inputs are logs of long runs (hundreds of
// MB); anything past this is not an input zerosim or zerorun was meant to read (README "Inputs").
constexpr int64_t kMaxInputBytes = int64_t{2} << 30;

// The whole of a regular file; `what` names it in the errors ("DeepSpeed config", "log"). Refused
// with one Error naming the path: a directory ("is a directory, not a DeepSpeed config"), a
// character or block device, a FIFO or a socket ("is a character device, not a regular file; give
// the log as a file": never opened, so /dev/zero is not read for ever and a FIFO never blocks), a
// file over `max_bytes` (measured by its size and again while reading, for files that grow or
// report no size, as /proc's do), a file that cannot be opened or read (with the reason).
Result<std::string> read_input_file(const std::string& path, const std::string& what, int64_t max_bytes = kMaxInputBytes);

// A file by identity (device and inode), with the path it was read under.
struct FileIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    std::string path;
};

// Every file read_input_file opened in this process and still there under the same path with the
// same identity (a file deleted since, or replaced by another, is no longer an input).
std::vector<FileIdentity> files_read();
// Forgets them (tests that read and write the same temporary files in one process).
void forget_files_read();

// What a file type is, in words, for messages: "a directory", "a character device", "a FIFO"...
const char* file_kind_name(mode_t mode);

}  // namespace zerosim
