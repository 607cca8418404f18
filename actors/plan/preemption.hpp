// Injected preemptions for embedded runs: "node=N@step=K[.op=J]" kills node N
// before its compute instruction J of step K (J past the last one: just before
// its optimizer update); "rate=R" draws seeded Poisson kills, R per 100 steps.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace bamboo {

struct preempt_spec {
  int node = 0;
  std::int64_t step = 0;
  int op = 0;
};

// Parses one --preempt value into `kills` or `rate`; returns the problem if any.
std::optional<std::string> parse_preempt(const std::string& text,
                                         std::vector<preempt_spec>& kills, double& rate);

// Seeded Poisson draws: per step, Poisson(rate/100) kills at uniform nodes and
// instruction indices in [0, ops].
std::vector<preempt_spec> poisson_kills(double rate_per_100, std::int64_t steps,
                                        int nodes, int ops, std::uint64_t seed);

// Shared by a run's stage actors; each kill fires at most once.
class preemption_injector {
public:
  using clock = std::chrono::steady_clock;
  struct fired_kill {
    preempt_spec spec;
    clock::time_point at;
  };

  explicit preemption_injector(std::vector<preempt_spec> kills);
  // True when node dies before instruction `index` of step k; `ops` is the
  // length of the node's instruction list (index == ops: before the update).
  bool should_kill(int node, std::int64_t k, int index, int ops);
  // An operator's kill of `node` in step k, now: recorded as fired at once
  // (the node's actors are killed if idle), and the node dies before its next
  // instruction if it is computing.
  void kill_now(int node, std::int64_t k);
  std::vector<fired_kill> fired() const;
  std::optional<fired_kill> fired_for(int node) const;
  // Across processes a launcher does the kill and the manager only sees a
  // connection drop: true (once) when `node`'s drop in step k is a kill
  // announced for that step or before, which then counts as a preemption.
  bool claim_announced(int node, std::int64_t k);
  const std::vector<preempt_spec>& planned() const { return kills_; }

private:
  mutable std::mutex mtx_;
  std::vector<preempt_spec> kills_;
  std::vector<bool> used_;
  std::vector<fired_kill> fired_;
  std::vector<int> now_; // nodes to kill before their next instruction
};

} // namespace bamboo
