// What the watchdog and interrupt tests need to watch a child they started (a sweep, an mpirun job):
// its text output, its process tree read from /proc, and its end within a bound. Header-only, shared
// by the unit suite (tests/unit/test_hostile_watchdogs.cpp) and the runtime suite
// (tests/runtime/test_runtime_watchdogs.cpp).
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace child_processes {

using Clock = std::chrono::steady_clock;

inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The parent of `pid` from /proc/PID/stat's fourth field; -1 for a zombie or a process gone.
inline long parent_of(pid_t pid) {
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) return -1;
    std::istringstream rest(stat.substr(close_paren + 1));
    char state = 0;
    long ppid = -1;
    rest >> state >> ppid;
    return state == 'Z' ? -1 : ppid;
}

// Every live pid on the machine that `keep` accepts.
inline std::vector<pid_t> processes_where(const std::function<bool(pid_t)>& keep) {
    std::vector<pid_t> out;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
        if (pid > 0 && keep(pid)) out.push_back(pid);
    }
    closedir(d);
    return out;
}

// Waits up to `bound` for the child `pid` to end: its exit code, 128 + signal if killed, and in
// *seconds how long it took; -1 if it was still running, after `kill_all` has been called and the
// child reaped, so that no test leaves a process behind.
inline int wait_bounded(pid_t pid, std::chrono::seconds bound, double* seconds, const std::function<void()>& kill_all) {
    auto t0 = Clock::now();
    int st = 0;
    while (Clock::now() - t0 < bound) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill_all();
    waitpid(pid, &st, 0);
    return -1;
}

}  // namespace child_processes
