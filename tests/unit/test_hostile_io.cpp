// Issue 33, "Hangs" and "Outputs that lose data": the one input opener (core/input_file.hpp) and the
// one output opener (core/output.hpp) on real devices, FIFOs, sockets, symbolic links and temporary
// files; every refusal of an output leaves every input byte for byte as it was (checked by hash).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_input.hpp"
#include "core/output.hpp"
#include "formats/measured_logs.hpp"
#include "formats/nccl_tests.hpp"
#include "formats/schedule_json.hpp"
#include "formats/zerorun_log.hpp"
#include "inputs/ds_config.hpp"
#include "inputs/model.hpp"
#include "inputs/neox_config.hpp"
#include "timing/topology.hpp"
#include "validate/calibrate.hpp"
#include "validate/prediction_error.hpp"
#include "gtest/gtest.h"
#include "test_helpers.hpp"

namespace zerosim {
namespace {

namespace fs = std::filesystem;

std::string fresh(const std::string& name) {
    fs::path d = fs::path(::testing::TempDir()) / ("hostile_io_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// FNV-1a of a file's bytes: the input's fingerprint before and after a refused write.
uint64_t hash_of(const std::string& path) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : slurp(path)) h = (h ^ c) * 1099511628211ull;
    return h;
}

int write_x(const std::string& path, const std::vector<std::string>& inputs = {}, const std::string& flag = "-o") {
    return write_output("zerosim", path, flag, inputs, [](std::ostream& o) { o << "written\n"; });
}

using test::stderr_of;

// A Unix-domain socket bound at `path` (closed again: the socket file stays).
void make_socket(const std::string& path) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(s, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(path.size(), sizeof addr.sun_path);
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(s);
}

// ---- Hangs: every reader refuses a device, a FIFO, a socket; none reads for ever ----

TEST(InputOpener, EveryKindOfNonRegularFileIsRefusedByNameWithoutBeingRead) {
    const std::string d = fresh("kinds");
    const std::string fifo = d + "/pipe.json", sock = d + "/s.sock", link = d + "/zero.json";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    make_socket(sock);
    fs::create_symlink("/dev/zero", link);
    struct stat z {};
    if (stat("/dev/zero", &z) != 0 || !S_ISCHR(z.st_mode)) GTEST_SKIP() << "no /dev/zero device here";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/dev/zero", "is a character device, not a regular file; give the log as a file"},
        {link, "is a character device, not a regular file; give the log as a file"},   // through a link
        {fifo, "is a FIFO, not a regular file; give the log as a file"},
        {sock, "is a socket, not a regular file; give the log as a file"},
        {d, "is a directory, not a log"},
    };
    for (const auto& [path, message] : cases) {
        auto t0 = std::chrono::steady_clock::now();
        auto r = read_input_file(path, "log");
        ASSERT_FALSE(r.ok()) << path;
        EXPECT_EQ(r.error().file, path);
        EXPECT_EQ(r.error().message, message);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << path;
    }
}

TEST(InputOpener, EveryReaderGoesThroughIt) {
    // /dev/zero given as each input kind: each reader's error is the opener's, in milliseconds
    // (before, each read /dev/zero until memory ran out).
    struct stat z {};
    if (stat("/dev/zero", &z) != 0 || !S_ISCHR(z.st_mode)) GTEST_SKIP() << "no /dev/zero device here";
    const std::string dev = "/dev/zero";
    std::vector<Error> errors;
    auto add = [&](const auto& r) {
        ASSERT_FALSE(r.ok());
        errors.push_back(r.error());
    };
    add(load_ds_config(dev));
    add(load_model(dev));
    add(load_topology(dev));
    add(read_log(dev));
    add(read_nccl_tests(dev));
    add(read_schedule_json(dev));
    add(read_zerorun_memory(dev));
    add(read_json_file(dev));
    add(load_neox_config({dev}, 50304, kNewestRelease));
    add(read_calibration_table(dev, "", "as-deepspeed", 8));
    add(read_prediction_error(dev));
    for (const auto& e : errors) {
        EXPECT_EQ(e.file, dev) << e.what();
        EXPECT_NE(e.message.find("is a character device, not a regular file"), std::string::npos) << e.what();
    }
}

TEST(InputOpener, SizeCapMeasuredBySizeAndWhileReading) {
    const std::string d = fresh("cap");
    // A sparse file one byte past the cap: refused by its size, never read (no 2 GiB in memory).
    const std::string big = d + "/big.log";
    {
        int fd = open(big.c_str(), O_CREAT | O_WRONLY, 0600);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(ftruncate(fd, kMaxInputBytes + 1), 0);
        close(fd);
    }
    auto r = read_input_file(big, "log");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "is 2147483649 bytes, more than the 2048 MiB (2147483648 bytes) one input may hold; give a log of that size or less");
    // A file that says it is empty and is not (/proc): counted as read, past a cap of 10 bytes.
    auto proc = read_input_file("/proc/self/status", "file", 10);
    ASSERT_FALSE(proc.ok());
    EXPECT_EQ(proc.error().message, "is more than the 0 MiB (10 bytes) one input may hold; give a file of that size or less");
    auto whole = read_input_file("/proc/self/status", "file");
    ASSERT_TRUE(whole.ok());
    EXPECT_NE(whole.value().find("Name:"), std::string::npos);
    // Exactly at the cap is read whole.
    put(d + "/ten.txt", "0123456789");
    auto ten = read_input_file(d + "/ten.txt", "file", 10);
    ASSERT_TRUE(ten.ok());
    EXPECT_EQ(ten.value(), "0123456789");
}

// ---- Outputs that lose data ----

TEST(OutputOpener, NeverOverAFileTheCommandReadEvenUnlisted) {
    forget_files_read();
    const std::string d = fresh("read");
    const std::string in = d + "/measured.json";
    put(in, "{\"x\": 1}\n");
    const uint64_t before = hash_of(in);
    ASSERT_TRUE(read_input_file(in, "log").ok());
    int code = 0;
    std::string err = stderr_of([&] { code = write_x(in); });   // no inputs listed: the opener remembers
    EXPECT_EQ(code, kExitBadInput);
    EXPECT_EQ(err, "zerosim: error: " + in + ": field '-o': is one of the inputs; zerosim never overwrites what it was given\n");
    EXPECT_EQ(hash_of(in), before);
    // So does the check made before any work.
    EXPECT_TRUE(check_output_path("zerosim", in, "-o", {}).has_value());
    forget_files_read();
    EXPECT_EQ(write_x(in), 0);   // forgotten: an ordinary file again
}

TEST(OutputOpener, ALinkToAFileOrToNothingIsRefusedAndKept) {
    const std::string d = fresh("links");
    const std::string target = d + "/target.txt", to_file = d + "/to-file.txt", dangling = d + "/dangling.txt";
    put(target, "keep me\n");
    const uint64_t before = hash_of(target);
    fs::create_symlink("target.txt", to_file);
    fs::create_symlink("nowhere.txt", dangling);
    int code = 0;
    std::string err = stderr_of([&] { code = write_x(to_file); });
    EXPECT_EQ(code, kExitBadInput);
    EXPECT_EQ(err, "zerosim: error: " + to_file +
                       ": field '-o': is a symbolic link to target.txt; zerosim replaces an output whole and would put a file in "
                       "the link's place: give the file itself\n");
    err = stderr_of([&] { code = write_x(dangling, {}, "--trace"); });
    EXPECT_EQ(code, kExitBadInput);
    EXPECT_EQ(err, "zerosim: error: " + dangling +
                       ": field '--trace': is a symbolic link to nowhere.txt, which names no file; zerosim writes a new file "
                       "only under its own name, never in a link's place\n");
    EXPECT_TRUE(fs::is_symlink(to_file));
    EXPECT_TRUE(fs::is_symlink(dangling));
    EXPECT_FALSE(fs::exists(d + "/nowhere.txt"));
    EXPECT_EQ(hash_of(target), before);
    // A link to a device is written through, in place, and stays a link.
    struct stat n {};
    if (stat("/dev/null", &n) == 0 && S_ISCHR(n.st_mode)) {
        fs::create_symlink("/dev/null", d + "/null.txt");
        EXPECT_EQ(write_x(d + "/null.txt"), 0);
        EXPECT_TRUE(fs::is_symlink(d + "/null.txt"));
    }
    EXPECT_EQ(fs::directory_iterator(d)->path().filename().string().rfind(".", 0), std::string::npos)
        << "a temporary was left behind";
}

TEST(OutputOpener, StandardOutputsOwnFileByAnyNameIsWrittenToStandardOutput) {
    // Standard output redirected to a file (as `zerosim ... -o /dev/stdout > out.txt`): a link to
    // /proc/self/fd/1, /proc/self/fd/1 itself and the file's own name all name it; each output goes
    // to the stream (no link replaced, no new file renamed over the one stdout writes), once.
    const std::string d = fresh("stdout");
    const std::string out = d + "/out.txt", link = d + "/fd1.txt";
    fs::create_symlink("/proc/self/fd/1", link);
    std::cout.flush();
    int saved = dup(STDOUT_FILENO);
    int fd = open(out.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    // (/dev/stdout is a link to /proc/self/fd/1; it is not written here: were the rule broken, a
    // root test run would replace the machine's /dev/stdout.)
    int a = write_x(link), b = write_x("/proc/self/fd/1"), c = write_x(d + "/out.txt");
    std::cout.flush();
    dup2(saved, STDOUT_FILENO);
    close(saved);
    EXPECT_EQ(a, 0);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(c, 0);
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(slurp(out), "written\nwritten\nwritten\n");
}

TEST(OutputOpener, OutputsOfOneCommandAreNeverTheSameFile) {
    const std::string d = fresh("pairs");
    const std::string in = d + "/in.json", x = d + "/x.json";
    put(in, "{}\n");
    const uint64_t before = hash_of(in);
    fs::create_hard_link(in, d + "/hard.json");
    auto clash = [&](const std::vector<OutputPath>& outs) { return check_outputs("zerosim", outs, {in}); };
    // Two new paths, spelled alike or not.
    auto e = clash({{x, "-o"}, {x, "--trace"}});
    ASSERT_TRUE(e);
    EXPECT_EQ(e->what(), x + ": field '--trace': is also the -o output; give each output its own file");
    EXPECT_TRUE(clash({{x, "-o"}, {d + "/./x.json", "--plot"}}));
    // Standard output twice ("" is -o left out).
    e = clash({{"", "-o"}, {"-", "--trace"}});
    ASSERT_TRUE(e);
    EXPECT_EQ(e->what(), "standard output: field '--trace': is also the -o output; give each output its own file");
    // An existing file under two names (a hard link), and an input among the outputs.
    put(x, "old\n");
    fs::create_hard_link(x, d + "/x2.json");
    EXPECT_TRUE(clash({{x, "-o"}, {d + "/x2.json", "--json"}}));
    e = clash({{x, "-o"}, {d + "/hard.json", "--prediction-error-out"}});
    ASSERT_TRUE(e);
    EXPECT_EQ(e->message, "is one of the inputs; zerosim never overwrites what it was given");
    // Different files, and a character device shared: fine.
    EXPECT_FALSE(clash({{x, "-o"}, {d + "/y.json", "--trace"}}));
    struct stat n {};
    if (stat("/dev/null", &n) == 0 && S_ISCHR(n.st_mode)) EXPECT_FALSE(clash({{"/dev/null", "-o"}, {"/dev/null", "--plot"}}));
    EXPECT_EQ(hash_of(in), before);
    EXPECT_EQ(slurp(x), "old\n");
}

TEST(OutputOpener, AnEmptyPathIsRefusedByName) {
    auto e = check_output_name("", "--plot");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->what(), "field '--plot': is empty; give a file name, or - for standard output");
    EXPECT_FALSE(check_output_name("-", "-o"));
    EXPECT_FALSE(check_output_name("out.csv", "-o"));
}

// ---- Error lines: one line, readable length ----

TEST(ErrorLine, ControlCharactersEscapedAndHugeValuesCut) {
    Error e{"bad\nname\x1b[31m.json", "a\tb", "found 'x'"};
    EXPECT_EQ(e.what(), "bad\\nname\\x1b[31m.json: field 'a\\tb': found 'x'");
    // A number of a million digits echoed: its head and tail, the middle counted.
    std::string digits(1000000, '7');
    Error big{"f.json", "zero_optimization.stage", "expected 0 to 3, found " + digits + " (a stage)"};
    std::string line = big.what();
    EXPECT_LT(line.size(), 1200u);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_EQ(line.rfind("f.json: field 'zero_optimization.stage': expected 0 to 3, found 777", 0), 0u);
    EXPECT_NE(line.find("bytes cut]..."), std::string::npos);
    EXPECT_EQ(line.substr(line.size() - 12), "77 (a stage)");
    // Never cut inside a UTF-8 character: 2-byte "é" repeated, any cut lands between two.
    std::string accents;
    for (int i = 0; i < 2000; ++i) accents += "\xc3\xa9";
    std::string cut = printable(accents, 101);
    const std::string marker = "...[";
    size_t m = cut.find(marker);
    ASSERT_NE(m, std::string::npos);
    EXPECT_EQ(m % 2, 0u);
    EXPECT_EQ(static_cast<unsigned char>(cut[m + cut.substr(m).find("]...") + 4]), 0xc3u);
}

}  // namespace
}  // namespace zerosim
