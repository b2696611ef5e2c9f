// Validating a long training run's log through `zerosim validate`, as a user runs it: wall time
// and peak memory (the child's getrusage), and the differences it reports against the edits made.
//
// The logs are real comms_logger lines: the shared reference run z3_default_w4 (DeepSpeed v0.14.2,
// ZeRO-3, 4 ranks) repeated whole in order (--shape whole, the issue's shape), or up to the end of
// its first step and then its later steps repeated (--shape steps), as a long run repeats its
// steps: the same op recurs thousands of times, where an aligner that guesses goes wrong. Cases:
//   identical  the log against itself: what reading and reporting cost without differences;
//   removed    every hundredth op removed (the issue's case): a shortest script is exactly those
//              ops missing and nothing else, since any script needs at least n - m edits;
//   mixed      ops removed, real ops from elsewhere inserted, ops resized in place, each edit
//              further from the next than the log's longest stretch of equal ops (so no two edits
//              can cancel or merge): exactly the edits made come back;
//   unrelated  the z3 log against the z1 run's log of the same length (logs that are not of one
//              run): it must end in bounded time and memory, saying when its script is not a minimum.
// The report's every difference is checked against the logs written: the ops it leaves matched
// must be equal, in order, on both sides (a valid script); its counts must equal the edits made;
// up to 200,000 lines a bit-parallel longest-common-subsequence oracle confirms the minimum.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cli_runner.hpp"
#include "formats/measured_logs.hpp"

namespace {

const char* kAbout =
    "zerosim validate on long real-shaped comms logs (z3_default_w4's ops repeated): per case and\n"
    "length the median wall time and peak RSS of the validator (targets at 1,000,000 lines: <= 10 s,\n"
    "<= 1024 MiB), the edits made and the differences reported, checked op by op (a valid script,\n"
    "the counts of the edits made, and up to 200,000 lines the minimum by an LCS oracle).\n"
    "Exit 1 when a check fails. Cases: identical, removed, mixed, unrelated.";

// One real op line and what the validator compares of it.
struct RealOp {
    std::string line, record, size;
};

struct Source {
    std::vector<RealOp> ops;
    std::vector<size_t> head, step;   // indices: the run up to its first step's end; its later steps
};

Source load_source(const std::string& path) {
    Source s;
    auto real = zerosim::read_log(path);
    if (!real || real->ops.empty()) {
        std::fprintf(stderr, "validate_bench: no comms_logger ops in %s\n", path.c_str());
        std::exit(1);
    }
    std::ifstream in(path);
    std::vector<std::string> all;
    for (std::string l; std::getline(in, l);) all.push_back(l);
    for (const auto& op : real->ops) {
        const bool later = op.phase.rfind("step", 0) == 0 && op.phase.rfind("step0.", 0) != 0;
        (later ? s.step : s.head).push_back(s.ops.size());
        s.ops.push_back({all.at(static_cast<size_t>(op.line - 1)), op.record, op.size_text});
    }
    if (s.step.empty()) s.step = s.head;
    return s;
}

// An op of a generated log: a real op, possibly with its printed size changed.
struct GenOp {
    const Source* src;
    size_t op;
    bool resized;
};

constexpr const char* kNewSize = "777.0 MB";   // a size the reference runs never print

std::string line_of(const GenOp& g) {
    const std::string& l = g.src->ops[g.op].line;
    if (!g.resized) return l;
    const size_t at = l.find("msg size: ") + 10, end = l.find(" |", at);
    return l.substr(0, at) + kNewSize + l.substr(end);
}
std::string record_of(const GenOp& g) { return g.src->ops[g.op].record; }
std::string key_of(const GenOp& g) { return record_of(g) + "|" + (g.resized ? kNewSize : g.src->ops[g.op].size); }

// "steps": the run up to its first step's end once, then its later steps repeated; "whole": the
// whole run's ops repeated, engine start included (the shape the issue measured).
bool g_whole_runs = true;

std::vector<GenOp> shaped(const Source& s, size_t n) {
    std::vector<GenOp> out;
    out.reserve(n);
    if (g_whole_runs) {
        for (size_t i = 0; out.size() < n; ++i) out.push_back({&s, i % s.ops.size(), false});
        return out;
    }
    for (size_t i = 0; i < s.head.size() && out.size() < n; ++i) out.push_back({&s, s.head[i], false});
    for (size_t i = 0; out.size() < n; ++i) out.push_back({&s, s.step[i % s.step.size()], false});
    return out;
}

// A predicted log with long runs of equal ops (a real model's identical layers): zerosim schedule of
// Llama-2-7B, ZeRO-3, 8 ranks, 3 steps, DeepSpeed v0.14.2's lines.
std::string llama_log(const std::string& dir) {
    const std::string cfg = dir + "/zero3.json", out = dir + "/llama.log";
    std::ofstream(cfg) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}})";
    zerosim::bench::run_cli({"schedule", "--deepspeed", "0.14.2", "--ds-config", cfg, "--model",
                             std::string(ZEROSIM_SOURCE_DIR) + "/configs/models/llama-2-7b.json", "--world", "8", "--steps", "3",
                             "--format", "deepspeed", "-o", out});
    return out;
}

size_t longest_equal_run(const std::vector<GenOp>& log) {
    size_t best = 0, run = 0;
    for (size_t i = 0; i < log.size(); ++i) {
        run = i > 0 && key_of(log[i]) == key_of(log[i - 1]) ? run + 1 : 1;
        best = std::max(best, run);
    }
    return best;
}

// Mixed edits stay further apart than the log's longest run of equal ops, so no two can cancel.
size_t g_spacing = 8;

struct Case {
    std::string name;
    std::vector<GenOp> pred, meas;
    size_t removed = 0, inserted = 0, resized = 0;
    bool counts_known = true;   // the edits made are the minimum (all but "unrelated")
};

Case make_case(const std::string& name, const Source& z3, const Source& z1, size_t n) {
    Case c;
    c.name = name;
    c.pred = shaped(z3, n);
    if (name == "identical") {
        c.meas = c.pred;
    } else if (name == "removed") {
        for (size_t i = 0; i < n; ++i)
            if (i % 100 == 99) ++c.removed;
            else c.meas.push_back(c.pred[i]);
    } else if (name == "unrelated") {
        c.meas = shaped(z1, n);
        c.counts_known = false;
    } else {   // mixed: about one edit per 100 ops, at least 8 ops apart; 5 removed : 3 inserted : 2 resized
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0, next = 0; i < n; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (i < next || x % 92 != 0) {
                c.meas.push_back(c.pred[i]);
                continue;
            }
            next = i + g_spacing;
            const uint64_t kind = (x >> 20) % 10;
            if (kind < 5) {
                ++c.removed;
            } else if (kind < 8) {
                c.meas.push_back(c.pred[(i + 97) % n]);   // a real op from elsewhere in the run
                c.meas.push_back(c.pred[i]);
                ++c.inserted;
            } else {
                c.meas.push_back({c.pred[i].src, c.pred[i].op, true});
                ++c.resized;
            }
        }
    }
    return c;
}

void write_log(const std::string& path, const std::vector<GenOp>& ops) {
    std::ofstream out(path);
    for (const GenOp& g : ops) out << line_of(g) << '\n';
    if (!out.flush()) {
        std::fprintf(stderr, "validate_bench: cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

// What the report says: its counts and, per difference, the log lines it names.
struct Reported {
    long matched = -1, missing = -1, extra = -1, resized = -1, swapped = -1;
    bool approximate = false;
    std::vector<long> missing_lines, extra_lines, swapped_lines;
    std::vector<std::pair<long, long>> resized_lines;
};

std::vector<long> lines_named(const std::string& l) {
    std::vector<long> out;
    for (size_t at = l.find("(line "); at != std::string::npos; at = l.find("(line ", at + 1)) out.push_back(std::atol(l.c_str() + at + 6));
    return out;
}

Reported read_report(const std::string& path) {
    Reported r;
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) {
        if (l.rfind("- structure: ", 0) == 0) {
            std::sscanf(l.c_str(), "- structure: %ld matched, %ld missing, %ld extra, %ld resized, %ld swapped", &r.matched, &r.missing,
                        &r.extra, &r.resized, &r.swapped);
        } else if (l.find("approximate:") != std::string::npos) {
            r.approximate = true;
        } else if (l.find("missing from the measured log:") != std::string::npos) {
            for (long n : lines_named(l)) r.missing_lines.push_back(n);
        } else if (l.find("extra in the measured log:") != std::string::npos) {
            for (long n : lines_named(l)) r.extra_lines.push_back(n);
        } else if (l.find("resized:") != std::string::npos) {
            auto n = lines_named(l);
            r.resized_lines.push_back(n.size() == 2 ? std::make_pair(n[0], n[1]) : std::make_pair(0L, 0L));
        } else if (l.find("swapped:") != std::string::npos) {
            for (long n : lines_named(l)) r.swapped_lines.push_back(n);
        }
    }
    return r;
}

// Whether the report is a valid edit script of the logs: every difference names a line of its
// log, once; resized ops keep their name; and the ops left over, in order, are equal on both
// sides. Swapped pairs name only their predicted lines, so a report with swaps is not checked.
std::string check_valid(const Case& c, const Reported& r) {
    if (r.swapped != 0) return "swaps reported: not checked";
    std::vector<char> gone_p(c.pred.size() + 1, 0), gone_m(c.meas.size() + 1, 0);
    auto take = [](std::vector<char>& gone, long line) {
        if (line < 1 || static_cast<size_t>(line) >= gone.size() || gone[static_cast<size_t>(line)]) return false;
        gone[static_cast<size_t>(line)] = 1;
        return true;
    };
    for (long l : r.missing_lines)
        if (!take(gone_p, l)) return "missing line " + std::to_string(l) + " named twice or out of the log";
    for (long l : r.extra_lines)
        if (!take(gone_m, l)) return "extra line " + std::to_string(l) + " named twice or out of the log";
    for (auto [p, m] : r.resized_lines) {
        if (!take(gone_p, p) || !take(gone_m, m)) return "resized lines " + std::to_string(p) + "/" + std::to_string(m) + " invalid";
        const GenOp &a = c.pred[static_cast<size_t>(p - 1)], &b = c.meas[static_cast<size_t>(m - 1)];
        if (record_of(a) != record_of(b) || key_of(a) == key_of(b)) return "resized line " + std::to_string(p) + " is not a resize";
    }
    size_t i = 0, j = 0;
    for (;; ++i, ++j) {
        while (i < c.pred.size() && gone_p[i + 1]) ++i;
        while (j < c.meas.size() && gone_m[j + 1]) ++j;
        if (i == c.pred.size() || j == c.meas.size()) break;
        if (key_of(c.pred[i]) != key_of(c.meas[j])) return "matched lines " + std::to_string(i + 1) + "/" + std::to_string(j + 1) + " differ";
    }
    if (i != c.pred.size() || j != c.meas.size()) return "the logs' matched ops do not pair up";
    return "";
}

// The longest common subsequence's length, bit-parallel (Allison and Dix, IPL 23, 1986).
long lcs_length(const std::vector<GenOp>& a, const std::vector<GenOp>& b) {
    std::map<std::string, std::vector<uint64_t>> match;
    const size_t words = (a.size() + 63) / 64;
    for (size_t i = 0; i < a.size(); ++i) match.try_emplace(key_of(a[i]), words, 0).first->second[i / 64] |= uint64_t{1} << (i % 64);
    std::vector<uint64_t> v(words, ~uint64_t{0});
    const std::vector<uint64_t> none(words, 0);
    for (const GenOp& o : b) {
        auto it = match.find(key_of(o));
        const std::vector<uint64_t>& m = it == match.end() ? none : it->second;
        uint64_t carry = 0;
        for (size_t w = 0; w < words; ++w) {
            const uint64_t u = v[w] & m[w], t = v[w] + u, sum = t + carry;
            carry = (t < v[w] || sum < t) ? 1 : 0;
            v[w] = sum | (v[w] & ~m[w]);
        }
    }
    long zeros = 0;
    for (size_t i = 0; i < a.size(); ++i) zeros += !((v[i / 64] >> (i % 64)) & 1);
    return zeros;
}

// The verdict on one case: "exact", or what is wrong.
std::string judge(const Case& c, const Reported& r) {
    if (r.matched < 0) return "NO STRUCTURE LINE in the report";
    const std::string invalid = check_valid(c, r);
    if (!invalid.empty() && r.swapped == 0) return "INVALID SCRIPT: " + invalid;
    const long total = static_cast<long>(c.pred.size()), matched = r.matched;
    // The report's matched ops include both ops of each swap; its common subsequence keeps one.
    if (matched + r.missing + r.resized != total) return "COUNTS DO NOT ADD UP";
    std::string minimum;
    if (c.pred.size() <= 200000) {
        const long lcs = lcs_length(c.pred, c.meas);
        const bool is_minimum = matched - r.swapped == lcs;
        minimum = is_minimum ? ", minimum (LCS oracle)" : ", NOT A MINIMUM (LCS " + std::to_string(lcs) + ")";
        if (!is_minimum && (c.counts_known || !r.approximate)) return "NOT EXACT" + minimum;
    }
    if (!c.counts_known) return std::string(r.approximate ? "valid, approximate (said so)" : "valid") + minimum;
    const bool exact = static_cast<size_t>(r.missing) == c.removed && static_cast<size_t>(r.extra) == c.inserted &&
                       static_cast<size_t>(r.resized) == c.resized && r.swapped == 0 && !r.approximate;
    return (exact ? "exact" : "NOT EXACT") + minimum;
}

}  // namespace

int main(int argc, char** argv) {
    zerosim::bench::Args args(argc, argv, kAbout,
                              {{"--lines", "N[,N...]", "log lengths (default 100000,1000000)"},
                               {"--case", "NAME[,NAME...]", "identical, removed, mixed, unrelated (default all)"},
                               {"--runs", "N", "runs per case, the median reported (default 3)"},
                               {"--shape", "whole|steps", "the run's ops repeated whole (default), or its first step once and its later steps repeated"},
                               {"--source", "reference|llama", "the run repeated: z3_default_w4's real log (default), or zerosim's predicted log "
                                                                "of Llama-2-7B ZeRO-3 on 8 ranks (runs of up to 65 equal ops)"},
                               {"--zerosim", "PATH", "the zerosim to measure (default this build's; another build to compare)"}});
    const std::string shape = args.text("--shape", "whole");
    if (shape != "whole" && shape != "steps") args.fail("--shape '" + shape + "': expected whole or steps");
    g_whole_runs = shape == "whole";
    const std::string binary = args.text("--zerosim", ZEROSIM_BINARY);
    if (access(binary.c_str(), X_OK) != 0) args.fail("--zerosim '" + binary + "': not an executable");
    const auto lengths = args.integers("--lines", {100000, 1000000}, 10, 20000000);
    const long runs = static_cast<long>(args.integer("--runs", 3, 1, 99));
    std::vector<std::string> cases;
    const std::string list = args.text("--case", "identical,removed,mixed,unrelated");
    for (size_t at = 0; at <= list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        cases.push_back(list.substr(at, comma - at));
        if (cases.back() != "identical" && cases.back() != "removed" && cases.back() != "mixed" && cases.back() != "unrelated")
            args.fail("--case '" + cases.back() + "': expected identical, removed, mixed or unrelated");
        at = comma + 1;
    }
    const std::string ref = std::string(ZEROSIM_SHARED_DIR) + "/reference/deepspeed-v0.14.2-cpu/";
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("zerosim-validate-bench-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string source = args.text("--source", "reference");
    if (source != "reference" && source != "llama") args.fail("--source '" + source + "': expected reference or llama");
    const Source z3 = load_source(source == "llama" ? llama_log(dir.string()) : ref + "z3_default_w4/rank0.log"),
                 z1 = load_source(ref + "z1_seed_w4/rank0.log");
    g_spacing = std::max<size_t>(8, longest_equal_run(shaped(z3, 100000)) + 1);
    const std::string pred = (dir / "predicted.log").string(), meas = (dir / "measured.log").string(), report = (dir / "report.md").string();
    std::printf("zerosim validate --what ops --format md (%s), logs of source '%s', shape '%s', medians of %ld runs; targets at "
                "1,000,000 lines: <= 10 s, <= 1024 MiB\n",
                binary.c_str(), source.c_str(), shape.c_str(), runs);
    std::printf("%-10s %9s %9s %9s  %-22s %-30s %s\n", "case", "lines", "seconds", "RSS MiB", "made (rm/ins/resz)",
                "reported (miss/extra/resz/swap)", "check");
    bool ok = true;
    for (long long n : lengths)
        for (const std::string& name : cases) {
            const Case c = make_case(name, z3, z1, static_cast<size_t>(n));
            write_log(pred, c.pred);
            write_log(meas, c.meas);
            std::vector<double> secs;
            long rss = 0;
            for (long r = 0; r < runs; ++r) {
                auto f = zerosim::bench::run_cli({"validate", pred, meas, "--what", "ops", "--format", "md", "-o", report}, {0, 1}, binary);
                secs.push_back(f.seconds);
                rss = std::max(rss, f.max_rss_kib);
            }
            std::sort(secs.begin(), secs.end());
            const Reported r = read_report(report);
            const std::string verdict = judge(c, r);
            ok = ok && (verdict.rfind("exact", 0) == 0 || verdict.rfind("valid", 0) == 0);
            char made[64], got[64];
            std::snprintf(made, sizeof made, "%zu/%zu/%zu", c.removed, c.inserted, c.resized);
            std::snprintf(got, sizeof got, "%ld/%ld/%ld/%ld", r.missing, r.extra, r.resized, r.swapped);
            std::printf("%-10s %9lld %9.2f %9.0f  %-22s %-30s %s\n", name.c_str(), n, secs[secs.size() / 2],
                        static_cast<double>(rss) / 1024.0, c.counts_known ? made : "-", got, verdict.c_str());
            std::fflush(stdout);
        }
    fs::remove_all(dir);
    return ok ? 0 : 1;
}
