// Runs one expected-output case of the command line (tests/cli/cases/NAME.case, format in
// tests/cli/README.md): each "$" command runs under /bin/sh in a fresh working directory, and its
// exit code, stdout and stderr are compared with the lines the case expects. A mismatch prints a
// unified diff; --update (or ZEROSIM_CLI_UPDATE=1) rewrites the case with what the commands printed.
//
//   cli_case_runner --case FILE --work DIR --src SOURCE_DIR --shared SHARED_DIR --zerosim BIN
//                   [--zerorun BIN] [--update]
//   cli_case_runner --readme README.md --work DIR --src SOURCE_DIR --shared SHARED_DIR --zerosim BIN
//
// The working directory DIR/cwd holds links named as the tests name their inputs: inputs ->
// tests/cli/inputs, configs, topologies, fixtures -> tests/fixtures, reference -> SHARED/reference.
// Paths in messages therefore read the same on every machine. DIR/bin, first on PATH, holds
// zerosim (and zerorun).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// One expected output line: exact text, or (">~", "2>~") an ECMAScript regex for the whole line.
struct Expect {
    bool pattern = false;
    std::string text;
};

struct Step {
    std::vector<std::string> preamble;  // comment and blank lines before the "$" line, verbatim
    std::vector<std::string> command;   // the "$" line and its "\" continuation lines, without "$ "
    int line = 0;                       // where the "$" line is in the case file
    int exit_code = 0;
    std::vector<Expect> out, err;
};

struct Case {
    std::vector<Step> steps;
    std::vector<std::string> trailer;  // comments after the last expectation
};

[[noreturn]] void fail_usage(const std::string& why) {
    std::cerr << "cli_case_runner: " << why << "\n";
    std::exit(2);
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// "> text" and ">" alone (an empty line); the same after "2>", ">~", "2>~".
bool take_prefix(const std::string& line, const std::string& prefix, std::string& rest) {
    if (line == prefix) {
        rest.clear();
        return true;
    }
    if (!starts_with(line, prefix + " ")) return false;
    rest = line.substr(prefix.size() + 1);
    return true;
}

Case parse_case(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail_usage("cannot read " + path);
    Case c;
    std::vector<std::string> comments;
    std::string line, rest;
    int n = 0;
    bool continued = false;
    while (std::getline(in, line)) {
        ++n;
        if (continued) {
            c.steps.back().command.push_back(line);
            continued = !line.empty() && line.back() == '\\';
            continue;
        }
        if (line.empty() || line[0] == '#') {
            comments.push_back(line);
        } else if (starts_with(line, "$ ")) {
            Step s;
            s.preamble = std::move(comments);
            comments.clear();
            s.command.push_back(line.substr(2));
            s.line = n;
            continued = line.back() == '\\';
            c.steps.push_back(std::move(s));
        } else if (c.steps.empty()) {
            fail_usage(path + ":" + std::to_string(n) + ": an expectation before the first '$' command");
        } else if (starts_with(line, "! exit ")) {
            c.steps.back().exit_code = std::atoi(line.c_str() + 7);
        } else if (take_prefix(line, ">~", rest)) {
            c.steps.back().out.push_back({true, rest});
        } else if (take_prefix(line, ">", rest)) {
            c.steps.back().out.push_back({false, rest});
        } else if (take_prefix(line, "2>~", rest)) {
            c.steps.back().err.push_back({true, rest});
        } else if (take_prefix(line, "2>", rest)) {
            c.steps.back().err.push_back({false, rest});
        } else {
            fail_usage(path + ":" + std::to_string(n) + ": not a case line (see tests/cli/README.md): " + line);
        }
        if (!comments.empty() && !c.steps.empty() && line[0] != '#' && !line.empty() && !starts_with(line, "$ "))
            fail_usage(path + ":" + std::to_string(n) + ": comments go before a '$' command, not among its expected lines");
    }
    c.trailer = std::move(comments);
    if (c.steps.empty()) fail_usage(path + ": no '$' command");
    return c;
}

// The README as a test (--readme): every indented example that starts with "$ " and is followed by
// output lines is a step whose stdout and stderr together (as a terminal shows them) must be those
// lines exactly. A command is its "$" line and the lines a backslash at the end continues to; its output ends at a
// blank or unindented line or the next "$". "zerosim SUB ... ARGS" repeats the previous command's
// arguments, as the README abbreviates a command shown just before. An output line "..." alone
// stands for lines left out (any number); every other shown line is exact and in order, with
// nothing between it and its neighbours. Examples without output are not run (they write files,
// or stand for a user's own inputs).
Case parse_readme(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail_usage("cannot read " + path);
    Case c;
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    const std::string indent = "    ";
    std::string previous;   // the last command, joined, for "..."
    for (size_t i = 0; i < lines.size(); ++i) {
        if (!starts_with(lines[i], indent + "$ ")) continue;
        Step s;
        s.line = static_cast<int>(i + 1);
        std::string joined;
        for (bool more = true; more && i < lines.size(); ++i) {
            std::string part = lines[i].substr(std::min(lines[i].size(), indent.size()));
            if (s.command.empty()) part = part.substr(2);
            more = !part.empty() && part.back() == '\\';
            joined += (joined.empty() ? "" : " ") + (more ? part.substr(0, part.size() - 1) : part);
            s.command.push_back(part);
        }
        if (size_t dots = joined.find(" ... "); dots != std::string::npos) {
            size_t sub_end = previous.find(' ', previous.find(' ') + 1);
            if (previous.empty() || sub_end == std::string::npos) fail_usage(path + ":" + std::to_string(s.line) + ": '...' with no command before");
            joined = joined.substr(0, dots + 1) + previous.substr(sub_end + 1) + joined.substr(dots + 4);
        }
        previous = joined;
        for (; i < lines.size() && starts_with(lines[i], indent) && !starts_with(lines[i], indent + "$ "); ++i)
            s.out.push_back({false, lines[i].substr(indent.size())});
        --i;   // the loop's ++i comes back to the line that ended the output
        if (s.out.empty()) continue;
        s.command = {"{ " + joined + " ; } 2>&1"};
        c.steps.push_back(std::move(s));
    }
    if (c.steps.empty()) fail_usage(path + ": no example with shown output");
    return c;
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) {
            lines.push_back(text.substr(start));
            lines.push_back("\\ no newline at end of output");
            break;
        }
        lines.push_back(text.substr(start, nl - start));
        start = nl + 1;
    }
    return lines;
}

bool matches(const Expect& e, const std::string& actual) {
    if (!e.pattern) return e.text == actual;
    try {
        return std::regex_match(actual, std::regex(e.text));
    } catch (const std::regex_error&) {
        return false;
    }
}

// The README's comparison: the shown lines, where "..." stands for any run of lines; "" when the
// output is as shown, else what was shown and what was printed. The runs between the "..." are
// matched leftmost, the last one at the end unless a "..." follows it.
std::string excerpt_diff(const std::vector<Expect>& shown, const std::vector<std::string>& act) {
    std::vector<std::vector<std::string>> runs(1);
    for (const auto& e : shown) {
        if (e.text == "...") runs.emplace_back();
        else runs.back().push_back(e.text);
    }
    auto at = [&](size_t pos, const std::vector<std::string>& run) {
        if (pos + run.size() > act.size()) return false;
        for (size_t k = 0; k < run.size(); ++k)
            if (act[pos + k] != run[k]) return false;
        return true;
    };
    size_t pos = 0;
    bool ok = true;
    for (size_t r = 0; ok && r < runs.size(); ++r) {
        const bool first = r == 0, last = r + 1 == runs.size();
        if (first || last) {   // anchored: at the start, or (a last run) at the end
            size_t where = first ? 0 : act.size() < runs[r].size() ? act.size() + 1 : act.size() - runs[r].size();
            ok = where >= pos && at(where, runs[r]) && (!first || !last || where + runs[r].size() == act.size());
            pos = where + runs[r].size();
            continue;
        }
        while (pos + runs[r].size() <= act.size() && !at(pos, runs[r])) ++pos;
        ok = at(pos, runs[r]);
        pos += runs[r].size();
    }
    if (ok) return "";
    std::ostringstream out;
    out << "--- shown in the README (\"...\": lines left out)\n";
    for (const auto& e : shown) out << "  " << e.text << "\n";
    out << "+++ printed\n";
    for (const auto& l : act) out << "  " << l << "\n";
    return out.str();
}

std::string expect_text(const Expect& e) { return (e.pattern ? "~" : "") + e.text; }

// Longest common subsequence of expected and actual lines (a pattern line matches the lines it
// accepts). aligned[j] is the expected line actual line j is paired with, or -1.
std::vector<int> align(const std::vector<Expect>& exp, const std::vector<std::string>& act) {
    size_t n = exp.size(), m = act.size();
    std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;)
            lcs[i][j] = matches(exp[i], act[j]) ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::vector<int> aligned(m, -1);
    size_t i = 0, j = 0;
    while (i < n && j < m) {
        if (matches(exp[i], act[j]) && lcs[i][j] == lcs[i + 1][j + 1] + 1) {
            aligned[j] = static_cast<int>(i);
            ++i, ++j;
        } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
            ++i;
        } else {
            ++j;
        }
    }
    return aligned;
}

// A unified diff (3 lines of context) from expected to actual; empty when they match.
std::string unified_diff(const std::vector<Expect>& exp, const std::vector<std::string>& act, const std::string& what) {
    auto aligned = align(exp, act);
    struct Edit {
        char tag;  // ' ', '-', '+'
        std::string text;
        size_t ei, ai;  // positions before this edit
    };
    // Between two aligned pairs (and before the end): the expected lines left out, then the
    // actual lines added, as diff -u orders them.
    std::vector<Edit> edits;
    size_t i = 0, j = 0;
    for (size_t next = 0; next <= act.size(); ++next) {
        if (next < act.size() && aligned[next] < 0) continue;
        size_t ei = next < act.size() ? static_cast<size_t>(aligned[next]) : exp.size();
        for (; i < ei; ++i) edits.push_back({'-', expect_text(exp[i]), i, j});
        for (; j < next; ++j) edits.push_back({'+', act[j], i, j});
        if (next == act.size()) break;
        edits.push_back({' ', act[j], i, j});
        ++i, ++j;
    }
    std::ostringstream out;
    const size_t ctx = 3;
    for (size_t k = 0; k < edits.size();) {
        if (edits[k].tag == ' ') {
            ++k;
            continue;
        }
        // One hunk: from 3 lines before this change to 3 lines after the last change that is
        // followed by fewer than 7 unchanged lines.
        size_t last = k;
        for (size_t t = k + 1; t < edits.size() && t - last <= 2 * ctx; ++t)
            if (edits[t].tag != ' ') last = t;
        size_t begin = k >= ctx ? k - ctx : 0, end = std::min(edits.size(), last + 1 + ctx);
        size_t ecount = 0, acount = 0;
        for (size_t t = begin; t < end; ++t) {
            ecount += edits[t].tag != '+';
            acount += edits[t].tag != '-';
        }
        if (out.tellp() == 0) out << "--- expected " << what << "\n+++ actual " << what << "\n";
        out << "@@ -" << edits[begin].ei + 1 << "," << ecount << " +" << edits[begin].ai + 1 << "," << acount << " @@\n";
        for (size_t t = begin; t < end; ++t) out << edits[t].tag << edits[t].text << "\n";
        k = end;
    }
    return out.str();
}

// In the AddressSanitizer build, SimGrid's context switches make ASan print a three-line notice
// ("ASan is ignoring requested __asan_handle_no_return", "False positive error reports may
// follow", "For details see ...") on stderr; it says nothing about the program and is left out
// of the comparison. Any other sanitizer report stays and fails the case.
std::vector<std::string> without_sanitizer_notices(std::vector<std::string> lines) {
    static const std::regex notice(R"(==\d+==WARNING: ASan is ignoring requested __asan_handle_no_return.*)");
    std::vector<std::string> out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (std::regex_match(lines[i], notice)) {
            if (i + 1 < lines.size() && lines[i + 1].rfind("False positive error reports may follow", 0) == 0) ++i;
            if (i + 1 < lines.size() && lines[i + 1].rfind("For details see https://github.com/google/sanitizers/issues/189", 0) == 0) ++i;
            continue;
        }
        out.push_back(lines[i]);
    }
    return out;
}

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs one command under /bin/sh in cwd, stdout and stderr into files; returns the exit status
// (128 + signal for a killed command, as a shell reports it).
int run_command(const std::string& command, const fs::path& cwd, const fs::path& out, const fs::path& err) {
    pid_t pid = fork();
    if (pid < 0) fail_usage("fork failed");
    if (pid == 0) {
        int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || null < 0 || chdir(cwd.c_str()) != 0) _exit(125);
        dup2(null, 0);
        dup2(o, 1);
        dup2(e, 2);
        execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The expected lines --update writes: an expected line actual line j was matched with stays as
// written (a pattern stays a pattern), any other line is written exactly.
std::vector<Expect> updated(const std::vector<Expect>& exp, const std::vector<std::string>& act) {
    auto aligned = align(exp, act);
    std::vector<Expect> out;
    for (size_t j = 0; j < act.size(); ++j) out.push_back(aligned[j] >= 0 ? exp[aligned[j]] : Expect{false, act[j]});
    return out;
}

void write_case(const std::string& path, const Case& c) {
    std::ostringstream out;
    for (const auto& s : c.steps) {
        for (const auto& l : s.preamble) out << l << "\n";
        out << "$ " << s.command[0] << "\n";
        for (size_t k = 1; k < s.command.size(); ++k) out << s.command[k] << "\n";
        if (s.exit_code != 0) out << "! exit " << s.exit_code << "\n";
        for (const auto& e : s.out) out << (e.pattern ? ">~" : ">") << (e.text.empty() ? "" : " " + e.text) << "\n";
        for (const auto& e : s.err) out << (e.pattern ? "2>~" : "2>") << (e.text.empty() ? "" : " " + e.text) << "\n";
    }
    for (const auto& l : c.trailer) out << l << "\n";
    std::ofstream(path, std::ios::binary) << out.str();
}

void link(const fs::path& target, const fs::path& name) {
    std::error_code ec;
    fs::create_symlink(target, name, ec);
    if (ec) fail_usage("cannot link " + name.string() + " -> " + target.string() + ": " + ec.message());
}

}  // namespace

int main(int argc, char** argv) {
    std::map<std::string, std::string> opt;
    bool update = std::getenv("ZEROSIM_CLI_UPDATE") && std::string(std::getenv("ZEROSIM_CLI_UPDATE")) == "1";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--update") update = true;
        else if (starts_with(a, "--") && i + 1 < argc) opt[a.substr(2)] = argv[++i];
        else fail_usage("unknown argument " + a);
    }
    const bool readme = opt.count("readme") > 0;
    if (readme && update) fail_usage("--update does not write the README: edit it by hand");
    if (readme) opt["case"] = opt["readme"];
    for (const char* need : {"case", "work", "src", "shared", "zerosim"})
        if (!opt.count(need)) fail_usage(std::string("missing --") + need + (std::string(need) == "case" ? " or --readme" : ""));
    Case c = readme ? parse_readme(opt["readme"]) : parse_case(opt["case"]);

    fs::path work = fs::absolute(opt["work"]), cwd = work / "cwd", bin = work / "bin";
    fs::remove_all(work);
    fs::create_directories(cwd);
    fs::create_directories(bin);
    fs::path src = fs::absolute(opt["src"]), shared = fs::absolute(opt["shared"]);
    link(src / "tests/cli/inputs", cwd / "inputs");
    link(src / "configs", cwd / "configs");
    link(src / "topologies", cwd / "topologies");
    link(src / "tests/fixtures", cwd / "fixtures");
    link(shared / "reference", cwd / "reference");
    link(shared, work / "shared");   // the README's own spelling, ../shared/reference/...
    link(fs::absolute(opt["zerosim"]), bin / "zerosim");
    if (opt.count("zerorun")) link(fs::absolute(opt["zerorun"]), bin / "zerorun");
    const char* path = std::getenv("PATH");
    setenv("PATH", (bin.string() + ":" + (path ? path : "/usr/bin:/bin")).c_str(), 1);
    setenv("LC_ALL", "C", 1);

    bool ok = true;
    for (size_t k = 0; k < c.steps.size(); ++k) {
        Step& s = c.steps[k];
        std::string command;
        for (const auto& l : s.command) command += (command.empty() ? "" : "\n") + l;
        fs::path out = work / ("stdout." + std::to_string(k)), err = work / ("stderr." + std::to_string(k));
        int code = run_command(command, cwd, out, err);
        // The README's examples run with stderr in stdout (as a terminal shows them): the sanitizer's
        // notice is left out there too.
        auto out_lines = readme ? without_sanitizer_notices(split_lines(read_all(out))) : split_lines(read_all(out));
        auto err_lines = without_sanitizer_notices(split_lines(read_all(err)));
        std::string diff = readme ? excerpt_diff(s.out, out_lines) + unified_diff(s.err, err_lines, "stderr")
                                  : unified_diff(s.out, out_lines, "stdout") + unified_diff(s.err, err_lines, "stderr");
        if (code != s.exit_code) diff += "exit code: expected " + std::to_string(s.exit_code) + ", got " + std::to_string(code) + "\n";
        if (update) {
            s.exit_code = code;
            s.out = updated(s.out, out_lines);
            s.err = updated(s.err, err_lines);
            if (!diff.empty()) std::cout << opt["case"] << ":" << s.line << ": updated\n";
            continue;
        }
        if (!diff.empty()) {
            ok = false;
            std::cout << opt["case"] << ":" << s.line << ": $ " << command << "\n" << diff;
        }
    }
    if (update) write_case(opt["case"], c);
    return ok ? 0 : 1;
}
