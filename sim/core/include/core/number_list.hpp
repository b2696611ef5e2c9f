// Comma-separated whole numbers as the command line writes them ("1,3,5": --overflow-steps,
// --stages, --nodes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zerosim {

// Empty items are skipped ("1,,3" is 1 and 3; "" is the empty list). An item that is not a whole
// number fails with "expected comma-separated WHAT, found 'ITEM'" for `flag`.
Result<std::vector<int>> parse_int_list(const std::string& text, const std::string& flag, const std::string& what);

// Sizes of a parallel dimension ("1,2,4": sweep's and need's --pp/--tp/--sp/--ep): at least one,
// each at least 1; an error names `flag` and what it found.
Result<std::vector<int64_t>> parse_size_list(const std::string& text, const std::string& flag);

}  // namespace zerosim
