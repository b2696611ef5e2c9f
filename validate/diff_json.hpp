// A diff report as a JSON object (private to validate/): write_diff_json prints it alone, the
// per-rank report (per_rank.cpp) holds one per rank.
#pragma once

#include <nlohmann/json.hpp>

#include "validate/diff.hpp"

namespace zerosim::validate_detail {

nlohmann::ordered_json diff_json(const DiffReport& r);

}  // namespace zerosim::validate_detail
