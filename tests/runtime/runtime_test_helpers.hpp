// Shared by the runtime's tests: running commands and mpirun as the CI machines need them.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

namespace zerorun_test {

struct RunResult {
    int code = -1;
    std::string out;   // stdout and stderr
    double seconds = 0;
};

inline RunResult shell(const std::string& cmd) {
    RunResult r;
    auto t0 = std::chrono::steady_clock::now();
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

// mpirun as the CI machines need it: root, more ranks than cores, ranks that yield while waiting
// (busy-polling ranks on 2 cores starve each other).
inline std::string mpirun_command(int np, const std::string& program, const std::string& args) {
    return std::string(ZERORUN_MPIEXEC) + " --allow-run-as-root --oversubscribe --bind-to none" +
           " --mca mpi_yield_when_idle 1 -np " + std::to_string(np) + " " + program + " " + args;
}

inline RunResult mpirun_program(int np, const std::string& program, const std::string& args) {
    return shell(mpirun_command(np, program, args));
}

// One stream only: mpirun forwards stdout and stderr separately, so merged they can interleave
// inside a line.
inline RunResult mpirun_stderr(int np, const std::string& program, const std::string& args) {
    return shell("(" + mpirun_command(np, program, args) + " > /dev/null)");
}
inline RunResult mpirun_stdout(int np, const std::string& program, const std::string& args) {
    return shell("(" + mpirun_command(np, program, args) + " 2> /dev/null)");
}

inline int count_lines_starting(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0;
    return n;
}

inline std::string fixture(const std::string& rel) { return std::string(ZERORUN_FIXTURES_DIR) + "/" + rel; }

}  // namespace zerorun_test
