// Memory per rank, by what the bytes are for. Every buffer the executor holds is a Buffer, which
// registers its bytes with the tracker for its lifetime, so the report counts what ZeRO state
// really occupies (current and peak per category) next to the process's peak RSS.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace zerorun {

enum class MemCat { Parameters, Gradients, OptimizerStates, Buckets, Workspace, Verification };
constexpr int kMemCats = 6;
const char* mem_cat_name(MemCat c);   // "parameters", "gradients", ...

class MemoryTracker {
  public:
    void add(MemCat c, int64_t bytes);
    void sub(MemCat c, int64_t bytes);
    int64_t current(MemCat c) const { return cur_[static_cast<int>(c)].load(); }
    int64_t peak(MemCat c) const { return peak_[static_cast<int>(c)].load(); }
    // Peak of the sum of the ZeRO categories (everything but Workspace and Verification).
    int64_t peak_state() const { return peak_state_.load(); }

  private:
    std::array<std::atomic<int64_t>, kMemCats> cur_{};
    std::array<std::atomic<int64_t>, kMemCats> peak_{};
    std::atomic<int64_t> state_{0};
    std::atomic<int64_t> peak_state_{0};
};

// An aligned, zero-filled byte buffer counted under one category.
class Buffer {
  public:
    Buffer() = default;
    Buffer(MemoryTracker& t, MemCat c, size_t bytes);
    ~Buffer();
    Buffer(Buffer&& o) noexcept;
    Buffer& operator=(Buffer&& o) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    void* data() const { return p_; }
    template <typename T>
    T* as() const { return static_cast<T*>(p_); }
    size_t bytes() const { return bytes_; }
    bool empty() const { return p_ == nullptr; }
    void reset();

  private:
    MemoryTracker* t_ = nullptr;
    MemCat c_ = MemCat::Workspace;
    void* p_ = nullptr;
    size_t bytes_ = 0;
};

// The process's peak resident set (VmHWM), bytes; 0 where /proc is missing.
int64_t peak_rss_bytes();
std::string human_bytes(int64_t b);   // "12.3 MiB"

}  // namespace zerorun
