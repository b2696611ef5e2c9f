// DeepSpeed's 1F1B pipeline schedule (runtime/pipe/schedule.py TrainSchedule, v0.14.2): the
// instructions one stage executes for one train_batch, step by step. sim/schedule/pipeline.cpp turns
// them into that rank's ops; tests check the order against schedules worked out by hand.
#pragma once

#include <cstdint>
#include <vector>

namespace zerosim {

// schedule.py's PipeInstruction subclasses that TrainSchedule yields.
enum class PipeInstr {
    LoadMicroBatch,
    ForwardPass,
    BackwardPass,
    SendActivation,
    RecvActivation,
    SendGrad,
    RecvGrad,
    ReduceTiedGrads,
    ReduceGrads,
    OptimizerStep,
};
const char* pipe_instr_name(PipeInstr i);   // "LoadMicroBatch", ... as schedule.py names the classes

struct PipeCommand {
    PipeInstr instr;
    int64_t micro = -1;   // the micro batch it works on; -1 for the step's reductions and update
};

// TrainSchedule(micro_batches, stages, stage_id).steps(): one list per schedule step,
// 2 * (micro_batches + stages - 1) of them.
std::vector<std::vector<PipeCommand>> pipe_train_schedule(int64_t micro_batches, int64_t stages, int64_t stage);

}  // namespace zerosim
