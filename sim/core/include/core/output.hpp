// The one output opener of both front ends (README "Outputs"): standard output ("-"), or a file
// written whole or not at all (a temporary unique to the process beside it, then a rename), never
// over a file the command read (those it names and every file read_input_file opened), never in
// place of a symbolic link, never over another output of the same command. Every write and close
// is checked.
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

// A flag's text as an output path: "" is refused ("is empty; give a file name, or - for standard
// output"); front ends run it on the text of every output flag given (an unset flag is "").
Status check_output_name(const std::string& text, const std::string& flag);

// An output path usable before any work is done: not a directory or a socket, not one of `inputs`
// nor any file the process read (core/input_file.hpp files_read) by identity (device and inode,
// through hard and symbolic links); a symbolic link only to standard output's own file, a device
// or a FIFO (written through in place), never to a regular file or to nothing (the rename would
// put a file in the link's place); a new or regular file in a folder that exists and may be
// written. "" and "-" (standard output) always pass.
Status check_output_path(const std::string& program, const std::string& path, const std::string& flag,
                         const std::vector<std::string>& inputs);

// One output of a command and the flag that gave it ("" or "-": standard output).
struct OutputPath {
    std::string path;
    std::string flag;
};
// Every output of one command, before any work: each as check_output_path, and no two the same
// (the same file or pipe, standard output twice, or one new path spelled twice; a character device
// such as /dev/null may take several). Give the optional outputs only when their flag was.
Status check_outputs(const std::string& program, const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs);

// Writes to `path` ("" or "-": standard output) what `write` produces, refusing it as
// check_output_path does. A path that is standard output's own file (/dev/stdout, a link to
// /proc/self/fd/1, the file stdout is redirected to) is written to standard output. A regular file
// goes through a temporary made by mkstemp beside it (.NAME.tmp-PROGRAM-XXXXXX) and a rename, so a
// failed run leaves no half file and two processes writing the same path never share a temporary;
// a device or FIFO (/dev/null) is written in place. Failures print one "PROGRAM: error: ..." line (naming
// `flag`, the option that gave the path, where one did) and return the exit code:
// kExitBadInput for a path that cannot be used (a directory, an input, a link it would replace, a
// folder where no file can be created), kExitRuntimeFault for a write, close or rename that failed; 0 on success.
int write_output(const std::string& program, const std::string& path, const std::string& flag,
                 const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write);

// Flushes standard output and reports a failure there (a full disk, a closed pipe): one
// "PROGRAM: error: standard output: cannot write: ..." line and kExitRuntimeFault, else 0.
int check_standard_output(const std::string& program);

// SIGINT (Ctrl-C) and SIGTERM end the program with one line and kExitRuntimeFault (README "Exit
// codes": an interrupt is a runtime fault), "PROGRAM: error: interrupted (SIGINT, Ctrl-C); no output
// is left half written" (or "stopped (SIGTERM)"), after removing the temporary of a write_output in
// progress; outputs already renamed into place stay whole. Without it the shell reports only "130".
// `program` must outlive the process (a literal). A signal ignored on entry (a background job of
// a shell, nohup) stays ignored. Child processes that should die quietly (the sweep's workers)
// restore SIG_DFL.
void install_interrupt_report(const char* program);

// An output path must be usable before minutes of work go into it (check_output_path without
// inputs).
Status check_writable(const std::string& path, const std::string& flag);

}  // namespace zerosim
