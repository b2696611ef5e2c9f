#include "executor/watchdog.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace zerorun {

namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int g_rank = -1;
std::atomic<int64_t> g_op{-1};
std::atomic<const char*> g_what{"start-up"};

// Async-signal-safe: only write(2) and integer formatting.
void put_int(char*& p, int64_t v) {
    char tmp[24];
    int n = 0;
    bool neg = v < 0;
    uint64_t u = neg ? static_cast<uint64_t>(-v) : static_cast<uint64_t>(v);
    do {
        tmp[n++] = static_cast<char>('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg) *p++ = '-';
    while (n) *p++ = tmp[--n];
}
void put_str(char*& p, const char* s) {
    while (*s) *p++ = *s++;
}

void on_terminate(int sig) {
    char buf[256];
    char* p = buf;
    put_str(p, "zerorun: error: rank ");
    put_int(p, g_rank);
    put_str(p, ": stopped by ");
    // mpirun turns a Ctrl-C into SIGTERM to every rank, as it does when a rank fails: the rank
    // cannot tell which, so it says both; a SIGINT reaching the rank itself is the interrupt.
    put_str(p, sig == SIGTERM ? "the launcher (SIGTERM): the job was interrupted (Ctrl-C) or another rank failed"
                              : "an interrupt (SIGINT, Ctrl-C)");
    // Outside a schedule (bench, start-up) there is no op id: name only what it was doing.
    const int64_t op = g_op.load();
    if (op >= 0) {
        put_str(p, "; was at op ");
        put_int(p, op);
        put_str(p, " (");
        put_str(p, g_what.load());
        put_str(p, ")\n");
    } else {
        put_str(p, "; was in ");
        put_str(p, g_what.load());
        put_str(p, "\n");
    }
    ssize_t w = write(2, buf, static_cast<size_t>(p - buf));
    (void)w;
    _exit(3);
}

}  // namespace

void install_termination_report(int rank) {
    g_rank = rank;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_terminate;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

void set_current_op(int64_t id, const char* what) {
    g_what.store(what);
    g_op.store(id);
}

Watchdog::Watchdog(Backend& be, double timeout_s, std::function<std::string()> where)
    : be_(be), timeout_s_(timeout_s), where_(std::move(where)), last_ns_(now_ns()) {
    thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::progress() { last_ns_.store(now_ns()); }

void Watchdog::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
        cv_.wait_for(lk, std::chrono::milliseconds(100));
        if (stop_) break;
        double idle = static_cast<double>(now_ns() - last_ns_.load()) / 1e9;
        if (timeout_s_ > 0 && idle > timeout_s_) {
            std::fprintf(stderr,
                         "zerorun: error: rank %d: no op finished for %.1f s (--timeout %g) while at %s; a peer rank "
                         "stopped or died; stopping every rank\n",
                         be_.rank(), idle, timeout_s_, where_().c_str());
            std::fflush(stderr);
            be_.abort(3);
        }
    }
}

}  // namespace zerorun
