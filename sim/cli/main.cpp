// zerosim: the command-line front of sim/ and validate/. It builds the CLI11 app from one file per
// subcommand (command.hpp) and runs the one given.
// Exit codes: 0 success, 2 bad input (one line on stderr naming file and field), 1 other failure.
#include <iostream>
#include <new>

#include "command.hpp"

int main(int argc, char** argv) {
    using namespace zerosim::cli;
    CLI::App app{"zerosim: what DeepSpeed ZeRO puts on the network, op by op"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "zerosim 0.1.0 (DeepSpeed dialect 0.14.2)");
    const Command commands[] = {add_schedule(app), add_predict(app),  add_bench(app),    add_memory(app),   add_explain(app),
                                add_sweep(app),    add_report(app),   add_validate(app), add_calibrate(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return 2;
    }
    try {
        for (const auto& c : commands)
            if (app.got_subcommand(c.app)) return c.run();
    } catch (const std::bad_alloc&) {
        std::cerr << "zerosim: error: out of memory\n";
        return 1;
    }
    return 1;
}
