// Per-stage instruction lists for one step. Send/receive is implied by each
// instruction (a forward receives from s-1 and sends to s+1, a backward the
// reverse), so the same list drives the embedded and the multi-process runs.
#pragma once

#include <string>
#include <vector>

namespace bamboo {

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

// "F0 F1 B0 F2 B1 ..." for --print-schedule and logs.
std::string describe(const std::vector<instruction>& ops);

} // namespace bamboo
