#include "executor/memory.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

namespace zerorun {

const char* mem_cat_name(MemCat c) {
    switch (c) {
        case MemCat::Parameters: return "parameters";
        case MemCat::Gradients: return "gradients";
        case MemCat::OptimizerStates: return "optimizer_states";
        case MemCat::Buckets: return "buckets";
        case MemCat::Workspace: return "workspace";
        case MemCat::Verification: return "verification";
    }
    return "?";
}

namespace {
void raise_to(std::atomic<int64_t>& peak, int64_t v) {
    int64_t p = peak.load();
    while (v > p && !peak.compare_exchange_weak(p, v)) {
    }
}
bool is_state(MemCat c) { return c != MemCat::Workspace && c != MemCat::Verification; }
}  // namespace

void MemoryTracker::add(MemCat c, int64_t bytes) {
    int i = static_cast<int>(c);
    raise_to(peak_[i], cur_[i] += bytes);
    if (is_state(c)) raise_to(peak_state_, state_ += bytes);
}

void MemoryTracker::sub(MemCat c, int64_t bytes) {
    cur_[static_cast<int>(c)] -= bytes;
    if (is_state(c)) state_ -= bytes;
}

Buffer::Buffer(MemoryTracker& t, MemCat c, size_t bytes) : t_(&t), c_(c), bytes_(bytes) {
    if (posix_memalign(&p_, 64, bytes ? bytes : 64) != 0) throw std::bad_alloc();
    std::memset(p_, 0, bytes);
    t_->add(c_, static_cast<int64_t>(bytes_));
}

Buffer::~Buffer() { reset(); }

void Buffer::reset() {
    if (p_) {
        std::free(p_);
        t_->sub(c_, static_cast<int64_t>(bytes_));
    }
    p_ = nullptr;
    bytes_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept : t_(o.t_), c_(o.c_), p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
    if (this != &o) {
        reset();
        t_ = o.t_;
        c_ = o.c_;
        p_ = o.p_;
        bytes_ = o.bytes_;
        o.p_ = nullptr;
        o.bytes_ = 0;
    }
    return *this;
}

int64_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
    return 0;
}

std::string human_bytes(int64_t b) {
    char buf[64];
    double v = static_cast<double>(b);
    if (v < 1024) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
    else if (v < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
    else if (v < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", v / 1024 / 1024);
    else std::snprintf(buf, sizeof buf, "%.2f GiB", v / 1024 / 1024 / 1024);
    return buf;
}

}  // namespace zerorun
