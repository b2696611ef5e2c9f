// Issue 33: nothing hangs. A real `zerosim sweep` with two worker processes, started here as a
// child; one worker is stopped (SIGSTOP) or killed (SIGKILL) from outside, as a debugger or the
// OOM killer would, and the sweep must end with exit 3 (README "Exit codes": a runtime fault) and a
// line naming the worker, within a bound well below the sweep's own length. Ctrl-C (SIGINT) must
// end it with one line naming the interrupt, exit 3, no worker left running and no half file.
// The grid is 8,000 points of gpt2-small (about 30 s on two cores), so it is still running when
// the signal comes; every bound below is a few seconds.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child_processes.hpp"

namespace {

using child_processes::Clock;
using child_processes::slurp;

// The pids whose parent is `parent`, zombies left out.
std::vector<pid_t> children_of(pid_t parent) {
    return child_processes::processes_where([&](pid_t pid) { return child_processes::parent_of(pid) == parent; });
}

// A process that still runs (exists and is not a zombie).
bool running(pid_t pid) {
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t close_paren = stat.rfind(')');
    return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] != 'Z';
}

struct Sweep {
    pid_t pid = -1;
    std::string dir;
    std::string err_path() const { return dir + "/stderr"; }
    std::string out_path() const { return dir + "/sweep.csv"; }
};

// Starts a long sweep with two workers in its own process group (as a shell job is), stderr to a
// file, the CSV to -o; waits until both workers run.
Sweep start_long_sweep(const std::string& name, bool sigint_ignored = false) {
    Sweep s;
    s.dir = std::string(ZEROSIM_ARTIFACTS_DIR) + "/hostile-watchdogs/" + name;
    std::filesystem::remove_all(s.dir);
    std::filesystem::create_directories(s.dir);
    std::string buckets;
    for (int i = 0; i < 2000; ++i) buckets += (i ? "," : "") + std::to_string(1000000 + 1000 * i);
    const std::string model = std::string(ZEROSIM_CONFIGS_DIR) + "/models/gpt2-small.json";
    const std::string topo = std::string(ZEROSIM_CONFIGS_DIR) + "/../topologies/dgx-a100.json";
    const std::string set = "zero_optimization.reduce_bucket_size=" + buckets;
    const std::string out = s.out_path();
    std::vector<std::string> args = {ZEROSIM_BINARY, "sweep",   "--model", model, "--topology", topo, "--stages",
                                     "0,1,2,3",      "--set",   set,       "--jobs", "2",        "-o",  out};
    const std::string err = s.err_path();
    s.pid = fork();
    if (s.pid == 0) {
        setpgid(0, 0);
        // As a terminal's foreground job gets them: a test run in the background (ctest ... &)
        // has SIGINT ignored, and zerosim rightly keeps an ignored SIGINT ignored.
        signal(SIGINT, sigint_ignored ? SIG_IGN : SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
    }
    setpgid(s.pid, s.pid);   // both sides, so the group exists whichever runs first
    for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(20);) {
        if (children_of(s.pid).size() == 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));   // the workers are computing
    return s;
}

// Waits up to `bound` for the sweep to end; its exit code, 128 + signal if killed, -1 if it was
// still running (then it is killed, so no test leaves it behind).
int wait_for(const Sweep& s, std::chrono::seconds bound, double* seconds) {
    return child_processes::wait_bounded(s.pid, bound, seconds, [&] { kill(-s.pid, SIGKILL); });
}

void expect_worker_fault_ends_sweep(int sig, const std::string& said) {
    Sweep s = start_long_sweep(said == "was stopped" ? "stop" : "kill");
    std::vector<pid_t> workers = children_of(s.pid);
    ASSERT_EQ(workers.size(), 2u) << slurp(s.err_path());
    ASSERT_EQ(kill(workers[1], sig), 0);
    double seconds = 0;
    // The sweep asks its workers every second (sweep.cpp run_sweep); 5 s leaves room for a loaded
    // machine, against the 30 s the grid would take.
    const int rc = wait_for(s, std::chrono::seconds(5), &seconds);
    const std::string err = slurp(s.err_path());
    EXPECT_EQ(rc, 3) << err;
    EXPECT_LT(seconds, 5.0);
    const std::string line = "(pid " + std::to_string(workers[1]) + ") " + said + " (signal " + std::to_string(sig) + ")";
    EXPECT_NE(err.find("zerosim: error: sweep worker "), std::string::npos) << err;
    EXPECT_NE(err.find(line), std::string::npos) << "expected '" << line << "' in:\n" << err;
    EXPECT_NE(err.find("the sweep is abandoned"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(s.out_path()));   // no CSV of a partial grid
    // The other worker is ended too (end_sweep_workers), and the stopped one with it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (pid_t w : workers) EXPECT_FALSE(running(w)) << "worker " << w << " still runs";
}

// What is left in the sweep's folder besides its stderr: a temporary (.sweep.csv.tmp-...) or the CSV.
std::vector<std::string> leftovers(const Sweep& s) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(s.dir))
        if (e.path().filename() != "stderr") out.push_back(e.path().filename().string());
    return out;
}

void expect_interrupt_named(const Sweep& s, const std::vector<pid_t>& workers, int rc, double seconds) {
    const std::string err = slurp(s.err_path());
    EXPECT_EQ(rc, 3) << err;
    EXPECT_LT(seconds, 3.0);
    const std::string line = "zerosim: error: interrupted (SIGINT, Ctrl-C); no output is left half written\n";
    const size_t at = err.find(line);
    ASSERT_NE(at, std::string::npos) << err;
    EXPECT_EQ(err.find(line, at + 1), std::string::npos) << "the workers must not each report it:\n" << err;
    EXPECT_EQ(err.find("another rank"), std::string::npos) << err;
    EXPECT_TRUE(leftovers(s).empty()) << leftovers(s).front();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (pid_t w : workers) EXPECT_FALSE(running(w)) << "worker " << w << " still runs after the interrupt";
}

}  // namespace

TEST(HostileWatchdogs, StoppedSweepWorkerEndsTheSweepWithExit3NamingIt) { expect_worker_fault_ends_sweep(SIGSTOP, "was stopped"); }

TEST(HostileWatchdogs, KilledSweepWorkerEndsTheSweepWithExit3NamingIt) { expect_worker_fault_ends_sweep(SIGKILL, "was killed"); }

// Ctrl-C in a shell sends SIGINT to the whole foreground job: the sweep and its workers.
TEST(HostileWatchdogs, CtrlCToASweepIsNamedAsAnInterruptOnce) {
    Sweep s = start_long_sweep("ctrl-c");
    std::vector<pid_t> workers = children_of(s.pid);
    ASSERT_EQ(workers.size(), 2u) << slurp(s.err_path());
    ASSERT_EQ(kill(-s.pid, SIGINT), 0);
    double seconds = 0;
    const int rc = wait_for(s, std::chrono::seconds(3), &seconds);
    expect_interrupt_named(s, workers, rc, seconds);
}

// SIGINT to the sweep alone (kill -INT PID): its workers, which got nothing, must not go on
// computing as orphans (PR_SET_PDEATHSIG in sweep.cpp).
TEST(HostileWatchdogs, InterruptToTheSweepAloneTakesItsWorkersWithIt) {
    Sweep s = start_long_sweep("sigint-parent");
    std::vector<pid_t> workers = children_of(s.pid);
    ASSERT_EQ(workers.size(), 2u) << slurp(s.err_path());
    ASSERT_EQ(kill(s.pid, SIGINT), 0);
    double seconds = 0;
    const int rc = wait_for(s, std::chrono::seconds(3), &seconds);
    expect_interrupt_named(s, workers, rc, seconds);
}

// A background job of a shell (`zerosim sweep ... &`) starts with SIGINT ignored: a Ctrl-C meant
// for the foreground job must not end it.
TEST(HostileWatchdogs, AnIgnoredInterruptStaysIgnored) {
    Sweep s = start_long_sweep("sigint-ignored", true);
    ASSERT_EQ(children_of(s.pid).size(), 2u) << slurp(s.err_path());
    ASSERT_EQ(kill(-s.pid, SIGINT), 0);
    double seconds = 0;
    const int rc = wait_for(s, std::chrono::seconds(1), &seconds);   // kills it when still running
    EXPECT_EQ(rc, -1) << "ended by an ignored SIGINT:\n" << slurp(s.err_path());
    EXPECT_EQ(slurp(s.err_path()).find("interrupted"), std::string::npos);
}
