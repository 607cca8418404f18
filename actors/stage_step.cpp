// A stage running its steps, and what it does when one fails.
#include "actors/stage_state.hpp"

namespace bamboo {

void stage_state::prepare_thread() {
  if (thread_ready_)
    return;
  keep_freed_memory();
  at::set_num_threads(spec_.cfg.threads);
  if (openblas_set_num_threads)
    openblas_set_num_threads(spec_.cfg.threads);
  thread_ready_ = true;
  logger_->debug("node {} stage {}: thread ready, schedule {}", spec_.name, stage_,
                 describe(ops_));
}

void stage_state::die(std::int64_t k, int index) {
  logger_->warn("node {} preempted in step {} before instruction {}", spec_.name, k,
                index);
  if (spec_.group)
    spec_.group->kill_all(self_->address());
  self_->quit(caf::exit_reason::kill);
}

void stage_state::fail(std::int64_t k, const std::string& why) {
  tell(self_, supervisor_, step_failed_atom::value, gen_, k, stage_, why);
}

bool stage_state::connect(std::int64_t k, int rank) {
  std::string error;
  if (join(rank, error))
    return true;
  logger_->error("stage {}: no transport for generation {}: {}", stage_, gen_, error);
  fail(k, "transport: " + error);
  return false;
}

bool stage_state::join(int rank, std::string& error) {
  if (transport_ && transport_->generation() == gen_ && transport_->rank() == rank)
    return true;
  transport_ = spec_.transports->connect(rank, gen_, error);
  return transport_ != nullptr;
}

void stage_state::run_step(std::int64_t k) {
  prepare_thread();
  if (!connect(k))
    return;
  step_outcome out;
  kill_hook hook;
  if (spec_.injector || row_)
    hook = [this](std::int64_t step, int index) {
      if (row_ && index < static_cast<int>(ops_.size()))
        say("active", "step " + std::to_string(step) + " " +
                          describe({ops_[static_cast<std::size_t>(index)]}));
      return spec_.injector && spec_.injector->should_kill(spec_.node, step, index,
                                                           static_cast<int>(ops_.size()));
    };
  try {
    out = spec_.executor->run(k, ops_, *transport_,
                              frc_enabled_ ? spec_.replica.get() : nullptr, hook);
  } catch (const std::exception& e) {
    // LibTorch reports bugs and bad shapes by throwing; never across actors.
    out.status = {transport_errc::invalid, std::string("exception: ") + e.what()};
  }
  if (out.killed)
    return die(k, static_cast<int>(spec_.executor->progress().forwards.size() +
                                   spec_.executor->progress().backwards.size()));
  if (out.status.code == transport_errc::aborted) {
    logger_->info("node {} stage {}: step {} interrupted ({}), waiting for the re-plan",
                  spec_.name, stage_, k, out.status.detail);
    return;
  }
  if (!out.status) {
    logger_->warn("stage {} step {} failed: {}: {}", stage_, k,
                  to_string(out.status.code), out.status.detail);
    fail(k, std::string(to_string(out.status.code)) + ": " + out.status.detail);
    return;
  }
  last_ = make_report(k, out);
  say("active", step_words(k, "reported, awaiting the commit"));
  tell(self_, supervisor_, last_);
}

schema::step_report stage_state::make_report(std::int64_t k,
                                             const step_outcome& out) const {
  const auto& p = spec_.executor->progress();
  schema::step_report rep;
  rep.node = static_cast<std::uint32_t>(spec_.node);
  rep.stage = static_cast<std::uint32_t>(stage_);
  rep.generation = gen_;
  rep.step = static_cast<std::uint64_t>(k);
  rep.loss_sum = out.loss_sum;
  rep.grad_squares = out.grad_squares;
  rep.tensor_squares = out.tensor_squares;
  rep.forwards = static_cast<std::uint32_t>(p.forwards.size() - p.inherited.size());
  rep.backwards = static_cast<std::uint32_t>(p.backwards.size());
  rep.frc = static_cast<std::uint32_t>(p.frc.size());
  rep.inherited = static_cast<std::uint32_t>(p.inherited.size());
  return rep;
}

stage_progress stage_state::progress() const {
  const auto& p = spec_.executor->progress();
  stage_progress m;
  m.stage = stage_;
  m.step = p.step;
  m.forwards = to_vector(p.forwards);
  m.backwards = to_vector(p.backwards);
  m.frc = to_vector(p.frc);
  m.complete = p.complete;
  m.report = last_;
  return m;
}

void stage_state::resume(const resume_order& o) {
  gen_ = o.generation;
  frc_enabled_ = o.frc_enabled && spec_.replica != nullptr;
  prepare_thread();
  if (!connect(o.step))
    return;
  auto& ex = *spec_.executor;
  ex.set_delivered(o.step, o.delivered_activations, o.delivered_gradients);
  if (spec_.cfg.pipelines > 1)
    ex.set_sum_source(o.step, o.sum_source);
  auto st = ex.resend(o.resend_activations, o.resend_gradients, *transport_);
  if (st && o.sum_source == ex.pipeline() && !o.sum_targets.empty())
    st = ex.send_sum(o.sum_targets, *transport_);
  if (!st) {
    if (st.code != transport_errc::aborted)
      fail(o.step, "resend: " + st.detail);
    return;
  }
  if (!ex.progress().complete)
    run_step(o.step);
}

} // namespace bamboo
