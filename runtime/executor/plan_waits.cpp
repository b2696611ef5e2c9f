// What each op waits for before it starts on its thread, kept apart from the threads that follow
// the plan (scheduling.cpp).
#include "rank_executor.hpp"
#include "schedule/ordering.hpp"

namespace zerorun {
namespace detail {

void Executor::plan_waits() {
    waits_ = executor_wait_plan(s_);
    plan_mlp_waits();   // a pipeline stage of the real MLP: its data's own waits (pipeline_mlp.cpp)
    plan_tp_waits();    // a tensor rank of the real tensor-parallel model (tensor_model.cpp)
}

}  // namespace detail

// The IR's wait lists (its deps and stream order, schedule/ordering.hpp), the same the timing
// engine follows. The executor's two threads add one execution constraint that is no dependency:
// the communication thread issues every collective, whatever its stream, in IR order, because
// every rank must call collectives on a communicator in the same order (MPI's rule for
// collectives on one communicator; NCCL's for kernels on one ncclComm_t), and a rank cannot know
// the order its peers' side streams would pick. Waits point to earlier ops and each thread runs
// in IR order, so this serialisation cannot deadlock. Within a step the weights change only at
// the optimizer step, which the rules fence from every gather, so a gather rewriting a working
// copy that a compute op reads writes the bytes already there (DeepSpeed gathers into a fresh
// buffer and needs no wait either).
std::vector<std::vector<int64_t>> executor_wait_plan(const zerosim::Schedule& s) { return zerosim::wait_lists(s); }

}  // namespace zerorun
