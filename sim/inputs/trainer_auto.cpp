// "auto" values of a Trainer's DeepSpeed config filled as the Trainer fills them
// (inputs/trainer_auto.hpp). Each rule cites the line of transformers/integrations/deepspeed.py
// (HfTrainerDeepSpeedConfig) it follows; the Trainer's defaults are TrainingArguments' own.
#include "inputs/trainer_auto.hpp"

#include "inputs/ds_config.hpp"

#include <functional>

namespace zerosim {

namespace {

Json* node_at(Json& doc, const std::string& dotted) {
    Json* n = &doc;
    size_t from = 0;
    while (true) {
        const size_t dot = dotted.find('.', from);
        const std::string key = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
        if (!n->is_object() || !n->contains(key)) return nullptr;
        n = &(*n)[key];
        if (dot == std::string::npos) return n;
        from = dot + 1;
    }
}

bool is_auto(const Json* n) { return n && n->is_string() && n->get<std::string>() == "auto"; }

// The Trainer compares with Python's != : numbers by value (1 == 1.0), lists item by item.
bool same_value(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    if (a.is_array() && b.is_array()) {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (!same_value(a[i], b[i])) return false;
        return true;
    }
    return a == b;
}

template <typename T>
std::optional<Json> given(const std::optional<T>& v) {
    return v ? std::optional<Json>(Json(*v)) : std::nullopt;
}

// HfTrainerDeepSpeedConfig.fill_match: an "auto" becomes the Trainer's value (the flag's, else the
// Trainer's default where zerosim takes it, else it is missing); a value written in the config must
// equal a flag given (the Trainer's mismatch error).
struct Filler {
    Json& doc;
    std::vector<std::string> missing, mismatches, defaulted;

    void match(const std::string& key, const std::optional<Json>& flag_value, const std::string& flag,
               const std::optional<Json>& trainer_default = std::nullopt) {
        Json* n = node_at(doc, key);
        if (!n) return;
        if (is_auto(n)) {
            if (flag_value) {
                *n = *flag_value;
            } else if (trainer_default) {
                *n = *trainer_default;
                defaulted.push_back(key + " = " + trainer_default->dump() + " (" + flag + ")");
            } else {
                missing.push_back(key + " (" + flag + ")");
            }
            return;
        }
        if (flag_value && !same_value(*n, *flag_value))
            mismatches.push_back(key + " = " + n->dump() + " vs " + flag + " " + flag_value->dump());
    }
    // fill_only: an "auto" filled, a written value left as it is.
    void fill_only(const std::string& key, const Json& value) {
        if (Json* n = node_at(doc, key); is_auto(n)) *n = value;
    }
};

// trainer_config_process: train_batch_size = world_size * per_device_train_batch_size *
// gradient_accumulation_steps. DeepSpeed derives exactly that product when the key is absent
// (runtime/config.py _configure_train_batch_size), so an "auto" is dropped, for every world a
// sweep tries, once the two values it needs are known.
void fill_train_batch(Filler& f, const TrainerArgs& t) {
    Json* n = node_at(f.doc, "train_batch_size");
    if (!is_auto(n)) return;
    if (!t.per_device_train_batch_size || !t.gradient_accumulation_steps) {
        f.missing.push_back("train_batch_size (world x --per_device_train_batch_size x --gradient_accumulation_steps)");
        return;
    }
    f.doc.erase("train_batch_size");
    if (!f.doc.contains("train_micro_batch_size_per_gpu")) f.doc["train_micro_batch_size_per_gpu"] = *t.per_device_train_batch_size;
    if (!f.doc.contains("gradient_accumulation_steps")) f.doc["gradient_accumulation_steps"] = *t.gradient_accumulation_steps;
}

// trainer_config_finalize: the three keys sized from model.config.hidden_size; the two stage-3
// keys only at stage 3 (DeepSpeed refuses "auto" there otherwise). The prefetch bucket is truncated
// to a whole number as transformers does since #33402 (DeepSpeed >= 0.15 validates it as int).
void fill_from_hidden(Filler& f, int64_t H) {
    const Json* stage = node_at(f.doc, "zero_optimization.stage");
    const bool zero3 = stage && stage->is_number() && stage->get<double>() == 3;
    int64_t h2 = 0;
    const bool known = H > 0 && !__builtin_mul_overflow(H, H, &h2);
    const std::string why = known ? "" : " (the model's hidden_size; this model file gives none: write the number)";
    struct Rule {
        const char* key;
        bool applies;
        int64_t value;
    };
    const Rule rules[] = {{"zero_optimization.reduce_bucket_size", true, h2},
                          {"zero_optimization.stage3_prefetch_bucket_size", zero3, static_cast<int64_t>(0.9 * static_cast<double>(h2))},
                          {"zero_optimization.stage3_param_persistence_threshold", zero3, 10 * H}};
    for (const Rule& r : rules) {
        Json* n = node_at(f.doc, r.key);
        if (!is_auto(n)) continue;
        if (!r.applies)
            f.missing.push_back(std::string(r.key) + " (the Trainer fills it only at stage 3)");
        else if (!known)
            f.missing.push_back(r.key + why);
        else
            *n = r.value;
    }
}

// Every "auto" the rules left, by its dotted path (the scheduler's are named apart: zerosim does
// not read the scheduler's parameters, and the Trainer fills two of them from the dataset's length).
void find_autos(const Json& n, const std::string& path, const std::function<void(const std::string&)>& found) {
    if (is_auto(&n)) found(path);
    if (!n.is_object()) return;
    for (auto it = n.begin(); it != n.end(); ++it) find_autos(it.value(), path.empty() ? it.key() : path + "." + it.key(), found);
}

std::string joined(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : "; ") + i;
    return s;
}

}  // namespace

bool TrainerArgs::any_given() const {
    return per_device_train_batch_size || gradient_accumulation_steps || fp16 || bf16 || learning_rate || max_grad_norm ||
           weight_decay || adam_beta1 || adam_beta2 || adam_epsilon || warmup_steps || max_steps;
}

Result<Json> read_trainer_ds_config_document(const std::string& path, const TrainerArgs& t, int64_t hidden_size,
                                             std::vector<std::string>& notes) {
    auto doc = read_ds_config_document(path);
    if (!doc) return doc.error();
    if (!t.any_given() && !has_auto_value(doc.value())) return doc;
    if (auto e = fill_trainer_auto(doc.value(), path, t, hidden_size, notes)) return *e;
    return doc;
}

bool has_auto_value(const Json& doc) {
    bool any = false;
    find_autos(doc, "", [&](const std::string&) { any = true; });
    return any;
}

Status fill_trainer_auto(Json& doc, const std::string& file, const TrainerArgs& t, int64_t hidden_size,
                         std::vector<std::string>& notes) {
    Filler f{doc, {}, {}, {}};
    // trainer_config_process, in its order.
    f.match("train_micro_batch_size_per_gpu", given(t.per_device_train_batch_size), "--per_device_train_batch_size");
    f.match("gradient_accumulation_steps", given(t.gradient_accumulation_steps), "--gradient_accumulation_steps");
    fill_train_batch(f, t);
    f.match("gradient_clipping", given(t.max_grad_norm), "--max_grad_norm", Json(1.0));
    f.match("optimizer.params.lr", given(t.learning_rate), "--learning_rate", Json(5e-5));
    std::optional<Json> betas;
    if (t.adam_beta1 || t.adam_beta2) betas = Json::array({t.adam_beta1.value_or(0.9), t.adam_beta2.value_or(0.999)});
    f.match("optimizer.params.betas", betas, "--adam_beta1/--adam_beta2", Json::array({0.9, 0.999}));
    f.match("optimizer.params.eps", given(t.adam_epsilon), "--adam_epsilon", Json(1e-8));
    f.match("optimizer.params.weight_decay", given(t.weight_decay), "--weight_decay", Json(0.0));
    f.fill_only("scheduler.params.warmup_min_lr", Json(0));
    f.match("scheduler.params.warmup_max_lr", given(t.learning_rate), "--learning_rate", Json(5e-5));
    // Precision: the flags, or the Trainer's default of neither (fp32). Without either flag the
    // written values are left unchecked: a config that says bf16 is read as bf16.
    const bool precision_given = t.fp16 || t.bf16;
    // The Trainer runs DeepSpeed through accelerate, whose DeepSpeedPlugin.set_mixed_precision adds
    // the section of the precision asked for where the config has none ("bf16": {"enabled": true};
    // its fp16 section's "auto_cast" is left out: zerosim does not model it). Both at once the
    // Trainer refuses (TrainingArguments: "At most one of fp16 and bf16 can be True").
    if (t.fp16 && t.bf16) return Error{file, "--fp16/--bf16", "give one of them: the Trainer trains in one precision"};
    if (t.bf16 && !doc.contains("bf16")) doc["bf16"] = Json{{"enabled", true}};
    if (t.fp16 && !doc.contains("fp16")) doc["fp16"] = Json{{"enabled", true}};
    f.match("fp16.enabled", precision_given ? std::optional<Json>(Json(t.fp16)) : std::nullopt, "--fp16", Json(false));
    f.match("bf16.enabled", precision_given ? std::optional<Json>(Json(t.bf16)) : std::nullopt, "--bf16", Json(false));
    f.fill_only("amp.enabled", Json(false));   // apex amp: only with --fp16_backend apex, which zerosim does not model
    f.fill_only("amp.opt_level", Json("O1"));
    // trainer_config_finalize.
    fill_from_hidden(f, hidden_size);
    f.match("scheduler.params.warmup_num_steps", given(t.warmup_steps), "--warmup_steps", Json(0));
    if (t.max_steps) f.fill_only("scheduler.params.total_num_steps", Json(*t.max_steps));
    std::vector<std::string> unread;
    find_autos(doc, "", [&](const std::string& key) {
        for (const auto& m : f.missing)
            if (m.rfind(key + " ", 0) == 0) return;   // named above, with its flag
        if (key.rfind("scheduler.", 0) == 0)
            unread.push_back(key);
        else
            f.missing.push_back(key + " (not a value the Trainer fills)");
    });
    if (!f.mismatches.empty())
        return Error{file, f.mismatches.front().substr(0, f.mismatches.front().find(' ')),
                     "disagrees with the Trainer's flags, which the Trainer refuses (set it to \"auto\" or drop the flag): " +
                         joined(f.mismatches)};
    if (!f.missing.empty())
        return Error{file, f.missing.front().substr(0, f.missing.front().find(' ')),
                     "\"auto\" values the Hugging Face Trainer fills, still without a value; give: " + joined(f.missing)};
    if (!f.defaulted.empty())
        notes.push_back("\"auto\" filled with the Trainer's defaults (no flag given): " + joined(f.defaulted));
    if (!unread.empty())
        notes.push_back("\"auto\" left in " + joined(unread) + ": zerosim does not read the scheduler's parameters");
    return std::nullopt;
}

}  // namespace zerosim
