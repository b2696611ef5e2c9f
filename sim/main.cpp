// zerosim: the command-line front of sim/ (and, as they arrive, validate/).
// Exit codes: 0 success, 2 bad input (one line on stderr naming file and field), 1 other failure.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/ds_config.hpp"
#include "sim/model.hpp"
#include "sim/outputs/schedule_outputs.hpp"
#include "sim/schedule.hpp"

using namespace zerosim;

namespace {

int input_error(const Error& e) {
    std::cerr << "zerosim: error: " << e.what() << '\n';
    return 2;
}

// Parses "1,3,5" into step indices.
Result<std::vector<int>> parse_step_list(const std::string& text) {
    std::vector<int> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        try {
            size_t used = 0;
            int v = std::stoi(item, &used);
            if (used != item.size()) throw std::invalid_argument(item);
            out.push_back(v);
        } catch (const std::exception&) {
            return Error{"", "--overflow-steps", "expected comma-separated step numbers, found '" + item + "'"};
        }
    }
    return out;
}

// Writes to -o FILE through a temporary file and a rename, so a failed run leaves no half file;
// refuses to write over an input.
int emit(const std::string& path, const std::vector<std::string>& inputs, const std::function<void(std::ostream&)>& write) {
    if (path.empty() || path == "-") {
        write(std::cout);
        std::cout.flush();
        return std::cout ? 0 : 1;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& in : inputs)
        if (fs::exists(path, ec) && fs::equivalent(path, in, ec))
            return input_error(Error{path, "-o", "is one of the inputs; zerosim never overwrites what it was given"});
    std::string tmp = path + ".tmp-zerosim";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return input_error(Error{path, "-o", "cannot open for writing"});
        write(f);
        f.flush();
        if (!f) {
            fs::remove(tmp, ec);
            std::cerr << "zerosim: error: " << path << ": write failed\n";
            return 1;
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        std::cerr << "zerosim: error: " << path << ": cannot write: " << ec.message() << '\n';
        return 1;
    }
    return 0;
}

struct ScheduleArgs {
    std::string ds_config;
    std::string model;
    int64_t world = 0;
    int steps = 2;
    int64_t seq_len = 0;
    std::string format = "table";
    std::string output;
    std::string overflow_steps;
    bool log_summary = false;
    bool compute = false;
};

int run_schedule(const ScheduleArgs& a) {
    auto cfg = load_ds_config(a.ds_config);
    if (!cfg) return input_error(cfg.error());
    if (!cfg->ignored_keys.empty()) {
        std::string keys;
        for (const auto& k : cfg->ignored_keys) keys += (keys.empty() ? "" : ", ") + k;
        std::cerr << "zerosim: warning: " << a.ds_config << ": ignoring keys zerosim does not know: " << keys << '\n';
    }
    if (cfg->zero.offload_optimizer || cfg->zero.offload_param)
        std::cerr << "zerosim: warning: " << a.ds_config
                  << ": offload_optimizer/offload_param are not modelled; the schedule is that of the same config without offload\n";
    auto model = load_model(a.model);
    if (!model) return input_error(model.error());
    ScheduleOptions opt;
    opt.world = a.world;
    opt.steps = a.steps;
    opt.seq_len = a.seq_len;
    auto steps = parse_step_list(a.overflow_steps);
    if (!steps) return input_error(steps.error());
    opt.overflow_steps = steps.value();
    auto sched = build_schedule(model.value(), cfg.value(), opt);
    if (!sched) return input_error(sched.error());
    const Schedule& s = sched.value();
    return emit(a.output, {a.ds_config, a.model}, [&](std::ostream& out) {
        if (a.format == "deepspeed") {
            DeepSpeedLogOptions o;
            o.log_summary = a.log_summary;
            write_schedule_deepspeed(out, s, o);
        } else if (a.format == "json") {
            write_schedule_json(out, s);
        } else {
            TableOptions o;
            o.compute = a.compute;
            write_schedule_table(out, s, o);
        }
    });
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"zerosim: what DeepSpeed ZeRO puts on the network, op by op"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "zerosim 0.1.0 (DeepSpeed dialect 0.14.2)");

    ScheduleArgs sa;
    auto* sched = app.add_subcommand(
        "schedule", "List every collective (and compute segment) ZeRO issues for a model, config and world size");
    sched->add_option("--ds-config", sa.ds_config, "DeepSpeed config JSON, as passed to deepspeed.initialize")->required();
    sched->add_option("--model", sa.model, "Hugging Face config.json (gpt2, gpt_neox, llama...) or a parameter-list JSON")
        ->required();
    sched->add_option("--world", sa.world, "Data-parallel world size (number of ranks)")->required();
    sched->add_option("--steps", sa.steps, "Optimizer steps to list")->capture_default_str();
    sched->add_option("--seq-len", sa.seq_len, "Sequence length for compute estimates (default: the model's, else 1024)");
    sched->add_option("--format", sa.format, "deepspeed (comms_logger lines), table, or json (the schedule IR)")
        ->check(CLI::IsMember({"deepspeed", "table", "json"}))
        ->capture_default_str();
    sched->add_option("-o,--output", sa.output, "Write to this file instead of standard output");
    sched->add_option("--overflow-steps", sa.overflow_steps, "fp16: comma-separated steps (0-based) whose gradients overflow");
    sched->add_flag("--log-summary", sa.log_summary, "deepspeed format: end with deepspeed.comm.log_summary()'s table");
    sched->add_flag("--compute", sa.compute, "table format: include compute segments");

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
        if (app.got_subcommand(sched)) return run_schedule(sa);
    } catch (const std::bad_alloc&) {
        std::cerr << "zerosim: error: out of memory\n";
        return 1;
    }
    return 1;
}
