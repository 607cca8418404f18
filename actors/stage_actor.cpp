#include "actors/stage_state.hpp"

namespace bamboo {

void stage_state::init(stage_actor_spec spec, caf::actor supervisor, const char* kind) {
  spec_ = std::move(spec);
  supervisor_ = std::move(supervisor);
  logger_ = log::get("bamboo.stage");
  // Its name towards the manager and its transport rank: p*S+s.
  stage_ = spec_.executor->coordinate();
  ops_ = make_schedule(spec_.executor->stage(), spec_.cfg.stages,
                       spec_.cfg.pipeline_micro_batches(), spec_.cfg.redundancy);
  frc_enabled_ =
      spec_.replica != nullptr && spec_.cfg.redundancy == redundancy_mode::eager;
  self_->set_default_handler(caf::print_and_drop);
  if (spec_.actors)
    row_ = spec_.actors->enter(kind, spec_.node, stage_,
                               std::string(kind) == "shadow" ? "shadow" : "active");
}

void stage_state::say(const char* state, const std::string& doing) {
  if (row_)
    row_.set(state, doing, self_->mailbox().size());
}

std::string stage_state::step_words(std::int64_t k, const char* what) {
  return "step " + std::to_string(k) + " " + what;
}

stage_actor::behavior_type stage_state::active() {
  return {
      [this](run_step_atom, std::uint64_t gen, std::int64_t k) {
        if (gen < gen_)
          return;
        gen_ = gen;
        run_step(k);
      },
      [this](progress_atom, std::uint64_t) { return progress(); },
      [this](const resume_order& o) { resume(o); },
      [this](const schema::commit& c) { commit(c); },
      [this](const shadow_update&) {
        logger_->warn("stage {}: an active stage got a shadow's update", stage_);
      },
      [this](shadow_atom, bool present, const caf::actor& a) {
        has_shadow_ = present;
        shadow_ = caf::actor_cast<stage_actor>(a);
      },
      // The shadow lost step k's gradients with the generation: send them again.
      [this](resync_atom, std::uint64_t gen, std::int64_t k) {
        if (has_shadow_ && last_sync_.defined() && spec_.executor->updates() == k + 1) {
          gen_ = std::max(gen_, gen);
          send_sync(k, last_sync_);
        }
      },
      [this](params_atom) { return blobs(); },
      [this](digest_atom) { return digests_of(blobs()); },
      // Between steps: the exact state of this stage, for a new shadow.
      [this](clone_atom) { return replica_handle{spec_.executor->clone()}; },
      // A new replica of the successor on this node: FRC may use it.
      [this](const replica_handle& r) {
        spec_.replica = r.executor;
        frc_enabled_ = spec_.cfg.redundancy == redundancy_mode::eager;
      },
      [this](copy_atom, std::uint64_t gen, std::int64_t k) { return send_state(gen, k); },
      [this](checkpoint_atom, const std::string& step_dir, std::int64_t k) {
        return write_checkpoint(step_dir, k);
      },
  };
}

stage_actor::behavior_type stage_state::shadow() {
  return {
      [this](run_step_atom, std::uint64_t, std::int64_t k) {
        logger_->warn("shadow of stage {}: not active, ignored step {}", stage_, k);
      },
      [](progress_atom, std::uint64_t) -> caf::result<stage_progress> {
        return caf::make_error(caf::sec::unexpected_message); // only owners are asked
      },
      [this](const shadow_update& u) {
        spec_.executor->apply_gradients(u.step, u.grads->grads);
        say("shadow", step_words(u.step, "applied, idle"));
        tell(self_, supervisor_, synced_atom::value, u.generation, u.step, stage_);
      },
      [this](const schema::commit& c) {
        if (spec_.sync == shadow_sync::transport)
          receive_sync(c);
      },
      [this](const resume_order& o) {
        logger_->info(
            "node {}: promoting the shadow of stage {} in step {} (generation {})",
            spec_.name, stage_, o.step, o.generation);
        self_->become(active());
        say("promoting", step_words(o.step, "taken over"));
        if (spec_.executor->updates() > o.step) {
          // The owner's update of this step reached us before it died: nothing
          // to redo, but the new generation's group forms only once every rank
          // has joined it (the others waited for this one until Gloo's timeout).
          gen_ = o.generation;
          frc_enabled_ = o.frc_enabled && spec_.replica != nullptr;
          if (connect(o.step))
            tell(self_, supervisor_, committed_atom::value, o.generation, o.step, stage_);
          return;
        }
        spec_.executor->promote(o.step);
        resume(o);
      },
      [this](shadow_atom, bool present, const caf::actor& a) {
        has_shadow_ = present;
        shadow_ = caf::actor_cast<stage_actor>(a);
      },
      [](resync_atom, std::uint64_t, std::int64_t) {}, // a shadow has nothing to re-send
      [this](params_atom) { return blobs(); },
      [this](digest_atom) { return digests_of(blobs()); },
      [](clone_atom) -> caf::result<replica_handle> {
        return caf::make_error(caf::sec::unexpected_message); // only owners are cloned
      },
      [](const replica_handle&) {}, // FRC is for active stages
      [this](copy_atom, std::uint64_t gen, std::int64_t k) { return load_state(gen, k); },
      // Owners write checkpoints; a shadow only the last one's file of a lost
      // owner (after the last step, its state is the owner's).
      [this](checkpoint_atom, const std::string& step_dir, std::int64_t k) {
        return write_checkpoint(step_dir, k);
      },
  };
}

caf::result<checkpoint_shard> stage_state::write_checkpoint(const std::string& step_dir,
                                                            std::int64_t k) {
  auto rp = self_->make_response_promise<checkpoint_shard>();
  const auto t0 = std::chrono::steady_clock::now();
  auto snap = make_snapshot(blobs(), step_dir, spec_.executor->stage(), k);
  add_checkpoint_snapshot(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  write_shard(self_, std::move(snap), rp);
  return rp;
}

std::vector<param_blob> stage_state::blobs() const {
  return state_blobs(*spec_.executor, spec_.executor->stage());
}

namespace {

using stage_pointer = stage_actor::stateful_pointer<stage_state>;

stage_actor::behavior_type active_stage(stage_pointer self, stage_actor_spec spec,
                                        caf::actor supervisor) {
  self->state.init(std::move(spec), std::move(supervisor), "stage");
  return self->state.active();
}

stage_actor::behavior_type shadow_stage(stage_pointer self, stage_actor_spec spec,
                                        caf::actor supervisor) {
  self->state.init(std::move(spec), std::move(supervisor), "shadow");
  return self->state.shadow();
}

} // namespace

stage_actor spawn_stage_actor(caf::local_actor* supervisor, stage_actor_spec spec) {
  auto sup = caf::actor_cast<caf::actor>(supervisor);
  return supervisor->spawn<caf::detached + caf::monitored>(active_stage, std::move(spec),
                                                           std::move(sup));
}

stage_actor spawn_shadow_actor(caf::local_actor* supervisor, stage_actor_spec spec) {
  auto sup = caf::actor_cast<caf::actor>(supervisor);
  return supervisor->spawn<caf::detached + caf::monitored>(shadow_stage, std::move(spec),
                                                           std::move(sup));
}

} // namespace bamboo
