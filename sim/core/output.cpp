#include "core/output.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

namespace zerosim {

int write_output(const std::string& program, const std::string& path, const std::string& flag,
                 const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write) {
    if (path.empty() || path == "-") {
        write(std::cout);
        std::cout.flush();
        return std::cout ? 0 : 1;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& in : inputs)
        if (!in.empty() && fs::exists(path, ec) && fs::equivalent(path, in, ec))
            return print_input_error(program, Error{path, flag, "is one of the inputs; " + program +
                                                                    " never overwrites what it was given"});
    std::string tmp = path + ".tmp-" + program;
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return print_input_error(program, Error{path, flag, "cannot open for writing"});
        write(f);
        f.flush();
        if (!f) {
            fs::remove(tmp, ec);
            std::cerr << program << ": error: " << path << ": write failed\n";
            return 1;
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        std::cerr << program << ": error: " << path << ": cannot write: " << ec.message() << '\n';
        return 1;
    }
    return 0;
}

Status check_writable(const std::string& path, const std::string& flag) {
    if (path.empty() || path == "-") return std::nullopt;
    namespace fs = std::filesystem;
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir) || access(dir.c_str(), W_OK) != 0)
        return Error{path, flag, "cannot write here: " + dir.string() + " is not a writable folder"};
    return std::nullopt;
}

}  // namespace zerosim
