#include "model/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace bamboo {

std::vector<instruction> one_f_one_b(int stage, int stages, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1)
    throw std::invalid_argument("one_f_one_b: bad stage, stages or micro-batches");
  std::vector<instruction> ops;
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int next_fwd = 0;
  int next_bwd = 0;
  for (; next_fwd < warmup; ++next_fwd)
    ops.push_back({op_kind::forward, next_fwd});
  while (next_fwd < micro_batches) {
    ops.push_back({op_kind::forward, next_fwd++});
    ops.push_back({op_kind::backward, next_bwd++});
  }
  while (next_bwd < micro_batches)
    ops.push_back({op_kind::backward, next_bwd++});
  return ops;
}

std::string describe(const std::vector<instruction>& ops) {
  std::string out;
  for (const auto& op : ops) {
    if (!out.empty())
      out += ' ';
    out += op.kind == op_kind::forward ? "F" : op.kind == op_kind::backward ? "B" : "R";
    out += std::to_string(op.micro_batch);
  }
  return out;
}

} // namespace bamboo
