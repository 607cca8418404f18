// The actor of one pipeline stage. Spawned detached: its LibTorch compute runs on
// a thread of its own and never holds up CAF's scheduler (or a heartbeat).
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "model/config.hpp"
#include "model/partition.hpp"

namespace bamboo {

class token_corpus;
class tensor_transport;

struct stage_spec {
  train_config cfg;
  int stage = 0;
  stage_range range;
  std::shared_ptr<const token_corpus> corpus;
  std::shared_ptr<tensor_transport> transport;
};

// Spawns the stage as a detached actor monitored by `supervisor`, to which it
// reports every step. Protocol (all tagged with the generation):
//   (run_step_atom, gen, k)  -> supervisor gets schema::step_report or
//                               (step_failed_atom, gen, k, stage, reason)
//   schema::commit           -> supervisor gets (committed_atom, gen, k, stage)
//   (params_atom)            -> replies std::vector<param_blob>
caf::actor spawn_stage(caf::local_actor* supervisor, stage_spec spec);

} // namespace bamboo
