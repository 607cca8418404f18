// The cluster manager: drives the steps of a run (run, report, commit), owns the
// generation, and supervises the stage actors it spawned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/messages.hpp"
#include "model/config.hpp"
#include "model/partition.hpp"

namespace bamboo {

class token_corpus;
class local_hub;

struct step_record {
  std::int64_t step = 0;
  double loss = 0;
  double seconds = 0;
  double samples_per_s = 0;
  std::uint64_t generation = 0;
  double lr = 0;
  double grad_norm = 0;
  std::string event;  // what happened in this step ("" when nothing did)
};

// Filled in by the manager before it answers train_atom.
struct run_result {
  std::vector<step_record> steps;
  std::vector<param_blob> parameters;  // only when asked for, sorted by name
};

struct manager_spec {
  train_config cfg;
  std::vector<stage_range> parts;
  std::shared_ptr<const token_corpus> corpus;
  std::shared_ptr<local_hub> hub;  // the embedded group of generation 1
  bool collect_parameters = false;
  std::function<void(const step_record&)> on_step;  // called on the manager's thread
  std::shared_ptr<run_result> result;
};

// (train_atom) -> (done_atom) once all steps committed, or an error.
caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec);

} // namespace bamboo
