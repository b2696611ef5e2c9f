// The benchmarks' command lines: each takes --help (usage on stdout, exit 0) and refuses what it
// does not know with one line on stderr naming the argument (exit 2), as zerosim does with bad
// input. Header-only, so that the MPI benchmark under bench/runtime can use it too.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::bench {

struct Flag {
    const char* name;    // "--lines"
    const char* value;   // what follows it, "N"; nullptr for a switch
    const char* help;
};

class Args {
  public:
    // `about`: what the benchmark measures and prints, printed under the usage line by --help.
    Args(int argc, char** argv, const char* about, std::vector<Flag> flags)
        : program_(argc > 0 ? argv[0] : "bench"), flags_(std::move(flags)) {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--help" || a == "-h") {
                print_help(about);
                std::exit(0);
            }
            const Flag* f = find(a);
            if (!f) fail("unknown argument '" + a + "'");
            if (f->value && i + 1 >= argc) fail(a + " needs a value (" + f->value + ")");
            values_[a] = f->value ? argv[++i] : "";
        }
    }

    bool has(const char* name) const { return values_.count(name) > 0; }

    std::string text(const char* name, const std::string& fallback) const {
        auto it = values_.find(name);
        return it == values_.end() ? fallback : it->second;
    }

    // An integer in [lo, hi]; anything else is refused naming the flag.
    long long integer(const char* name, long long fallback, long long lo, long long hi) const {
        return has(name) ? parse_integer(name, text(name, ""), lo, hi) : fallback;
    }

    // A comma-separated list of integers in [lo, hi].
    std::vector<long long> integers(const char* name, const std::vector<long long>& fallback, long long lo, long long hi) const {
        if (!has(name)) return fallback;
        std::vector<long long> out;
        const std::string s = text(name, "");
        for (size_t at = 0; at <= s.size();) {
            size_t comma = s.find(',', at);
            if (comma == std::string::npos) comma = s.size();
            out.push_back(parse_integer(name, s.substr(at, comma - at), lo, hi));
            at = comma + 1;
        }
        return out;
    }

    [[noreturn]] void fail(const std::string& why) const {
        std::fprintf(stderr, "%s: %s (see --help)\n", program_.c_str(), why.c_str());
        std::exit(2);
    }

  private:
    const Flag* find(const std::string& a) const {
        for (const Flag& f : flags_)
            if (a == f.name) return &f;
        return nullptr;
    }

    long long parse_integer(const char* name, const std::string& s, long long lo, long long hi) const {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
            fail(std::string(name) + " '" + s + "': expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
        return v;
    }

    void print_help(const char* about) const {
        std::string line = "usage: " + program_;
        for (const Flag& f : flags_) line += std::string(" [") + f.name + (f.value ? std::string(" ") + f.value : "") + "]";
        std::printf("%s\n\n%s\n", line.c_str(), about);
        if (!flags_.empty()) std::printf("\n");
        for (const Flag& f : flags_) {
            const std::string lhs = std::string(f.name) + (f.value ? std::string(" ") + f.value : "");
            std::printf("  %-28s %s\n", lhs.c_str(), f.help);
        }
        std::printf("  %-28s %s\n", "--help, -h", "this text");
    }

    std::string program_;
    std::vector<Flag> flags_;
    std::map<std::string, std::string> values_;
};

}  // namespace zerosim::bench
