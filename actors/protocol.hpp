// What actors say to each other, in one place: every atom, the message types,
// and the typed interface of a pipeline stage. A stage actor (active or shadow)
// and the manager-side proxy of a stage in a worker process both implement
// `stage_actor`, so the compiler checks them against this one list.
//
// Step reports, commits and heartbeats are the schema's structs, so the same
// values cross a process boundary through the codec unchanged. Types marked
// "in-process" carry shared pointers (tensors, executors) and never leave a
// process: across processes the proxy turns them into frames.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/send.hpp>
#include <caf/typed_actor.hpp>

#include "actors/plan/planner.hpp"
#include "actors/plan/run_record.hpp"
#include "model/checkpoint_types.hpp"
#include "schema/codec.hpp"

namespace bamboo {

class stage_executor;
struct gradient_list; // std::vector<at::Tensor>, kept out of this header

// --- the run and its steps (manager <-> stages) -------------------------------
using train_atom = caf::atom_constant<caf::atom("train")>;         // start, reply done
using done_atom = caf::atom_constant<caf::atom("done")>;           // the run completed
using run_step_atom = caf::atom_constant<caf::atom("runstep")>;    // (gen, k)
using committed_atom = caf::atom_constant<caf::atom("committed")>; // (gen, k, stage)
using synced_atom = caf::atom_constant<caf::atom("synced")>;       // (gen, k, stage)
using step_failed_atom =
    caf::atom_constant<caf::atom("stepfail")>;                   // (gen, k, stage, why)
using progress_atom = caf::atom_constant<caf::atom("progress")>; // (gen) -> progress
using params_atom = caf::atom_constant<caf::atom("params")>;     // -> state blobs
using digest_atom = caf::atom_constant<caf::atom("digest")>;     // -> their digests
// A shadow did not get its owner's gradients of a step (the generation ended).
using sync_lost_atom = caf::atom_constant<caf::atom("synclost")>;
using resync_atom = caf::atom_constant<caf::atom("resync")>; // owner: send them again
using shadow_atom = caf::atom_constant<caf::atom("shadow")>; // (actor): the replica
using clone_atom = caf::atom_constant<caf::atom("clone")>;   // -> replica_handle
// (gen, k) -> state_copy: an owner sends its exact state to the rank before its
// own; a new shadow receives and loads it (re-homing across processes).
using copy_atom = caf::atom_constant<caf::atom("copystate")>;
// (step_dir, k) -> checkpoint_shard: an owner writes its state at the boundary
// before step k into step_dir, off its thread.
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
// A node's notice of its coming preemption: (notice_atom, [node,] deadline_ms).
using notice_atom = caf::atom_constant<caf::atom("notice")>;
// Timers: a heartbeat or expiry period, a failed stage's grace, a join's deadline.
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using failed_atom = caf::atom_constant<caf::atom("failed")>;
using join_timeout_atom = caf::atom_constant<caf::atom("jointime")>;

// --- across processes (actors/net) ---------------------------------------------
// (attach_atom, member): a proxy of one of the member's actors, to the gateway,
// which ends it (errc::node_lost) when the member is lost.
using attach_atom = caf::atom_constant<caf::atom("attach")>;
// (broadcast_atom, wire_frame): to every member (the end of a generation).
using broadcast_atom = caf::atom_constant<caf::atom("broadcast")>;
// To the gateway's listener: (joined_atom, member, agent, zone) and (lost_atom, member).
using joined_atom = caf::atom_constant<caf::atom("joined")>;
using lost_atom = caf::atom_constant<caf::atom("lost")>;
// (standby_atom, count): to the manager, the live members outside its plan.
using standby_atom = caf::atom_constant<caf::atom("standby")>;
// (store_atom, wire_frame store_request) to a worker's agent -> wire_frame
// store_reply: the rendezvous store's operations, sent on to the manager.
using store_atom = caf::atom_constant<caf::atom("store")>;

// --- message types ---------------------------------------------------------------

// In-process: the owner's clipped gradients of step k, for its shadow.
struct shadow_update {
  std::uint64_t generation = 0;
  std::int64_t step = 0;
  int stage = 0;
  std::shared_ptr<const gradient_list> grads;
};

// Continue step k in a new generation (to a survivor), or take the stage over
// (to a promoted shadow). The stage joins the generation's transport group itself.
struct resume_order {
  std::uint64_t generation = 0;
  std::int64_t step = 0;
  std::vector<int> resend_activations, resend_gradients;
  std::vector<int> delivered_activations, delivered_gradients;
  bool frc_enabled = false; // the successor's replica is still a shadow
  // P > 1 pipelines: when some pipeline of the stage already has the step's
  // gradient sum, the others take it from pipeline `sum_source` (-1: the sum
  // is made as usual), which sends it to `sum_targets`.
  int sum_source = -1;
  std::vector<int> sum_targets;
};

// In-process: a replica executor, cloned from its owner for a new shadow, or
// handed to the predecessor's stage actor for FRC.
struct replica_handle {
  std::shared_ptr<stage_executor> executor;
};

// What a state copy moved: its FNV-1a digest (of the flat state, as sent or
// as loaded) and its size, so the manager can check that both sides agree.
struct state_copy {
  std::uint64_t digest = 0;
  std::uint64_t bytes = 0;
};

// --- the stage's interface -------------------------------------------------------
// Every message carries the generation; anything older is dropped. Replies to
// the supervisor (the manager, or a worker's agent) are untyped sends of
// schema::step_report, (committed_atom | synced_atom | sync_lost_atom, gen, k,
// stage) and (step_failed_atom, gen, k, stage, why).
//  active: run_step -> step_report; progress -> stage_progress; resume_order;
//          schema::commit -> committed and the gradients to the shadow set by
//          (shadow_atom, present, actor) (actor invalid when they go through the
//          transport); resync sends them again; params and their digests;
//          clone (between steps); copy sends the state through the transport;
//          checkpoint writes it to a file.
//  shadow: shadow_update (or schema::commit, then the gradients through the
//          transport) -> synced; resume_order promotes it to active; copy
//          receives its state through the transport (a new shadow).
using stage_actor = caf::typed_actor<
    caf::reacts_to<run_step_atom, std::uint64_t, std::int64_t>,
    caf::replies_to<progress_atom, std::uint64_t>::with<stage_progress>,
    caf::reacts_to<resume_order>, caf::reacts_to<schema::commit>,
    caf::reacts_to<shadow_update>, caf::reacts_to<shadow_atom, bool, caf::actor>,
    caf::reacts_to<resync_atom, std::uint64_t, std::int64_t>,
    caf::replies_to<params_atom>::with<std::vector<param_blob>>,
    caf::replies_to<digest_atom>::with<std::vector<schema::tensor_digest>>,
    caf::replies_to<clone_atom>::with<replica_handle>, caf::reacts_to<replica_handle>,
    caf::replies_to<copy_atom, std::uint64_t, std::int64_t>::with<state_copy>,
    caf::replies_to<checkpoint_atom, std::string, std::int64_t>::with<checkpoint_shard>>;

// A message from a typed actor (a stage, a proxy) to an untyped one (its
// supervisor, a worker's agent), sent as the typed actor so that the receiver
// can tell who sent it (CAF's send() refuses typed-to-untyped).
template <class Self, class... Ts>
void tell(Self* self, const caf::actor& dest, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), dest, std::forward<Ts>(xs)...);
}

// Whether the message being handled comes from an actor of this process: only
// frames cross processes, so any other message from a peer is a stranger's
// (an anonymous message counts as a stranger's: a peer can send one too).
template <class Self>
bool from_this_process(Self* self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

// --- inspection (CAF's serialization and printing) --------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, param_blob& x) {
  return f(caf::meta::type_name("param_blob"), x.name, x.values);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_progress& x) {
  return f(caf::meta::type_name("stage_progress"), x.stage, x.step, x.forwards,
           x.backwards, x.frc, x.complete, x.report);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, state_copy& x) {
  return f(caf::meta::type_name("state_copy"), x.digest, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_shard& x) {
  return f(caf::meta::type_name("checkpoint_shard"), x.file, x.sha256, x.bytes,
           x.tensors);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resume_order& x) {
  return f(caf::meta::type_name("resume_order"), x.generation, x.step,
           x.resend_activations, x.resend_gradients, x.delivered_activations,
           x.delivered_gradients, x.frc_enabled, x.sum_source, x.sum_targets);
}

} // namespace bamboo

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(bamboo::shadow_update)
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
typename Inspector::result_type inspect(Inspector& f, tensor_digest& x) {
  return f(caf::meta::type_name("tensor_digest"), x.name, x.count, x.digest);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat& x) {
  return f(caf::meta::type_name("heartbeat"), x.node, x.generation, x.step, x.time_ms);
}

} // namespace bamboo::schema
