#include "model/schedule.hpp"

#include <algorithm>
#include <set>
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

std::vector<instruction> make_schedule(int stage, int stages, int micro_batches,
                                       redundancy_mode mode) {
  auto base = one_f_one_b(stage, stages, micro_batches);
  if (mode != redundancy_mode::eager || stage == stages - 1)
    return base;
  std::vector<instruction> ops;
  for (const auto& op : base) {
    // Backward i follows forward i in 1F1B, so FRC i always has its input.
    if (op.kind == op_kind::backward)
      ops.push_back({op_kind::frc, op.micro_batch});
    ops.push_back(op);
  }
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

std::string timeline(int stages, int m, redundancy_mode mode) {
  std::vector<std::vector<instruction>> ops;
  for (int s = 0; s < stages; ++s)
    ops.push_back(make_schedule(s, stages, m, mode));
  // List scheduling: each stage starts its next op as soon as its input exists.
  std::vector<std::size_t> pc(stages, 0);
  std::vector<int> free_at(stages, 0);
  std::vector<std::vector<int>> fwd_end(stages, std::vector<int>(m, -1));
  std::vector<std::vector<int>> bwd_end(stages, std::vector<int>(m, -1));
  std::vector<std::string> rows(stages);
  auto cell = [](const instruction& op) {
    std::string c = op.kind == op_kind::forward    ? "F"
                    : op.kind == op_kind::backward ? "B"
                                                   : "R";
    c += std::to_string(op.micro_batch);
    c.resize(4, ' ');
    return c;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      if (pc[s] == ops[s].size())
        continue;
      const auto& op = ops[s][pc[s]];
      int ready = free_at[s];
      if (op.kind == op_kind::forward && s > 0) {
        if (fwd_end[s - 1][op.micro_batch] < 0)
          continue;
        ready = std::max(ready, fwd_end[s - 1][op.micro_batch]);
      } else if (op.kind == op_kind::backward && s < stages - 1) {
        if (bwd_end[s + 1][op.micro_batch] < 0)
          continue;
        ready = std::max(ready, bwd_end[s + 1][op.micro_batch]);
      }
      const int cost = op.kind == op_kind::backward ? 2 : 1;
      while (static_cast<int>(rows[s].size()) < 4 * ready)
        rows[s] += ".   ";
      for (int c = 0; c < cost; ++c)
        rows[s] += cell(op);
      free_at[s] = ready + cost;
      if (op.kind == op_kind::forward)
        fwd_end[s][op.micro_batch] = free_at[s];
      else if (op.kind == op_kind::backward)
        bwd_end[s][op.micro_batch] = free_at[s];
      ++pc[s];
      progress = true;
    }
  }
  std::string out;
  for (int s = 0; s < stages; ++s)
    out += "stage " + std::to_string(s) + " | " + rows[s] + "\n";
  // The instructions by number: the J of --preempt node=N@step=K.op=J.
  for (int s = 0; s < stages; ++s) {
    out += "stage " + std::to_string(s) + " instructions:";
    for (std::size_t j = 0; j < ops[s].size(); ++j) {
      auto c = cell(ops[s][j]);
      c.erase(c.find_last_not_of(' ') + 1);
      out += " " + std::to_string(j) + "=" + c;
    }
    out += " " + std::to_string(ops[s].size()) + "=update\n";
  }
  return out;
}

} // namespace bamboo
