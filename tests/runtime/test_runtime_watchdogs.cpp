// Issue 33: nothing hangs. `zerorun bench` under mpirun with 2 ranks; one rank is stopped
// (SIGSTOP) or interrupted from outside while the collectives run, and the job must end with exit
// 3 and a line that says why (the watchdog's --timeout, or the interrupt), within a bound well
// below the bench's own length (a million calls of 1 MiB).
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime_test_helpers.hpp"
#include "support/child_processes.hpp"

namespace {

using child_processes::Clock;
using child_processes::parent_of;
using child_processes::slurp;

// The zerorun processes below `root` (mpirun's ranks, at any depth), by their executable.
std::vector<pid_t> ranks_under(pid_t root) {
    const std::string exe = std::filesystem::canonical(ZERORUN_BINARY).string();
    return child_processes::processes_where([&](pid_t pid) {
        char link[PATH_MAX];
        ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), link, sizeof link - 1);
        if (n <= 0 || std::string(link, static_cast<size_t>(n)) != exe) return false;
        for (long p = parent_of(pid); p > 1; p = parent_of(static_cast<pid_t>(p)))
            if (p == root) return true;
        return false;
    });
}

struct Job {
    pid_t pid = -1;   // mpirun's
    std::string log;  // its stdout and stderr
};

// mpirun -np 2 zerorun bench (MPI backend, host memory) in its own process group, as a shell job;
// waits until both ranks run and have started calling.
Job start_bench(const std::string& name, const std::string& timeout) {
    Job j;
    const std::string dir = std::filesystem::temp_directory_path().string() + "/zerorun-watchdogs-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    j.log = dir + "/" + name + ".log";
    const std::string cmd = "exec " + zerorun_test::mpirun_command(2, ZERORUN_BINARY,
                                                                   "bench --backend mpi --op all_reduce --min 1M --max 1M -n 1000000 -w 0 "
                                                                   "--timeout " + timeout);
    j.pid = fork();
    if (j.pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);   // a test run in the background (ctest ... &) has SIGINT ignored
        signal(SIGTERM, SIG_DFL);
        int fd = open(j.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    setpgid(j.pid, j.pid);
    for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(30);) {
        if (ranks_under(j.pid).size() == 2 && slurp(j.log).find("#        (B)") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));   // calls are under way
    return j;
}

// mpirun's exit code within `bound` (-1: still running, then the whole job is killed).
int wait_for(const Job& j, std::chrono::seconds bound, double* seconds) {
    return child_processes::wait_bounded(j.pid, bound, seconds, [&] {
        for (pid_t r : ranks_under(j.pid)) kill(r, SIGKILL);
        kill(-j.pid, SIGKILL);
    });
}

bool have_mpirun() { return access(ZERORUN_MPIEXEC, X_OK) == 0; }

}  // namespace

// Before issue 33 the other rank spun in its all_reduce forever. --timeout 2: after 2 s with no
// call finished every rank is stopped (executor/watchdog.cpp Watchdog::loop, MPI_Abort(3)).
TEST(RuntimeWatchdogs, BenchTimeoutEndsTheJobWhenOneRankIsStopped) {
    if (!have_mpirun()) GTEST_SKIP() << "no mpirun at " << ZERORUN_MPIEXEC;
    Job j = start_bench("stop", "2");
    std::vector<pid_t> ranks = ranks_under(j.pid);
    ASSERT_EQ(ranks.size(), 2u) << slurp(j.log);
    ASSERT_EQ(kill(ranks[1], SIGSTOP), 0);
    double seconds = 0;
    // 2 s of --timeout, the watchdog's 0.1 s tick, then mpirun's teardown (SIGCONT, SIGTERM,
    // SIGKILL to the stopped rank): about 4 s here; 20 s for a loaded machine.
    const int rc = wait_for(j, std::chrono::seconds(20), &seconds);
    const std::string log = slurp(j.log);
    EXPECT_EQ(rc, 3) << log;
    EXPECT_GT(seconds, 1.5) << "ended before the timeout could have passed:\n" << log;
    EXPECT_NE(log.find("zerorun: error: rank 0: no op finished for "), std::string::npos) << log;
    EXPECT_NE(log.find("(--timeout 2) while at bench all_reduce of 1048576 bytes; a peer rank stopped or died"), std::string::npos)
        << log;
}

// SIGINT reaching a rank itself is the interrupt (executor/watchdog.cpp on_terminate); the other
// rank, ended by mpirun with SIGTERM, cannot tell a Ctrl-C from a failed peer and says both.
TEST(RuntimeWatchdogs, InterruptToOneRankIsNamedAsAnInterrupt) {
    if (!have_mpirun()) GTEST_SKIP() << "no mpirun at " << ZERORUN_MPIEXEC;
    Job j = start_bench("sigint", "60");
    std::vector<pid_t> ranks = ranks_under(j.pid);
    ASSERT_EQ(ranks.size(), 2u) << slurp(j.log);
    ASSERT_EQ(kill(ranks[0], SIGINT), 0);
    double seconds = 0;
    const int rc = wait_for(j, std::chrono::seconds(15), &seconds);
    const std::string log = slurp(j.log);
    EXPECT_EQ(rc, 3) << log;
    EXPECT_NE(log.find(": stopped by an interrupt (SIGINT, Ctrl-C); was in bench\n"), std::string::npos) << log;
    EXPECT_EQ(log.find("was at op -1"), std::string::npos) << "bench has no op id:\n" << log;
}

// Ctrl-C in a shell: SIGINT to the whole job (mpirun and, through the process group, the ranks).
// Every zerorun line names the Ctrl-C; none blames only a failed rank.
TEST(RuntimeWatchdogs, CtrlCToTheJobIsNamedAsAnInterrupt) {
    if (!have_mpirun()) GTEST_SKIP() << "no mpirun at " << ZERORUN_MPIEXEC;
    Job j = start_bench("ctrl-c", "60");
    ASSERT_EQ(ranks_under(j.pid).size(), 2u) << slurp(j.log);
    ASSERT_EQ(kill(-j.pid, SIGINT), 0);
    double seconds = 0;
    const int rc = wait_for(j, std::chrono::seconds(15), &seconds);
    const std::string log = slurp(j.log);
    EXPECT_NE(rc, 0) << log;
    EXPECT_NE(rc, -1) << "still running 15 s after Ctrl-C:\n" << log;
    std::istringstream in(log);
    int named = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("zerorun: error: rank ", 0) != 0) continue;
        ++named;
        EXPECT_NE(line.find("Ctrl-C"), std::string::npos) << line;
    }
    EXPECT_GE(named, 1) << log;
}
