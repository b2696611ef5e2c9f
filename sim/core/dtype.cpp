#include "core/dtype.hpp"

#include <map>

namespace zerosim {

const char* dtype_name(DType t) {
    switch (t) {
        case DType::FP32: return "fp32";
        case DType::FP16: return "fp16";
        case DType::BF16: return "bf16";
        case DType::FP64: return "fp64";
        case DType::INT64: return "int64";
        case DType::UINT8: return "uint8";
    }
    return "?";
}

int dtype_size(DType t) {
    switch (t) {
        case DType::FP32: return 4;
        case DType::FP16: return 2;
        case DType::BF16: return 2;
        case DType::FP64: return 8;
        case DType::INT64: return 8;
        case DType::UINT8: return 1;
    }
    return 0;
}

std::optional<DType> dtype_from_name(const std::string& s) {
    static const std::map<std::string, DType> names = {
        {"fp32", DType::FP32}, {"float32", DType::FP32}, {"float", DType::FP32},   {"fp16", DType::FP16},
        {"float16", DType::FP16}, {"half", DType::FP16}, {"bf16", DType::BF16},    {"bfloat16", DType::BF16},
        {"fp64", DType::FP64}, {"float64", DType::FP64}, {"int64", DType::INT64}, {"uint8", DType::UINT8}};
    auto it = names.find(s);
    if (it == names.end()) return std::nullopt;
    return it->second;
}

}  // namespace zerosim
