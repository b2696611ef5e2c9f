// Byte sizes as both command lines write them (zerosim bench -b/-e, validate --min-bytes; zerorun
// bench -b/-e, --evict): one grammar, so a size one program takes the other takes too.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace zerosim {

// A decimal number (a fraction or an exponent allowed: 1.5M, 1e6), then an optional unit: B; K, k or
// KB; M, m or MB; G, g or GB. The units are 1024-based, as nccl-tests reads its -b and -e sizes. The
// value must come to a whole number of bytes from 1 to INT64_MAX (no wrap past 64 bits). Errors name
// `flag`.
Result<int64_t> parse_size(const std::string& text, const std::string& flag);

}  // namespace zerosim
