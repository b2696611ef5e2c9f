// What a run leaves behind: rank 0's DeepSpeed comms_logger lines and summary (the one writer in
// formats/comms_log.hpp, shared with the predicted log), the JSON log of every op on every
// rank, and the memory report. docs/runtime.md documents the JSON format.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "executor/executor.hpp"
#include "schedule/ir.hpp"

namespace zerorun {

// This rank's part of the JSON log ({"rank", "memory", "peak_rss_bytes", "wrong", "ops": [...]}).
nlohmann::json rank_json(int rank, const zerosim::Schedule& s, const RankResult& r);

// The whole JSON log from every rank's part (rank order).
nlohmann::json run_json(const zerosim::Schedule& s, const ExecOptions& a, const std::string& backend,
                        const std::vector<nlohmann::json>& ranks);

// The comms_logger view of a run_json log: one verbose line per collective in IR order, then
// log_summary()'s table. Times are the log's per-op time_ms (see --op-time), timestamps rank 0's.
void write_measured_deepspeed(std::ostream& out, const zerosim::Schedule& s, const nlohmann::json& log);

// Memory per rank by category (peaks), the ZeRO state peak and the peak RSS.
void write_memory_report(std::ostream& out, const zerosim::Schedule& s, const std::vector<nlohmann::json>& ranks);

}  // namespace zerorun
