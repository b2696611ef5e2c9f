#include "core/output.hpp"

#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <iostream>

namespace zerosim {

namespace {

std::string errno_text(int err) { return err == 0 ? "unknown error" : std::strerror(err); }

// The interrupt report (install_interrupt_report): only async-signal-safe calls (write, unlink,
// _exit) on data set before the signal can come; the temporary's name is copied in whole before
// the pointer to it is published.
const char* g_interrupt_program = nullptr;
char g_temporary[4096];
volatile sig_atomic_t g_temporary_set = 0;

void put_text(const char* s) {
    size_t n = 0;
    while (s[n]) ++n;
    ssize_t w = ::write(2, s, n);
    (void)w;
}

void on_interrupt(int sig) {
    if (g_temporary_set) unlink(g_temporary);
    put_text(g_interrupt_program);
    put_text(sig == SIGINT ? ": error: interrupted (SIGINT, Ctrl-C); no output is left half written\n"
                           : ": error: stopped (SIGTERM); no output is left half written\n");
    _exit(kExitRuntimeFault);
}

// Marks `path` as the temporary to remove on an interrupt ("" : none).
void set_interrupt_temporary(const std::string& path) {
    g_temporary_set = 0;
    if (path.empty() || path.size() >= sizeof g_temporary) return;
    std::memcpy(g_temporary, path.c_str(), path.size() + 1);
    g_temporary_set = 1;
}

// The permissions a plain create gets (0666 less the umask); mkstemp makes 0600.
mode_t created_mode() {
    static const mode_t mode = [] {
        mode_t mask = umask(0);
        umask(mask);
        return static_cast<mode_t>(0666 & ~mask);
    }();
    return mode;
}

// Streams `write` into the open descriptor `fd` and closes it; 0 or the errno of the first failure.
int write_to_fd(int fd, const std::function<void(std::ostream&)>& write) {
    int err = 0;
    __gnu_cxx::stdio_filebuf<char> buf(fd, std::ios::out | std::ios::binary);   // owns fd: close() closes it
    std::ostream out(&buf);
    errno = 0;
    write(out);
    out.flush();
    if (!out) err = errno ? errno : EIO;
    errno = 0;
    if (buf.close() == nullptr && !err) err = errno ? errno : EIO;   // close(2) can report a lost write
    return err;
}

// The file standard output is (a redirected file, a pipe, a terminal): an output path that names it
// (itself, /dev/stdout, a link to /proc/self/fd/1) is written to standard output, never replaced.
bool is_standard_output(const struct stat& st) {
    struct stat out {};
    return fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino;
}

std::string link_target(const std::string& path) {
    std::string target(4096, '\0');
    ssize_t n = readlink(path.c_str(), target.data(), target.size());
    return n < 0 ? std::string("?") : target.substr(0, static_cast<size_t>(n));
}

// The files an output may never be: those given, and every file the command read (read_input_file).
Status refuse_input(const std::string& program, const std::string& path, const std::string& flag, const struct stat& out,
                    const std::vector<std::string>& inputs) {
    // Identity, not spelling: a second name, a hard link or a symlink to an input is the input.
    auto is_input = [&] {
        for (const auto& in : inputs) {
            struct stat st {};
            if (!in.empty() && stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) return true;
        }
        for (const auto& f : files_read())
            if (f.dev == out.st_dev && f.ino == out.st_ino) return true;
        return false;
    };
    if (is_input()) return Error{path, flag, "is one of the inputs; " + program + " never overwrites what it was given"};
    return std::nullopt;
}

// The checks that need no folder (README "Outputs"): not a directory, not an input by identity,
// not a socket; a symbolic link only where writing through it replaces nothing (standard output,
// a device, a FIFO), never a link to a regular file or to nothing, which the rename would replace.
Status refuse_as_output(const std::string& program, const std::string& path, const std::string& flag,
                        const std::vector<std::string>& inputs) {
    struct stat link {};
    if (lstat(path.c_str(), &link) != 0) return std::nullopt;   // a new file
    struct stat out {};
    const bool link_to = S_ISLNK(link.st_mode);
    if (stat(path.c_str(), &out) != 0)
        return Error{path, flag, "is a symbolic link to " + link_target(path) + ", which names no file; " + program +
                                     " writes a new file only under its own name, never in a link's place"};
    if (S_ISDIR(out.st_mode)) return Error{path, flag, "is a directory; give a file name to write"};
    if (auto e = refuse_input(program, path, flag, out, inputs)) return e;
    if (is_standard_output(out)) return std::nullopt;
    if (S_ISSOCK(out.st_mode)) return Error{path, flag, "is a socket; give a file name to write"};
    if (link_to && S_ISREG(out.st_mode))
        return Error{path, flag, "is a symbolic link to " + link_target(path) + "; " + program +
                                     " replaces an output whole and would put a file in the link's place: give the file itself"};
    return std::nullopt;
}

// Two outputs are one when they are the same file or pipe (by identity; "" and "-" are standard
// output), or, not there yet, the same path once made absolute; a character device (/dev/null, a
// terminal) may take both.
bool same_output(const std::string& a, const std::string& b) {
    auto identity = [](const std::string& p, struct stat& st) {
        return p.empty() || p == "-" ? fstat(STDOUT_FILENO, &st) == 0 : stat(p.c_str(), &st) == 0;
    };
    struct stat sa {}, sb {};
    const bool ea = identity(a, sa), eb = identity(b, sb);
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && !S_ISCHR(sa.st_mode);
    if (ea || eb) return false;
    namespace fs = std::filesystem;
    std::error_code ec1, ec2;
    fs::path ca = fs::weakly_canonical(fs::absolute(a), ec1), cb = fs::weakly_canonical(fs::absolute(b), ec2);
    return !ec1 && !ec2 && ca == cb;
}

}  // namespace

Status check_output_name(const std::string& text, const std::string& flag) {
    if (!text.empty()) return std::nullopt;
    return Error{"", flag, "is empty; give a file name, or - for standard output"};
}

Status check_output_path(const std::string& program, const std::string& path, const std::string& flag,
                         const std::vector<std::string>& inputs) {
    if (path.empty() || path == "-") return std::nullopt;
    if (auto e = refuse_as_output(program, path, flag, inputs)) return e;
    struct stat st {};
    // Standard output, a device or a FIFO is written in place; a file is replaced from its folder.
    if (stat(path.c_str(), &st) == 0 && (!S_ISREG(st.st_mode) || is_standard_output(st))) return std::nullopt;
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    struct stat d {};
    if (stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode) || access(dir.c_str(), W_OK) != 0)
        return Error{path, flag, "cannot write here: " + dir.string() + " is not a writable folder"};
    return std::nullopt;
}

Status check_outputs(const std::string& program, const std::vector<OutputPath>& outputs, const std::vector<std::string>& inputs) {
    for (size_t i = 0; i < outputs.size(); ++i) {
        if (auto e = check_output_path(program, outputs[i].path, outputs[i].flag, inputs)) return e;
        for (size_t j = 0; j < i; ++j)
            if (same_output(outputs[j].path, outputs[i].path)) {
                const std::string& p = outputs[i].path;
                return Error{p.empty() || p == "-" ? "standard output" : p, outputs[i].flag,
                             "is also the " + outputs[j].flag + " output; give each output its own file"};
            }
    }
    return std::nullopt;
}

int write_output(const std::string& program, const std::string& path, const std::string& flag,
                 const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write) {
    if (path.empty() || path == "-") {
        errno = 0;
        write(std::cout);
        return check_standard_output(program);
    }
    if (auto e = refuse_as_output(program, path, flag, inputs)) return print_input_error(program, *e);
    auto fault = [&](const std::string& what, int err) {
        std::cerr << program << ": error: " << Error{path, flag, what + ": " + errno_text(err)}.what() << '\n';
        return kExitRuntimeFault;
    };
    struct stat st {};
    const bool exists = stat(path.c_str(), &st) == 0;
    if (exists && is_standard_output(st)) {
        // /dev/stdout, a link to /proc/self/fd/1, the file the shell redirected to: written to the
        // stream itself (as the shell opened it, appending or not), never replaced by a new file.
        errno = 0;
        write(std::cout);
        return check_standard_output(program);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        // A device or a FIFO (/dev/null, a named pipe), by name or through a link, is written in
        // place: there is nothing to replace atomically, and renaming over it would remove it.
        int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return fault(std::string("cannot open ") + file_kind_name(st.st_mode) + " for writing", errno);
        int err = write_to_fd(fd, write);
        return err ? fault("cannot write", err) : 0;
    }
    // A regular file is replaced whole or not at all: a temporary beside it, unique to this
    // process (mkstemp), then rename(2), atomic within the folder.
    namespace fs = std::filesystem;
    fs::path target(path);
    fs::path dir = target.parent_path();
    std::string tmpl = (dir.empty() ? std::string() : dir.string() + "/") + "." + target.filename().string() + ".tmp-" + program +
                       "-XXXXXX";
    int fd = mkstemp(tmpl.data());
    if (fd < 0) return print_input_error(program, Error{path, flag, "cannot open for writing"});
    fchmod(fd, created_mode());
    set_interrupt_temporary(tmpl);   // a Ctrl-C while writing removes it (on_interrupt)
    int err = 0;
    try {
        err = write_to_fd(fd, write);
    } catch (...) {
        set_interrupt_temporary("");
        unlink(tmpl.c_str());   // out of memory while writing: no temporary left behind
        throw;
    }
    if (err) {
        set_interrupt_temporary("");
        unlink(tmpl.c_str());
        return fault("cannot write", err);
    }
    int renamed = rename(tmpl.c_str(), path.c_str());
    err = errno;
    set_interrupt_temporary("");
    if (renamed != 0) {
        unlink(tmpl.c_str());
        return fault("cannot replace", err);
    }
    return 0;
}

int check_standard_output(const std::string& program) {
    // A write that failed earlier left its errno; the flush below may fail again with its own.
    int earlier = errno;
    errno = 0;
    std::cout.flush();
    if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return 0;
    int err = errno ? errno : earlier;
    std::cerr << program << ": error: standard output: cannot write: " << errno_text(err) << '\n';
    std::cout.clear();
    std::clearerr(stdout);
    return kExitRuntimeFault;
}

Status check_writable(const std::string& path, const std::string& flag) {
    return check_output_path("zerosim", path, flag, {});
}

void install_interrupt_report(const char* program) {
    g_interrupt_program = program;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    for (int sig : {SIGINT, SIGTERM}) {
        // A signal ignored on entry stays ignored: a shell starts background jobs (`zerosim ... &`)
        // and nohup its commands with SIGINT ignored, so a Ctrl-C meant for the foreground job
        // must not end them.
        struct sigaction was;
        if (sigaction(sig, nullptr, &was) == 0 && was.sa_handler == SIG_IGN) continue;
        sigaction(sig, &sa, nullptr);
    }
}

}  // namespace zerosim
