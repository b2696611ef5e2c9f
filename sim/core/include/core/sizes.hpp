// Numbers and byte sizes as both command lines write them (zerosim bench -b/-e, validate --min-bytes;
// zerorun bench -b/-e, --evict; every integer and real flag): one grammar, so a value one program
// takes the other takes too, and no flag is read as anything but what it says (no wrap, no NaN).
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

// An integer flag: optional sign, decimal digits only, within [min, max]. Anything else ("abc",
// "1.5", "1e3", a value past 64 bits) is refused with "expected an integer ..., found 'TEXT'".
Result<int64_t> parse_int_flag(const std::string& text, const std::string& flag, int64_t min, int64_t max);

// A real flag: a finite decimal number (strtod's grammar, no hex, no inf/nan) at least `min`, or
// greater than `min` when `min_exclusive`.
Result<double> parse_real_flag(const std::string& text, const std::string& flag, double min, bool min_exclusive);

// A size of memory or traffic in zerosim's own voice: binary units, labelled as such (B, KiB, MiB,
// GiB, TiB; 1024-based, as PyTorch's memory stats and nvidia-smi count), two decimals: "25.10 GiB".
// DeepSpeed's own size text ("25.1 GB", also 1024-based) is formats/comms_log.hpp ds_size_string,
// kept where zerosim prints what DeepSpeed's logger would.
std::string binary_size_string(int64_t bytes);

// One CLI11 parse error (its what()) as the front ends' Error: "NAME: MSG" becomes field NAME,
// "Could not convert: NAME = VALUE" and "NAME is required" name their flag; anything else is kept
// as the message.
Error command_line_error(const std::string& what);

}  // namespace zerosim
