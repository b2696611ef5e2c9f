#include "executor/loss.hpp"

#include <cmath>

#include "backends/dtype.hpp"

namespace zerorun {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

namespace {

// A value in [-1, 1) on a 2^-12 grid: exact in fp32, so hashing never depends on rounding.
float unit_value(uint64_t h) { return static_cast<float>(static_cast<int64_t>(h >> 51) - 4096) / 4096.0f; }

}  // namespace

float initial_weight(uint64_t seed, int param, int64_t i) {
    uint64_t h = splitmix64(splitmix64(seed * 0x100000001b3ull + 0x5eedull) ^ (static_cast<uint64_t>(param) << 40) ^
                            static_cast<uint64_t>(i));
    return unit_value(h);
}

float target(uint64_t seed, int rank, int step, int micro, int param, int64_t i) {
    uint64_t k = splitmix64(seed ^ 0x7a7a7a7aull);
    k = splitmix64(k ^ (static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(step & 0xffff) << 32) ^
                   static_cast<uint64_t>(micro & 0xffff));
    return unit_value(splitmix64(k ^ (static_cast<uint64_t>(param) << 40) ^ static_cast<uint64_t>(i)));
}

float garbage_weight(int rank, int param, int64_t i) {
    return 1000.0f + static_cast<float>(rank) + static_cast<float>((param * 31 + i) % 7);
}

void adam_update(float* w, float* m, float* v, const float* g, int64_t n, int t, const AdamParams& a) {
    const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta1), t));
    const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta2), t));
    const float step_size = a.lr / bc1;
    const float bc2_sqrt = std::sqrt(bc2);
    for (int64_t i = 0; i < n; ++i) {
        m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * g[i];
        v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * g[i] * g[i];
        float denom = std::sqrt(v[i]) / bc2_sqrt + a.eps;
        w[i] = w[i] - step_size * (m[i] / denom);
    }
}

double reduce_add(DType t, double a, double b) {
    if (t == DType::FP32) return static_cast<float>(static_cast<float>(a) + static_cast<float>(b));
    if (t == DType::BF16 || t == DType::FP16) return round_to(t, static_cast<float>(a) + static_cast<float>(b));
    return a + b;
}

Reference::Reference(const std::vector<zerosim::ScheduleParam>& params, const LossSpec& spec) : spec_(spec) {
    adam_.lr = spec.lr;
    for (size_t p = 0; p < params.size(); ++p) {
        int64_t n = params[p].numel;
        numel_.push_back(n);
        world_.push_back(spec.world);
        std::vector<float> w(static_cast<size_t>(n));
        // The model starts in its training dtype (the engine casts it before broadcasting); the
        // fp32 master copy is made from that.
        for (int64_t i = 0; i < n; ++i)
            w[i] = static_cast<float>(round_to(spec.model_dtype, initial_weight(spec.seed, static_cast<int>(p), i)));
        w_.push_back(std::move(w));
        m_.emplace_back(static_cast<size_t>(n), 0.0f);
        v_.emplace_back(static_cast<size_t>(n), 0.0f);
    }
}

float Reference::working(int p, int64_t i) const { return static_cast<float>(round_to(spec_.model_dtype, w_[p][i])); }

void Reference::step(int step_index) {
    std::vector<int> micros;
    for (int m = 0; m < spec_.grad_accum; ++m) micros.push_back(m);
    ++t_;
    for (size_t p = 0; p < w_.size(); ++p) {
        const int world = world_[p];
        const float scale = 1.0f / static_cast<float>(world * spec_.grad_accum);
        int64_t n = numel_[p];
        std::vector<float> g(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            float wk = working(static_cast<int>(p), i);
            double s = 0.0;
            for (int r = 0; r < world; ++r) {
                double c = round_to(spec_.comm_dtype,
                                    local_gradient(spec_, wk, r, step_index, micros, static_cast<int>(p), i));
                s = r == 0 ? c : reduce_add(spec_.comm_dtype, s, c);
            }
            g[i] = static_cast<float>(s) * scale;
        }
        adam_update(w_[p].data(), m_[p].data(), v_[p].data(), g.data(), n, t_, adam_);
    }
}

}  // namespace zerorun
