#include "core/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <iostream>

namespace zerosim {

namespace {

std::string errno_text(int err) { return err == 0 ? "unknown error" : std::strerror(err); }

// What a path names, in words, for the messages.
const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
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

// The checks that need no folder: not a directory, not an input by identity.
Status refuse_as_output(const std::string& program, const std::string& path, const std::string& flag,
                        const std::vector<std::string>& inputs) {
    struct stat out {};
    if (stat(path.c_str(), &out) != 0) return std::nullopt;
    if (S_ISDIR(out.st_mode)) return Error{path, flag, "is a directory; give a file name to write"};
    // Identity, not spelling: a second name, a hard link or a symlink to an input is the input.
    for (const auto& in : inputs) {
        struct stat st {};
        if (!in.empty() && stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
            return Error{path, flag, "is one of the inputs; " + program + " never overwrites what it was given"};
    }
    return std::nullopt;
}

}  // namespace

Status check_output_path(const std::string& program, const std::string& path, const std::string& flag,
                         const std::vector<std::string>& inputs) {
    if (path.empty() || path == "-") return std::nullopt;
    if (auto e = refuse_as_output(program, path, flag, inputs)) return e;
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    struct stat d {};
    if (stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode) || access(dir.c_str(), W_OK) != 0)
        return Error{path, flag, "cannot write here: " + dir.string() + " is not a writable folder"};
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
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        // A device or a FIFO (/dev/null, /dev/stdout, a pipe) is written in place: there is nothing
        // to replace atomically, and renaming over it would remove it.
        int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return fault(std::string("cannot open ") + file_kind(st.st_mode) + " for writing", errno);
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
    int err = 0;
    try {
        err = write_to_fd(fd, write);
    } catch (...) {
        unlink(tmpl.c_str());   // out of memory while writing: no temporary left behind
        throw;
    }
    if (err) {
        unlink(tmpl.c_str());
        return fault("cannot write", err);
    }
    if (rename(tmpl.c_str(), path.c_str()) != 0) {
        err = errno;
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

}  // namespace zerosim
