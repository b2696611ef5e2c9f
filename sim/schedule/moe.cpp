// DeepSpeed MoE layers under expert parallelism (moe/sharded_moe.py, moe/layer.py): placeholder until
// the MoE generator lands; refuses rather than answer wrong.
#include "build.hpp"

namespace zerosim::detail {

void install_moe_hooks(Build& b) {
    b.failure = Error{"", "--ep", "MoE layers are not modelled yet"};
}

}  // namespace zerosim::detail
