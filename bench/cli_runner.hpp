// Runs the real zerosim binary as a user would and measures it: wall time and the child's peak
// resident memory (wait4's rusage). Shared by the benchmarks.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace zerosim::bench {

struct RunFigures {
    double seconds = 0;
    long max_rss_kib = 0;
};

// `ok_exits`: exit codes that are answers, not failures (validate exits 1 on a failed verdict);
// `binary`: another zerosim to measure (another build, for a before/after comparison).
inline RunFigures run_cli(const std::vector<std::string>& args, std::vector<int> ok_exits = {0},
                          const std::string& binary = ZEROSIM_BINARY) {
    std::fflush(stdout);  // the child must not inherit unwritten output
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) {
        std::vector<char*> argv;
        argv.push_back(const_cast<char*>(binary.c_str()));
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execv(binary.c_str(), argv.data());
        _exit(127);
    }
    int status = 0;
    struct rusage ru {};
    wait4(pid, &status, 0, &ru);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!WIFEXITED(status) || std::find(ok_exits.begin(), ok_exits.end(), WEXITSTATUS(status)) == ok_exits.end()) {
        std::fprintf(stderr, "zerosim exited with status %d\n", WEXITSTATUS(status));
        std::exit(1);
    }
    return {secs, ru.ru_maxrss};
}

// Median wall time and largest peak RSS over `repeats` runs.
inline RunFigures measure(const std::vector<std::string>& args, int repeats) {
    std::vector<double> times;
    long rss = 0;
    for (int i = 0; i < repeats; ++i) {
        auto f = run_cli(args);
        times.push_back(f.seconds);
        rss = std::max(rss, f.max_rss_kib);
    }
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], rss};
}

}  // namespace zerosim::bench
