// What actors say to each other: atoms and message types. Step reports, commits
// and heartbeats are the schema's structs, so the same values cross a process
// boundary through the codec unchanged. Types marked "in-process" carry shared
// pointers (tensors, transports) and exist only in embedded mode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include "schema/codec.hpp"

namespace caf {
class actor_system_config;
}

namespace bamboo {

class tensor_transport;
class stage_executor;
struct gradient_list; // std::vector<at::Tensor>, kept out of this header

using train_atom = caf::atom_constant<caf::atom("train")>;
using run_step_atom = caf::atom_constant<caf::atom("runstep")>;
using committed_atom = caf::atom_constant<caf::atom("committed")>;
using synced_atom = caf::atom_constant<caf::atom("synced")>;
using step_failed_atom = caf::atom_constant<caf::atom("stepfail")>;
using params_atom = caf::atom_constant<caf::atom("params")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using clone_atom = caf::atom_constant<caf::atom("clone")>;
// A shadow did not get its owner's gradients of a step (the generation ended).
using sync_lost_atom = caf::atom_constant<caf::atom("synclost")>;
using resync_atom = caf::atom_constant<caf::atom("resync")>; // owner: send them again

// A tensor's values (parameters, optimizer moments), for bit-for-bit comparisons.
struct param_blob {
  std::string name;
  std::vector<float> values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, param_blob& x) {
  return f(caf::meta::type_name("param_blob"), x.name, x.values);
}

// A stage's state in an interrupted step (reply to progress_atom).
struct stage_progress_msg {
  int stage = 0;
  std::int64_t step = 0;
  std::vector<int> forwards, backwards, frc;
  bool complete = false;
  schema::step_report report; // valid when complete
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_progress_msg& x) {
  return f(caf::meta::type_name("stage_progress"), x.stage, x.step, x.forwards,
           x.backwards, x.frc, x.complete, x.report);
}

// In-process: the owner's clipped gradients of step k, for its shadow.
struct shadow_update {
  std::uint64_t generation = 0;
  std::int64_t step = 0;
  int stage = 0;
  std::shared_ptr<const gradient_list> grads;
};

// In-process: continue step k in a new generation (to a survivor), or take the
// stage over (to a promoted shadow). The stage joins the generation's transport
// group itself.
struct resume_order {
  std::uint64_t generation = 0;
  std::int64_t step = 0;
  std::vector<int> resend_activations, resend_gradients;
  std::vector<int> delivered_activations, delivered_gradients;
  bool frc_enabled = false; // the successor's replica is still a shadow
};

// In-process: a replica executor, cloned from its owner for a new shadow, or
// handed to the predecessor's stage actor for FRC.
struct replica_handle {
  std::shared_ptr<stage_executor> executor;
};

void register_messages(caf::actor_system_config& cfg);

} // namespace bamboo

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(bamboo::shadow_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(bamboo::resume_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(bamboo::replica_handle)

namespace bamboo::schema {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.node, x.stage, x.generation, x.step,
           x.loss_sum, x.grad_squares, x.forwards, x.backwards, x.frc, x.inherited);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, commit& x) {
  return f(caf::meta::type_name("commit"), x.generation, x.step, x.clip_coef);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat& x) {
  return f(caf::meta::type_name("heartbeat"), x.node, x.generation, x.step, x.time_ms);
}

} // namespace bamboo::schema
