// The config keys of the releases after v0.14.2 (ds_config_keys.hpp later_keys() says which
// release brings each): what each changes on the network, and how zerosim treats it.
#include <algorithm>
#include <string>
#include <vector>

#include "ds_config_keys.hpp"

namespace zerosim {

namespace {

bool written_true(const JsonField& s, const char* key) {
    return s.has(key) && !s.at(key).is_null() && s.at(key).as_bool();
}

// A key of a later release that changes the collectives in a way the schedule does not have yet:
// refused by name, with the release and pull request that brought it.
[[noreturn]] void refuse_later_key(const JsonField& f, const std::string& section, const std::string& key,
                                   const std::string& effect, int stage, Release release) {
    const LaterKey* k = later_key(section, key);
    std::string since = k ? " (since " + k->since.name() + ", " + k->pr + ")" : "";
    std::string tail = stage == 3 || section.empty()
                           ? "the schedule would be that of the config without it"
                           : "DeepSpeed " + release.name() + " uses it at stage 3 only and ignores it at stage " +
                                 std::to_string(stage) + ", so remove it";
    f.fail_here(key + since + " " + effect + ", which zerosim does not model yet; " + tail);
}

// bf16: from v0.17.1 runtime/precision_config.py DeepSpeedBF16Config, a DeepSpeedConfigModel
// (extra keys forbidden); before, runtime/config.py read only bf16.enabled from a plain dict.
void read_bf16(const JsonField& root, DsConfig& c) {
    const char* name = root.has("bf16") ? "bf16" : root.has("bfloat16") ? "bfloat16" : nullptr;
    const bool new_default = c.release >= Release{0, 19, 3};   // #8035: default true from v0.19.3
    c.bf16_check_grad_overflow = new_default;
    if (!name || root.at(name).is_null()) return;
    JsonField b = root.at(name);
    b.expect_object();
    const bool strict = c.release >= Release{0, 17, 1};
    for (auto it = b.raw().begin(); it != b.raw().end(); ++it) {
        const std::string& key = it.key();
        if (key == "enabled") continue;
        const LaterKey* later = later_key("bf16", key);
        if (later && later->since <= c.release) continue;
        if (later) {
            c.ignored_keys.push_back(std::string(name) + "." + key + " (DeepSpeed " + c.release.name() +
                                     " does not read it; it arrives in " + later->since.name() + ", " + later->pr + ")");
        } else if (strict) {
            b.at(key).fail_here("DeepSpeed " + c.release.name() +
                                " refuses keys bf16 does not have (runtime/precision_config.py DeepSpeedBF16Config: "
                                "enabled, immediate_grad_update, check_grad_overflow)");
        } else {
            c.ignored_keys.push_back(std::string(name) + "." + key);
        }
    }
    if (strict && b.has("check_grad_overflow") && !b.at("check_grad_overflow").is_null())
        c.bf16_check_grad_overflow = b.at("check_grad_overflow").as_bool();
}

// log_level (v0.19.3, #8067): the DeepSpeed logger's level, applied before the engine's first
// collective (engine.py). It changes which lines the log holds, not what is sent.
void read_log_level(const JsonField& root, DsConfig& c) {
    if (!root.has("log_level") || c.release < Release{0, 19, 3} || root.at("log_level").is_null()) return;
    auto f = root.at("log_level");
    std::string v = f.as_string();
    std::string lower = v;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    // utils/logging.py set_log_level_from_string: logging's level names.
    static const std::vector<std::string> levels = {"debug", "info", "warning", "error", "critical"};
    if (std::find(levels.begin(), levels.end(), lower) == levels.end())
        f.fail_here("expected one of \"debug\", \"info\", \"warning\", \"error\", \"critical\", found \"" + v + "\"");
    c.log_level = lower;
}

// torch_autocast (v0.17.2, #6993): per-dtype gradient buckets in dtype order and stage-3 fetches
// in the autocast dtype (deepspeed-releases.md B8).
void read_torch_autocast(const JsonField& root, const DsConfig& c) {
    if (!root.has("torch_autocast") || c.release < Release{0, 17, 2} || root.at("torch_autocast").is_null()) return;
    auto t = root.at("torch_autocast");
    t.expect_object();
    if (written_true(t, "enabled"))
        refuse_later_key(t.at("enabled"), "", "torch_autocast",
                         "sends Linear parameters and gradients in the autocast dtype, in one bucket per dtype",
                         c.zero.stage, c.release);
}

// The zero_optimization keys of later releases that change stage 3's collectives.
void read_zero_later_keys(const JsonField& root, const DsConfig& c) {
    if (!root.has("zero_optimization")) return;
    auto z = root.at("zero_optimization");
    const int stage = c.zero.stage;
    auto known = [&](const char* key) {
        const LaterKey* k = later_key("zero_optimization", key);
        return z.has(key) && !z.at(key).is_null() && k && k->since <= c.release;
    };
    for (const char* key : {"stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params"})
        if (known(key) && z.at(key).as_bool())
            refuse_later_key(z.at(key), "zero_optimization", key,
                             "turns each multi-parameter fetch into an all_reduce of the padded parameters", stage,
                             c.release);
    for (const char* key : {"stage3_module_granularity_threshold", "module_granularity_threshold"})
        if (known(key) && z.at(key).as_integer_in(0, INT64_MAX) > 0)
            refuse_later_key(z.at(key), "zero_optimization", key,
                             "makes fine-grained modules leaves, fetched whole in fewer, larger gathers", stage, c.release);
    for (const char* key : {"stage3_allgather_sequential", "allgather_sequential"})
        if (known(key) && z.at(key).as_bool())
            refuse_later_key(z.at(key), "zero_optimization", key, "gathers each fetched parameter on its own", stage,
                             c.release);
    if (known("zeropp_loco_param"))
        refuse_later_key(z.at("zeropp_loco_param"), "zero_optimization", "zeropp_loco_param",
                         "sends qgZ's gradients through LoCo's all_to_all", stage, c.release);
    if (known("enable_sanity_checks") && z.at("enable_sanity_checks").as_bool())
        refuse_later_key(z.at("enable_sanity_checks"), "zero_optimization", "enable_sanity_checks",
                         "adds two broadcasts per reduced gradient bucket", stage, c.release);
    if (known("zenflow"))
        refuse_later_key(z.at("zenflow"), "zero_optimization", "zenflow",
                         "replaces the optimizer step with ZenFlow's selective updates", stage, c.release);
    if (known("leaf_module")) {
        auto l = z.at("leaf_module");
        l.expect_object();
        // runtime/zero/leaf_module_config.py DeepSpeedZeroLeafModuleConfig (extra keys forbidden).
        for (auto it = l.raw().begin(); it != l.raw().end(); ++it) {
            const std::string& key = it.key();
            if (key != "classes" && key != "names" && key != "name_suffixes")
                l.at(key).fail_here("DeepSpeed " + c.release.name() +
                                    " refuses keys leaf_module does not have (classes, names, name_suffixes)");
            auto list = l.at(key);
            list.expect_array();
            if (list.size() > 0)
                refuse_later_key(list, "zero_optimization", "leaf_module",
                                 "makes the named modules leaves, fetched whole in fewer, larger gathers", stage,
                                 c.release);
        }
    }
}

}  // namespace

void read_release_keys(const JsonField& root, DsConfig& c) {
    read_bf16(root, c);
    read_log_level(root, c);
    read_torch_autocast(root, c);
    read_zero_later_keys(root, c);
}

}  // namespace zerosim
