// The registry of collective models by name (timing/collective_model.hpp): the built-in models
// first, in the order the topology error lists them, then those registered at run time.
#include "timing/collective_model.hpp"

#include <utility>

namespace zerosim {

namespace {

struct NamedModel {
    std::string name;
    const CollectiveModel* model;
};

std::vector<NamedModel>& registered_models() {
    static std::vector<NamedModel> models{{kNcclModelName, &nccl_collective_model()},
                                          {kOpenMpiTunedModelName, &openmpi_tuned_collective_model()}};
    return models;
}

}  // namespace

const CollectiveModel* collective_model_named(const std::string& name) {
    for (const NamedModel& m : registered_models())
        if (m.name == name) return m.model;
    return nullptr;
}

const CollectiveModel& collective_model_of(const Topology& t) {
    const CollectiveModel* m = collective_model_named(t.collective_model);
    return m ? *m : nccl_collective_model();
}

std::string collective_model_choices() {
    const std::vector<NamedModel>& models = registered_models();
    std::string out;
    for (size_t i = 0; i < models.size(); ++i)
        out += (i == 0 ? "" : i + 1 == models.size() ? ", or " : ", ") + models[i].model->choice_text();
    return out;
}

CollectiveModelRegistration::CollectiveModelRegistration(std::string name, const CollectiveModel& model) : name_(std::move(name)) {
    registered_models().push_back({name_, &model});
}

CollectiveModelRegistration::~CollectiveModelRegistration() {
    std::vector<NamedModel>& models = registered_models();
    for (auto it = models.end(); it != models.begin();) {
        --it;
        if (it->name == name_) {
            models.erase(it);
            return;
        }
    }
}

}  // namespace zerosim
