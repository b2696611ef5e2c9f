// Shared helpers for the tests: locating fixtures and running the zerosim binary.
#pragma once

#include <array>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace zerosim::test {

inline std::string reference(const std::string& rel) { return std::string(ZEROSIM_REFERENCE_DIR) + "/" + rel; }
inline std::string fixture(const std::string& rel) { return std::string(ZEROSIM_FIXTURES_DIR) + "/" + rel; }
inline std::string config(const std::string& rel) { return std::string(ZEROSIM_CONFIGS_DIR) + "/" + rel; }

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Writes text to a fresh file under the test's temp dir and returns its path.
inline std::string temp_file(const std::string& name, const std::string& text) {
    std::string dir = ::testing::TempDir();
    std::string path = dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

struct RunResult {
    int exit_code = -1;
    std::string out;   // stdout and stderr together
};

// A path or argument in single quotes for the shell (the tests' paths hold no single quote).
inline std::string q(const std::string& s) { return "'" + s + "'"; }

// What `f` writes to std::cerr (the in-process error line of a reader or writer).
template <class F>
std::string stderr_of(F f) {
    std::ostringstream captured;
    auto* old = std::cerr.rdbuf(captured.rdbuf());
    f();
    std::cerr.rdbuf(old);
    return captured.str();
}

// Debian's headless browser for the tests that render the report and the plot ("" when absent;
// scripts/test.sh installs it).
inline std::string chromium() {
    for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
        if (std::filesystem::exists(p)) return p;
    return "";
}

// Chromium's flags for one headless run with its own profile folder and no network chatter.
inline std::string headless_chromium_flags(const std::string& profile) {
    return " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
           " --disable-component-update --disable-sync --user-data-dir=" + q(profile);
}

// Runs the zerosim binary with arguments (shell-quoted by the caller).
inline RunResult run_zerosim(const std::string& args) {
    RunResult r;
    std::string cmd = std::string(ZEROSIM_BINARY) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace zerosim::test
