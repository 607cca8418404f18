// A discrete-event replay of spot-instance traces. The bamboo-nsdi23 policy is
// the original simulator's model; bamboo runs our planner (actors/plan/planner.hpp)
// with a redundancy mode; checkpoint-restart and on-demand are the baselines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "examples/sim/profile.hpp"
#include "examples/sim/trace.hpp"

namespace bamboo::sim {

enum class policy_kind { nsdi23, bamboo, checkpoint_restart, on_demand };
enum class sim_redundancy { off, lazy, eager, adaptive };

const char* to_string(policy_kind p);
const char* to_string(sim_redundancy r);

struct sim_options {
  policy_kind policy = policy_kind::nsdi23;
  sim_redundancy redundancy = sim_redundancy::lazy;
  profile prof;
  std::optional<std::int64_t> duration_ms; // none: until the target steps or no events
  std::int64_t ready_ms = 45000;           // an added node is ready after this
  std::int64_t global_rendezvous_ms = 30000;
  double spot_price = 0.91; // $/h per live spot instance
  double on_demand_price = 3.06;
  double fallback_slowdown = 1.5; // step time while a node runs two stages
  // Checkpoints (bamboo's fallback, checkpoint-restart's only protection).
  std::int64_t checkpoint_interval_ms = 30 * 60 * 1000;
  std::int64_t checkpoint_cost_ms = 0; // time a checkpoint stops training
  std::int64_t restart_ms = 60000;     // loading a checkpoint after a restart
  // Fault-free cost of redundancy (from bamboo-bench-redundancy); a profile's
  // own measured values take precedence.
  double lazy_overhead = 0.014;
  double eager_overhead = 0.14;
  bool record_series = true;
  // bamboo policy, beyond the original: with fewer ready nodes than the
  // profile's S, one pipeline of as many stages as there are nodes (down to
  // min_stages; 0: never shallower) trains instead of none, its step time
  // S / S' times the profile's (each stage has S / S' times the layers); a
  // standby node deepens it again. zones > 1: instance i (in order of first
  // appearance) is in zone i mod zones, and each pipeline's ring is placed by
  // the planner's zone_ring.
  int min_stages = 0;
  int zones = 1;
};

struct series_point {
  double hours = 0;
  int instances = 0;
  double samples_per_s = 0; // of the last step
  double cost_per_h = 0;
  std::int64_t steps = 0;
  int pipelines = 0;
  std::string event;
  int stages = 0; // of each pipeline
};

struct sim_summary {
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  int preemptions = 0;    // removals of any instance
  int fatal_failures = 0; // losses redundancy could not cover
  double hours = 0;       // simulated time up to the last completed step
  double mean_instances = 0;
  // The original's averages: each step's samples over the time since the
  // previous one (redone steps included), averaged since training first began.
  double samples_per_s = 0;
  double cost_per_h = 0; // time average
  double value = 0;      // time average of (samples/s) / ($/h), as the original
  double samples_per_dollar = 0;
};

struct sim_result {
  sim_summary summary;
  std::vector<series_point> series;
};

sim_result simulate(const std::vector<trace_event>& trace, const sim_options& o);

} // namespace bamboo::sim
