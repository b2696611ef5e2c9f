// No hangs: a rank whose peer died must say so and end within the timeout.
//
// Three paths end a failed job, whichever comes first:
//  - an MPI error reaches the error handler (mpi_backend.cpp), which reports and calls MPI_Abort;
//  - mpirun sees a rank exit without MPI_Finalize and terminates the others: their SIGTERM
//    handler reports the op they were in before exiting;
//  - a peer stops answering without dying: the watchdog thread sees no op finish for `timeout`
//    seconds, reports the op it is stuck in, and calls MPI_Abort.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backends/backend.hpp"

namespace zerorun {

class Watchdog {
  public:
    // `where` describes the op in progress (called only when reporting).
    Watchdog(Backend& be, double timeout_s, std::function<std::string()> where);
    ~Watchdog();
    void progress();   // an op finished
    void stop();

  private:
    void loop();
    Backend& be_;
    double timeout_s_;
    std::function<std::string()> where_;
    std::atomic<int64_t> last_ns_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

// SIGTERM/SIGINT: one line naming the rank and the op (set_current_op), then exit code 3.
void install_termination_report(int rank);
void set_current_op(int64_t id, const char* what);   // `what` must outlive the call (a literal)

}  // namespace zerorun
