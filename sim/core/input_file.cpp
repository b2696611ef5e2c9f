#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace zerosim {

namespace {

std::mutex& files_read_mutex() {
    static std::mutex m;
    return m;
}

std::vector<FileIdentity>& files_read_list() {
    static std::vector<FileIdentity> files;
    return files;
}

void remember_read(const struct stat& st, const std::string& path) {
    std::lock_guard<std::mutex> lock(files_read_mutex());
    auto& files = files_read_list();
    for (const auto& f : files)
        if (f.dev == st.st_dev && f.ino == st.st_ino && f.path == path) return;
    files.push_back({st.st_dev, st.st_ino, path});
}

// "is 3000000000 bytes, more than ..." with the cap in the unit it was set in.
std::string too_large(const std::string& what, int64_t max_bytes, const std::string& size) {
    return "is " + (size.empty() ? std::string() : size + ", ") + "more than the " + std::to_string(max_bytes >> 20) + " MiB (" + std::to_string(max_bytes) +
           " bytes) one input may hold; give a " + what + " of that size or less";
}

// Reads the open regular file `fd` whole (its size first, then whatever it grew by), at most
// max_bytes; an Error names `path` when it is larger or a read fails.
Result<std::string> read_whole(int fd, const std::string& path, const std::string& what, int64_t size, int64_t max_bytes) {
    std::string text;
    text.resize(static_cast<size_t>(size));
    size_t have = 0;
    for (;;) {
        if (have == text.size()) {
            if (static_cast<int64_t>(text.size()) > max_bytes) return Error{path, "", too_large(what, max_bytes, "")};
            // Past the size fstat gave (a file still growing, /proc's size 0): a further chunk, one
            // byte past the cap at most, so a file over it is seen as such.
            text.resize(std::min<size_t>(text.size() + (size_t{1} << 16), static_cast<size_t>(max_bytes) + 1));
        }
        ssize_t n = ::read(fd, text.data() + have, text.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error{path, "", "cannot read " + what + ": " + std::strerror(errno)};
        if (n == 0) break;
        have += static_cast<size_t>(n);
    }
    text.resize(have);
    return text;
}

}  // namespace

const char* file_kind_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

Result<std::string> read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
    auto cannot_open = [&](int err) {
        return Error{path, "", "cannot open " + what + " for reading" + (err == ENOENT ? "" : std::string(": ") + std::strerror(err))};
    };
    // What the path is, before opening it: a device is never opened (opening one can block or act,
    // and /dev/zero reads for ever), nor a FIFO (an open for reading waits for a writer).
    auto refuse_kind = [&](const struct stat& st) -> Status {
        if (S_ISREG(st.st_mode)) return std::nullopt;
        if (S_ISDIR(st.st_mode)) return Error{path, "", "is a directory, not a " + what};
        return Error{path, "", std::string("is ") + file_kind_name(st.st_mode) + ", not a regular file; give the " + what + " as a file"};
    };
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return cannot_open(errno);
    if (auto e = refuse_kind(st)) return *e;
    // O_NONBLOCK: should the path have become a FIFO since, the open still returns, and fstat says so.
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return cannot_open(errno);
    struct stat opened {};
    if (fstat(fd, &opened) != 0) {
        int err = errno;
        close(fd);
        return cannot_open(err);
    }
    if (auto e = refuse_kind(opened)) {
        close(fd);
        return *e;
    }
    if (opened.st_size > max_bytes) {
        close(fd);
        return Error{path, "", too_large(what, max_bytes, std::to_string(opened.st_size) + " bytes")};
    }
    remember_read(opened, path);
    auto text = read_whole(fd, path, what, opened.st_size, max_bytes);
    close(fd);
    return text;
}

std::vector<FileIdentity> files_read() {
    std::vector<FileIdentity> live;
    std::lock_guard<std::mutex> lock(files_read_mutex());
    for (const auto& f : files_read_list()) {
        struct stat st {};
        if (stat(f.path.c_str(), &st) == 0 && st.st_dev == f.dev && st.st_ino == f.ino) live.push_back(f);
    }
    return live;
}

void forget_files_read() {
    std::lock_guard<std::mutex> lock(files_read_mutex());
    files_read_list().clear();
}

}  // namespace zerosim
