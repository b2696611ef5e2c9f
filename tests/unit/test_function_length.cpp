// The shape of the sources: no function of sim/, runtime/ or validate/ is longer than 80 lines
// (issue 27: a function that long holds more than one concern). The scanner below finds function
// bodies by their braces, with comments, string and character literals and preprocessor lines left
// out; a lambda or a local table counts towards the function it is written in.
#include "test_helpers.hpp"

#include <cctype>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace zerosim {
namespace {

constexpr int kMaxFunctionLines = 80;

struct LongFunction {
    std::string where;   // file:line of the opening brace
    int lines = 0;       // from the line of the opening brace to the line of the closing one
};

// The source with comments, literals and preprocessor lines blanked (newlines kept, so line
// numbers stay), so that braces and parentheses in them are not counted.
std::string code_only(const std::string& src) {
    std::string out(src.size(), ' ');
    enum { Code, Line, Block, Str, Chr, Pre } st = Code;
    bool line_start = true;
    for (size_t i = 0; i < src.size(); ++i) {
        const char c = src[i], n = i + 1 < src.size() ? src[i + 1] : '\0';
        if (c == '\n') {
            out[i] = '\n';
            if (st == Line || (st == Pre && (i == 0 || src[i - 1] != '\\'))) st = Code;
            line_start = true;
            continue;
        }
        if (st == Code && line_start && c == '#') st = Pre;
        if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
        switch (st) {
            case Code:
                if (c == '/' && n == '/') st = Line;
                else if (c == '/' && n == '*') { st = Block; ++i; }
                else if (c == '"' && i >= 1 && src[i - 1] == 'R' && n == '(') return out;   // raw strings: none in the tree
                else if (c == '"') st = Str;
                else if (c == '\'' && !(i >= 1 && std::isxdigit(static_cast<unsigned char>(src[i - 1])))) st = Chr;
                else out[i] = c;
                break;
            case Block: if (c == '*' && n == '/') { st = Code; ++i; } break;
            case Str: if (c == '\\') ++i; else if (c == '"') st = Code; break;
            case Chr: if (c == '\\') ++i; else if (c == '\'') st = Code; break;
            case Line: case Pre: break;
        }
    }
    return out;
}

// Whether the text before a '{' (back to the last ';', '{' or '}') opens a function body rather
// than a namespace, a class, an enum or an initializer.
bool opens_function(std::string head) {
    while (!head.empty() && std::isspace(static_cast<unsigned char>(head.back()))) head.pop_back();
    if (head.empty() || head.find(')') == std::string::npos) return false;
    const size_t paren = head.find('(');
    const std::string before = head.substr(0, paren);
    for (const char* word : {"namespace", "struct", "class", "enum", "union"}) {
        const size_t at = before.find(word);
        if (at != std::string::npos && (at == 0 || !std::isalnum(static_cast<unsigned char>(before[at - 1])))) return false;
    }
    return before.find('=') == std::string::npos;   // `x = f(...) {` is no function head
}

std::vector<LongFunction> long_functions(const std::string& name, const std::string& src) {
    const std::string code = code_only(src);
    std::vector<LongFunction> found;
    int line = 1, depth = 0, fn_depth = -1, fn_line = 0;
    size_t head_start = 0;
    for (size_t i = 0; i < code.size(); ++i) {
        const char c = code[i];
        if (c == '\n') { ++line; continue; }
        if (c == '{') {
            if (fn_depth < 0 && opens_function(code.substr(head_start, i - head_start))) { fn_depth = depth; fn_line = line; }
            ++depth;
            head_start = i + 1;
        } else if (c == '}') {
            --depth;
            if (depth == fn_depth) {
                if (line - fn_line + 1 > kMaxFunctionLines)
                    found.push_back({name + ":" + std::to_string(fn_line), line - fn_line + 1});
                fn_depth = -1;
            }
            head_start = i + 1;
        } else if (c == ';') {
            head_start = i + 1;
        }
    }
    return found;
}

std::string lines_of(int n, const std::string& body_line) {
    std::string s;
    for (int i = 0; i < n; ++i) s += body_line + "\n";
    return s;
}

TEST(FunctionLength, ScannerCountsAFunctionFromItsOpeningToItsClosingBrace) {
    // 78 body lines + the two brace lines = 80: allowed; one more is not.
    const std::string ok = "int f(int a) {\n" + lines_of(78, "    a += 1;") + "}\n";
    const std::string too_long = "int f(int a) {\n" + lines_of(79, "    a += 1;") + "}\n";
    EXPECT_TRUE(long_functions("ok.cpp", ok).empty());
    auto found = long_functions("long.cpp", too_long);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].where, "long.cpp:1");
    EXPECT_EQ(found[0].lines, 81);
}

TEST(FunctionLength, ScannerSkipsNamespacesClassesTablesCommentsAndStrings) {
    // A namespace, a struct and a table at namespace scope are no functions, however long; braces
    // in comments and strings are not counted; a member function inside a struct is one.
    const std::string src = "namespace z {\nstruct S {\n" + lines_of(90, "    int x;") + "};\n" +
                            "const int kTable[] = {\n" + lines_of(90, "    1,") + "};\n" +
                            "struct T {\n  void g() {\n    // } a brace in a comment\n    const char* s = \"}{\";\n" +
                            lines_of(85, "    (void)s;") + "  }\n};\n}\n";
    auto found = long_functions("x.cpp", src);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].where, "x.cpp:" + std::to_string(2 + 90 + 1 + 1 + 90 + 1 + 2));
    EXPECT_EQ(found[0].lines, 1 + 2 + 85 + 1);
}

TEST(FunctionLength, NoFunctionOutsideTestsIsLongerThan80Lines) {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(ZEROSIM_CONFIGS_DIR).parent_path();
    std::vector<LongFunction> found;
    for (const char* part : {"sim", "runtime", "validate"}) {
        for (const auto& e : fs::recursive_directory_iterator(root / part)) {
            const std::string ext = e.path().extension().string();
            if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".cu")) continue;
            const std::string rel = fs::relative(e.path(), root).string();
            for (auto& f : long_functions(rel, test::read_file(e.path().string()))) found.push_back(f);
        }
    }
    std::string list;
    for (const auto& f : found) list += "  " + f.where + " (" + std::to_string(f.lines) + " lines)\n";
    EXPECT_TRUE(found.empty()) << found.size() << " functions over " << kMaxFunctionLines << " lines:\n" << list;
}

}  // namespace
}  // namespace zerosim
