// Per-stage instruction lists for one step. Send/receive is implied by each
// instruction (a forward receives from s-1 and sends to s+1, a backward the
// reverse), so the same list drives the embedded and the multi-process runs.
#pragma once

#include <string>
#include <vector>

#include "model/config.hpp"

namespace bamboo {

// forward / backward of the stage's own layers; frc: forward redundant
// computation, the successor's forward run on the shadow replica.
enum class op_kind { forward, backward, frc };

struct instruction {
  op_kind kind = op_kind::forward;
  int micro_batch = 0;
  bool operator==(const instruction& o) const {
    return kind == o.kind && micro_batch == o.micro_batch;
  }
};

// 1F1B (PipeDream-flush): stage s runs min(S-s-1, M) warm-up forwards, then
// alternates one forward and one backward, then drains the backwards.
// Backwards run in micro-batch order, so gradients accumulate in that order.
std::vector<instruction> one_f_one_b(int stage, int stages, int micro_batches);

// The stage's list for a redundancy mode. Eager puts FRC of micro-batch i at the
// head of the i-th backward slot (where the stage would wait for a gradient), as
// the original does; the last stage never runs FRC (its successor is stage 0).
std::vector<instruction> make_schedule(int stage, int stages, int micro_batches,
                                       redundancy_mode mode);

// "F0 F1 B0 R1 B1 ..." for logs.
std::string describe(const std::vector<instruction>& ops);

// A timeline of all stages of one step under unit costs (F=1, R=1, B=2), one row
// per stage, each column a time unit; idle slots (bubbles) are '.', FRC is R.
std::string timeline(int stages, int micro_batches, redundancy_mode mode);

} // namespace bamboo
