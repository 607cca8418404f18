// What the simulator needs to know of a model: pipeline depth, samples per step,
// step time by the number of pipelines, and its on-demand baseline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bamboo::sim {

struct profile {
  std::string name;
  int stages = 12;
  int samples_per_step = 32;
  std::vector<double> step_s; // step time for P = 1, 2, ...; the last one beyond
  std::int64_t local_rendezvous_ms = 20000;
  std::int64_t target_steps = 0;
  int on_demand_instances = 0;
  double on_demand_step_s = 0;
  // Fault-free cost of redundancy on this model and machine, a fraction of the
  // step time (bamboo-bench-redundancy --profile-out measures both); unset, the
  // simulator's defaults stand.
  std::optional<double> lazy_overhead, eager_overhead;

  double step_seconds(int pipelines) const;
};

// "gpt2" and "bert": the original simulator's constants.
std::optional<profile> builtin_profile(const std::string& name);

// A "key,value[,value...]" file (as bamboo-bench-pipeline writes with
// --profile-out): name, stages, samples_per_step, step_s (one per P),
// local_rendezvous_ms, target_steps, on_demand_instances, on_demand_step_s,
// lazy_overhead, eager_overhead. A key given twice takes its last value.
std::optional<profile> load_profile(const std::string& path, std::string& error);

} // namespace bamboo::sim
