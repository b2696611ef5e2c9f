// zerosim: the command-line front of sim/ and validate/. It builds the CLI11 app from one file per
// subcommand (command.hpp) and runs the one given.
// Exit codes (README "Exit codes", core/output.hpp): 0 success; 1 a failed verdict (validate) or a
// failed run (a sweep none of whose points could be predicted); 2 bad input, one line on stderr
// naming file and field; 3 a runtime fault once the input was accepted (out of memory, an output
// that cannot be written, an interrupt).
#include <iostream>
#include <new>

#include "command.hpp"
#include "core/cli_integers.hpp"
#include "core/output.hpp"

int main(int argc, char** argv) {
    using namespace zerosim::cli;
    CLI::App app{"zerosim: what DeepSpeed ZeRO puts on the network, op by op"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "zerosim 0.1.0 (DeepSpeed releases 0.14.2 to 0.19.5, default 0.19.5)");
    const Command commands[] = {add_schedule(app), add_predict(app),  add_bench(app),    add_memory(app),   add_explain(app),
                                add_sweep(app),    add_report(app),   add_validate(app), add_calibrate(app), add_need(app)};
    zerosim::decimal_integer_options(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = parse_error(app, e);
        return rc ? rc : zerosim::check_standard_output("zerosim");
    }
    // Ctrl-C names itself (one line, exit 3) instead of the shell's bare 130, and removes a
    // half-written output's temporary.
    zerosim::install_interrupt_report("zerosim");
    try {
        for (const auto& c : commands)
            if (app.got_subcommand(c.app)) return c.run();
    } catch (const std::bad_alloc&) {
        std::cerr << "zerosim: error: out of memory\n";
        return zerosim::kExitRuntimeFault;
    }
    return 1;
}
