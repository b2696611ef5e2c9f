// Element types of tensors on the wire and in memory, with the names DeepSpeed configs and torch use.
// Shared by the inputs, the schedule IR, the topology (compute rates per dtype) and the runtime.
#pragma once

#include <optional>
#include <string>

namespace zerosim {

enum class DType { FP32, FP16, BF16, FP64, INT64, UINT8 };
const char* dtype_name(DType t);        // "fp32", ...
int dtype_size(DType t);                // bytes per element
// "fp16", "float16", "half", "bfloat16", ... as DeepSpeed configs and torch name them.
std::optional<DType> dtype_from_name(const std::string& s);

}  // namespace zerosim
