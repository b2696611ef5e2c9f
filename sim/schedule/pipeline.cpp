// DeepSpeed's pipeline engine (runtime/pipe/engine.py, schedule.py TrainSchedule): placeholder until
// the pipeline generator lands; refuses rather than answer wrong.
#include "build.hpp"

namespace zerosim::detail {

void generate_pipeline(Build& b) {
    b.failure = Error{"", "--pp", "pipeline parallelism is not modelled yet"};
}

}  // namespace zerosim::detail
