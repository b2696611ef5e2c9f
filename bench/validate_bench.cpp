// Validating a real training run's log: two 1,000,000-line DeepSpeed comms logs, the measured one
// with 1% of its lines removed, through `zerosim validate` as a user runs it. Prints wall time and
// peak memory, and checks that the report names exactly the removed ops (count and lines).
//
// The logs are the real comms_logger lines of the shared reference run z3_default_w4 (DeepSpeed
// v0.14.2, ZeRO-3, 4 ranks) repeated in order, as a long run repeats its steps.
// Run: build/bench/validate_bench [lines] [removed-per-mille]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "formats/measured_logs.hpp"

constexpr long kNearby = 16;

int main(int argc, char** argv) {
    const long lines = argc > 1 ? std::atol(argv[1]) : 1000000;
    const long per_mille = argc > 2 ? std::atol(argv[2]) : 10;
    const std::string ref = std::string(ZEROSIM_SHARED_DIR) + "/reference/deepspeed-v0.14.2-cpu/z3_default_w4/rank0.log";
    // The lines the validator reads as ops (log_summary's barriers and other lines are not ops).
    auto real = zerosim::read_log(ref);
    if (!real || real->ops.empty()) {
        std::fprintf(stderr, "validate_bench: no comms_logger ops in %s\n", ref.c_str());
        return 1;
    }
    std::vector<std::string> ops, keys;   // the line, and what the alignment compares (op, printed size)
    for (const auto& op : real->ops) keys.push_back(op.record + " " + op.size_text);
    {
        std::ifstream in(ref);
        std::vector<std::string> all;
        for (std::string l; std::getline(in, l);) all.push_back(l);
        for (const auto& op : real->ops) ops.push_back(all.at(static_cast<size_t>(op.line - 1)));
    }
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("zerosim-validate-bench-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string pred = (dir / "predicted.log").string(), meas = (dir / "measured.log").string(),
                      report = (dir / "report.txt").string();
    std::vector<long> removed;   // 1-based lines of the predicted log, ascending
    auto key_of_line = [&](long line) -> const std::string& { return keys[static_cast<size_t>(line - 1) % ops.size()]; };
    {
        std::ofstream p(pred), m(meas);
        uint64_t x = 88172645463325252ull;   // xorshift64: the same lines removed every run
        for (long i = 0; i < lines; ++i) {
            const std::string& l = ops[static_cast<size_t>(i) % ops.size()];
            p << l << '\n';
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (static_cast<long>(x % 1000) < per_mille)
                removed.push_back(i + 1);
            else
                m << l << '\n';
        }
        if (!p.flush() || !m.flush()) {
            std::fprintf(stderr, "validate_bench: cannot write the logs in %s\n", dir.c_str());
            return 1;
        }
    }
    std::printf("validate: %ld-line predicted log against the same with %zu lines (%.1f%%) removed\n", lines,
                removed.size(), 100.0 * static_cast<double>(removed.size()) / static_cast<double>(lines));
    std::vector<double> secs;
    long rss = 0;
    for (int r = 0; r < 3; ++r) {
        auto f = zerosim::bench::run_cli({"validate", pred, meas, "--what", "ops", "--format", "md", "-o", report}, {0, 1});
        secs.push_back(f.seconds);
        rss = std::max(rss, f.max_rss_kib);
    }
    std::sort(secs.begin(), secs.end());
    // The markdown report lists every difference (the text one folds after 50), each missing op
    // with its line in the predicted log.
    std::ifstream rep(report);
    std::vector<long> reported;
    long other = 0;
    for (std::string l; std::getline(rep, l);) {
        auto at = l.find("missing from the measured log:");
        if (at != std::string::npos) {
            auto ln = l.rfind("(line ");
            reported.push_back(ln == std::string::npos ? 0 : std::atol(l.c_str() + ln + 6));
        } else if (l.find("extra in the measured log:") != std::string::npos || l.find("resized:") != std::string::npos ||
                   l.find("swapped:") != std::string::npos) {
            ++other;
        }
    }
    // Exact: every removed op reported once, as the same op (op and size), at its line or, where
    // equally good alignments exist (an op removed from "X Y X" leaves "X" whichever two went),
    // within a few lines of it. Each report claims the nearest unclaimed removed op.
    std::sort(reported.begin(), reported.end());
    std::vector<bool> claimed(removed.size(), false);
    size_t at_line = 0, nearby = 0, unexplained = 0;
    for (long line : reported) {
        if (line < 1 || line > lines) {
            ++unexplained;
            continue;
        }
        auto it = std::lower_bound(removed.begin(), removed.end(), line - kNearby);
        long best = -1;
        for (; it != removed.end() && *it <= line + kNearby; ++it) {
            size_t k = static_cast<size_t>(it - removed.begin());
            if (claimed[k] || key_of_line(*it) != key_of_line(line)) continue;
            if (best < 0 || std::labs(*it - line) < std::labs(removed[static_cast<size_t>(best)] - line)) best = static_cast<long>(k);
        }
        if (best < 0) {
            ++unexplained;
            continue;
        }
        claimed[static_cast<size_t>(best)] = true;
        (removed[static_cast<size_t>(best)] == line ? at_line : nearby)++;
    }
    const bool exact = reported.size() == removed.size() && unexplained == 0 && other == 0;
    std::printf("  wall time median of 3: %.2f s   peak RSS: %.0f MiB   (targets: <= 10 s, <= 1024 MiB)\n", secs[1],
                static_cast<double>(rss) / 1024.0);
    std::printf("  removed ops reported: %zu of %zu (%zu at their line, %zu at an equally good place within %ld lines), "
                "unexplained: %zu, other differences: %ld -> %s\n",
                reported.size(), removed.size(), at_line, nearby, kNearby, unexplained, other, exact ? "exact" : "NOT EXACT");
    fs::remove_all(dir);
    return exact ? 0 : 1;
}
