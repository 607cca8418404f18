// The shadow's side of a stage: its gradient sync, state copies and commits.
#include "actors/stage_state.hpp"

namespace bamboo {

caf::result<state_copy> stage_state::send_state(std::uint64_t gen, std::int64_t k) {
  auto& ex = *spec_.executor;
  if (ex.updates() != k)
    return make_error(errc::stage_failed, "stage " + std::to_string(stage_) +
                                              " is not at the boundary of "
                                              "step " +
                                              std::to_string(k) + " (" +
                                              std::to_string(ex.updates()) +
                                              " updates applied)");
  gen_ = std::max(gen_, gen);
  prepare_thread();
  std::string error;
  if (!join(stage_, error))
    return make_error(errc::transport_failure, error);
  auto flat = ex.optimizer().flat_state().contiguous();
  auto st =
      transport_->send(predecessor(), make_tag(k, 0, tensor_kind::state_copy), flat);
  if (!st)
    return make_error(errc::transport_failure, "the state of stage " +
                                                   std::to_string(stage_) +
                                                   " was not sent: " + st.detail);
  logger_->info("stage {}: state sent to its new shadow ({} bytes, generation {})",
                stage_, flat.numel() * 4, gen_);
  return copy_of(flat);
}

caf::result<state_copy> stage_state::load_state(std::uint64_t gen, std::int64_t k) {
  auto& ex = *spec_.executor;
  gen_ = std::max(gen_, gen);
  prepare_thread();
  std::string error;
  if (!join(predecessor(), error))
    return make_error(errc::transport_failure, error);
  auto flat = at::empty({ex.optimizer().flat_state_size()}, at::kFloat);
  auto st = transport_->recv(stage_, make_tag(k, 0, tensor_kind::state_copy), flat);
  if (!st)
    return make_error(errc::transport_failure, "no state for the new shadow of stage " +
                                                   std::to_string(stage_) + ": " +
                                                   st.detail);
  if (!ex.load_state(flat, k))
    return make_error(errc::stage_failed, "the state received for stage " +
                                              std::to_string(stage_) +
                                              " has the wrong size");
  return copy_of(ex.optimizer().flat_state());
}

void stage_state::commit(const schema::commit& c) {
  const auto k = static_cast<std::int64_t>(c.step);
  auto& ex = *spec_.executor;
  if (ex.updates() > k) // already applied (a re-sent commit after a re-plan)
    return;
  if (spec_.injector &&
      spec_.injector->should_kill(spec_.node, k, static_cast<int>(ops_.size()),
                                  static_cast<int>(ops_.size())))
    return die(k, static_cast<int>(ops_.size()));
  try {
    auto grads = std::make_shared<gradient_list>();
    grads->grads = ex.clip_gradients(c.clip_coef);
    // The shadow applies the same update on its own thread, meanwhile.
    if (has_shadow_ && spec_.sync == shadow_sync::transport) {
      gen_ = std::max(gen_, c.generation);
      last_sync_ = pack_gradients(ex, grads->grads);
      send_sync(k, last_sync_);
    } else if (shadow_) {
      self_->send(shadow_, shadow_update{c.generation, k, stage_, grads});
    }
    ex.apply_update(k);
  } catch (const std::exception& e) {
    tell(self_, supervisor_, step_failed_atom::value, c.generation, k, stage_,
         std::string("optimizer update: ") + e.what());
    return;
  }
  say("active", step_words(k, "committed, idle"));
  tell(self_, supervisor_, committed_atom::value, c.generation, k, stage_);
}

int stage_state::predecessor() const {
  const int stages = spec_.cfg.stages;
  return spec_.executor->rank_of((spec_.executor->stage() + stages - 1) % stages);
}

void stage_state::send_sync(std::int64_t k, const at::Tensor& flat) {
  if (!connect(k))
    return;
  auto st =
      transport_->send(predecessor(), make_tag(k, 0, tensor_kind::shadow_sync), flat);
  if (!st) // the generation ended: the manager commits again after the re-plan
    logger_->info("stage {}: step {} gradients not sent to the shadow: {}", stage_, k,
                  st.detail);
}

void stage_state::receive_sync(const schema::commit& c) {
  const auto k = static_cast<std::int64_t>(c.step);
  auto& ex = *spec_.executor;
  if (ex.updates() <= k) {
    gen_ = std::max(gen_, c.generation);
    prepare_thread();
    auto flat = at::empty({packed_size(ex)}, at::kFloat);
    transport_status st{transport_errc::aborted, "no transport"};
    if (connect(k, predecessor()))
      st = transport_->recv(stage_, make_tag(k, 0, tensor_kind::shadow_sync), flat);
    if (!st) {
      // The manager has both sides try again in the next generation.
      logger_->info("shadow of stage {}: no gradients for step {}: {}", stage_, k,
                    st.detail);
      tell(self_, supervisor_, sync_lost_atom::value, c.generation, k, stage_);
      return;
    }
    ex.apply_gradients(k, unpack_gradients(ex, flat));
  }
  say("shadow", step_words(k, "applied, idle"));
  tell(self_, supervisor_, synced_atom::value, c.generation, k, stage_);
}

} // namespace bamboo
