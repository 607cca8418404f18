// Losses and what follows them: a lost node's stages fail over to their
// shadows, the survivors say what they had done of the step, and each is told
// what to send again (a recovery round); at the next step boundary the stages
// left without a shadow get new ones.
#include "actors/errors.hpp"
#include "actors/manager_state.hpp"
#include "actors/plan/preemption.hpp"
#include "log/log.hpp"

#include <spdlog/fmt/ranges.h>

namespace bamboo {

void manager_state::on_down(const caf::down_msg& dm) {
  auto it = node_of_.find(dm.source);
  if (it == node_of_.end())
    return;
  if (finished_)
    return lost_after_finish(it->second);
  if (dm.reason == caf::exit_reason::kill)
    lost(it->second, failover_cause::preempted, "");
  else if (auto l = loss_of(dm.reason)) // how a worker process went
    lost(it->second, l->cause, l->detail);
  else
    lost(it->second, failover_cause::actor_down, exit_words(dm.reason));
}

// A loss while paused waits for the resume (its recovery round would start
// the step); else it fails over now.
void manager_state::lost(int node, failover_cause cause, const std::string& detail) {
  if (!paused_)
    return node_lost(node, cause, detail, false);
  for (const auto& l : held_losses_)
    if (l.node == node)
      return;
  logger_->warn("node {} lost while paused ({}): it fails over when the run resumes",
                id(node), to_string(cause));
  tracker_.forget(node);
  held_losses_.push_back({node, cause, detail});
}

void manager_state::on_tick() {
  if (finished_)
    return;
  const auto now = clock_type::now();
  const auto& hb = spec_.heartbeats;
  if (auto late = tracker_.tick(now, hb.period, hb.late_tick()); late.count() > 0)
    logger_->warn("the manager's tick came {} ms after the previous one: this process "
                  "was paused or starved, and that much of every node's silence is "
                  "forgiven",
                  std::chrono::duration_cast<std::chrono::milliseconds>(late).count());
  const bool stalled = !tracker_.stalled(now, hb.timeout()).empty();
  if (stalled && !stall_said_)
    logger_->warn("every node of this process is silent for over {} ms while the manager "
                  "runs: a stall (a loaded machine), not a loss, unless it lasts {} ms",
                  hb.timeout().count(), hb.progress.count());
  stall_said_ = stalled;
  for (int n : tracker_.expired(now, hb.timeout(), hb.progress))
    lost(n, failover_cause::missed_heartbeats, "");
  carry_out_orders();
  check_stop(now);
  if (finished_)
    return;
  if (paused_ && !recovering_)
    begin_step(); // resumes if the operator said so
  self_->delayed_send(self_, spec_.heartbeats.period, tick_atom::value);
}

void manager_state::on_step_failed(std::uint64_t gen, std::int64_t k, int stage,
                                   const std::string& why) {
  if (gen != plan_.generation)
    return;
  // A transfer often fails because a peer died, before the control plane says
  // so: give it the time to declare a loss and re-plan first.
  const auto grace = spec_.heartbeats.grace();
  logger_->info("stage {} failed in step {} ({}); the run fails unless a node is "
                "declared lost within {} ms",
                stage, k, why, grace.count());
  self_->delayed_send(self_, grace, failed_atom::value, gen, k, stage, why);
}

void manager_state::node_lost(int node, failover_cause cause, const std::string& detail,
                              bool at_boundary) {
  if (!plan_.alive[node])
    return;
  if (failing_ || plan_end_waiting_) { // the plan is over: not a survivor
    logger_->warn("node {} lost while the plan ends", id(node));
    plan_.alive[node] = false;
    fail_shard_requests(node);
    return;
  }
  const auto now = clock_type::now();
  // When the node went, if known: an injected kill's time, or the last
  // heartbeat of a node that fell silent (a worker process's loss is timed by
  // nobody here: its latency counts from the detection).
  auto kill = spec_.injector ? spec_.injector->fired_for(node) : std::nullopt;
  if (!kill && spec_.injector && cause == failover_cause::connection_lost &&
      spec_.injector->claim_announced(id(node), step_))
    cause = failover_cause::preempted; // the launcher's kill -9, as embedded says
  std::optional<clock_type::time_point> since;
  if (kill)
    since = kill->at;
  else if (cause == failover_cause::missed_heartbeats)
    since = tracker_.last_seen(node);
  kill_time_[node] = since.value_or(now);
  tracker_.forget(node);
  auto decision = plan_failover(plan_, node);
  failover_record f;
  f.node = node;
  f.step = step_;
  f.cause = cause;
  f.detail = detail;
  f.detect_s = since ? seconds_between(*since, now) : -1;
  f.at_boundary = at_boundary;
  if (at_boundary)
    logger_->info("node {} hands its stages over before step {} ({})", id(node), step_,
                  describe(f));
  else if (f.detect_s >= 0)
    logger_->warn("node {} lost in step {} ({}), {:.1f} ms after {}", id(node), step_,
                  describe(f), 1e3 * f.detect_s,
                  kill ? "the kill" : "its last heartbeat");
  else
    logger_->warn("node {} lost in step {} ({})", id(node), step_, describe(f));
  if (!decision.fatal.empty()) {
    plan_.alive[node] = false; // not among the survivors a rollback goes on with
    fail(make_error(errc::unrecoverable_failure,
                    "node " + std::to_string(id(node)) + " lost in step " +
                        std::to_string(step_) + ": " + decision.fatal +
                        "; shadows cannot cover it" +
                        (spec_.keep_nodes_on_failure
                             ? std::string()
                             : std::string(" (with --checkpoint-dir and "
                                           "--checkpoint-every the run would roll "
                                           "back to a checkpoint instead)"))));
    fail_shard_requests(node); // the failed run waits for no file of it
    return;
  }
  // End the old generation: every transfer still waiting on the dead node
  // fails now, not at a transport timeout.
  end_generation("generation " + std::to_string(plan_.generation) + " ended: node " +
                 std::to_string(id(node)) +
                 (at_boundary ? " handed its stages over" : " lost"));
  for (int s = 0; s < coordinates(); ++s)
    if (plan_.shadow[s] == node && decision.plan.shadow[s] < 0) {
      shadow_actor_[s] = stage_actor{};
      ledger_.shadow_lost(s);
      shadow_changed_.insert(s);
    }
  for (auto [stage, heir] : decision.promoted) {
    f.stage = stage;
    f.heir = heir;
    open_failovers_.push_back(f);
    owner_actor_[stage] = shadow_actor_[stage];
    shadow_actor_[stage] = stage_actor{};
    ledger_.owner_lost(stage);
    restarted_.insert(stage);
    shadow_changed_.insert(stage);
    logger_->info("failover: stage {} moves to node {} (generation {})", stage, id(heir),
                  decision.plan.generation);
  }
  plan_ = decision.plan;
  abandon_copies();
  // The recovery round starts the step under this plan: a re-plan's save is
  // abandoned first, since failing the lost node's file (next) reports the
  // save, and a save that still counted would start the step itself.
  if (replanning_) {
    replanning_ = false;
    ++replan_round_;
  }
  fail_shard_requests(node); // its files of a checkpoint in flight will not come
  start_recovery();
}

// Ask every surviving owner what it has done of the step, then re-plan it.
void manager_state::start_recovery() {
  recovering_ = true;
  say("recovering", "step " + std::to_string(step_) + ": a recovery round");
  const auto round = ++round_;
  progress_.assign(coordinates(), std::nullopt);
  awaiting_.clear();
  for (int s = 0; s < coordinates(); ++s) {
    if (restarted_.count(s))
      continue;
    awaiting_.insert(s);
    self_
        ->request(owner_actor_[s], spec_.heartbeats.progress, progress_atom::value,
                  plan_.generation)
        .then(
            [this, round, s](stage_progress& p) {
              if (round != round_)
                return;
              progress_[s] = std::move(p);
              awaiting_.erase(s);
              if (awaiting_.empty())
                finish_recovery();
            },
            [this, round, s, node = plan_.owner[s]](caf::error& err) {
              // The owner died too: its down message starts a new round. One
              // that lives but stays silent is declared lost: a decision, not
              // a wait without end.
              logger_->debug("no progress from stage {}: {}", s, caf::to_string(err));
              const bool silent = err == caf::make_error(caf::sec::request_timeout);
              if (round == round_ && awaiting_.count(s) && silent)
                node_lost(node, failover_cause::actor_down,
                          "no progress report within " +
                              std::to_string(spec_.heartbeats.progress.count()) + " ms",
                          false);
            });
  }
  if (awaiting_.empty())
    finish_recovery();
}

void manager_state::finish_recovery() {
  // Indexed p*S+s: every pipeline's stages (one pipeline: just the stages).
  const int stages = coordinates(), pipelines = plan_.pipelines;
  std::vector<bool> committed(stages);
  for (int s = 0; s < stages; ++s)
    committed[s] = ledger_.committed(s);
  auto done = work_done(progress_, restarted_, committed, step_,
                        spec_.cfg.pipeline_micro_batches(), pipelines);
  const auto sums = plan_sums(progress_, restarted_, committed, step_, pipelines);
  for (const auto& o : sums)
    if (!o.fatal.empty()) {
      recovering_ = false;
      fail(make_error(errc::unrecoverable_failure, o.fatal));
      return;
    }
  for (std::size_t s = 0; s < sums.size(); ++s)
    if (sums[s].source >= 0)
      logger_->info(
          "stage {}: pipeline(s) {} take step {}'s gradient sum from pipeline {}", s,
          fmt::join(sums[s].targets, " "), step_, sums[s].source);
  for (int s = 0; s < stages; ++s)
    if (!restarted_.count(s) && progress_[s] && progress_[s]->step == step_ &&
        progress_[s]->complete)
      on_report(progress_[s]->report);
  auto orders = plan_resume(done, pipelines);
  for (int s : shadow_changed_)
    link_shadow(s);
  for (int s = 0; s < stages; ++s) {
    resume_order o;
    o.generation = plan_.generation;
    o.step = step_;
    o.resend_activations = orders[s].resend_activations;
    o.resend_gradients = orders[s].resend_gradients;
    o.delivered_activations = orders[s].delivered_activations;
    o.delivered_gradients = orders[s].delivered_gradients;
    // FRC feeds the successor's replica, which must still be a shadow here.
    const int next = s + 1;
    o.frc_enabled = s % plan_.stages + 1 < plan_.stages && shadow_actor_[next] &&
                    plan_.shadow[next] == plan_.owner[s];
    const auto& sum = sums[static_cast<std::size_t>(s % plan_.stages)];
    o.sum_source = sum.source;
    if (sum.source == s / plan_.stages)
      o.sum_targets = sum.targets;
    self_->send(owner_actor_[s], o);
  }
  restarted_.clear();
  shadow_changed_.clear();
  recovering_ = false;
  say("running", "step " + std::to_string(step_));
  for (int s : std::set<int>(resync_))
    maybe_resync(s);
  maybe_finish_step();
}

// At a step boundary after failovers: give each unprotected stage a new
// shadow on its predecessor's node, from the owner's exact state.
//  clone (in memory): the owner handles the clone request before the next
//    run_step (one mailbox), and the manager hears of the clone before that
//    step's report, so the shadow is known to the owner before the step commits.
//  copy (across processes): the owner sends its state through the transport
//    and the new shadow loads it; both say what digest they saw, and the step
//    starts when every copy is checked (or has failed: then the stage stays
//    unprotected until the next boundary).
void manager_state::reshadow() {
  const bool copy = spec_.nodes->reshadowing() == shadow_source::copy;
  for (auto [stage, node] : plan_reshadow(plan_)) {
    if (copy) {
      copy_state(stage, node);
      continue;
    }
    auto owner = owner_actor_[stage];
    self_->request(owner, std::chrono::seconds(60), clone_atom::value)
        .then(
            [this, owner, stage = stage, node = node](replica_handle& r) {
              if (owner_actor_[stage] == owner && !shadow_actor_[stage])
                add_shadow(stage, node, r);
            },
            [this](caf::error& err) {
              // The owner died meanwhile: its down message handles the loss.
              logger_->warn("no clone for a new shadow: {}", describe(err));
            });
  }
}

void manager_state::add_shadow(int stage, int node, const replica_handle& r) {
  if (!plan_.alive[node] || finished_)
    return;
  auto actor = spec_.nodes->add_shadow(self_, node, nodes_[node].group, r);
  if (!actor)
    return;
  node_of_[actor.address()] = node;
  attach_shadow(stage, node, actor);
  // The predecessor (p, s-1) runs FRC with it, unless it is the last stage.
  const int S = plan_.stages, s = stage % S;
  const int pred = stage - s + (s + S - 1) % S;
  if (spec_.cfg.redundancy == redundancy_mode::eager && s != 0)
    self_->send(owner_actor_[pred], r);
  logger_->info("stage {} has a shadow again, on node {}", stage, id(node));
}

void manager_state::attach_shadow(int stage, int node, const stage_actor& actor) {
  extra_actors_.push_back(actor);
  shadow_actor_[stage] = actor;
  plan_.shadow[stage] = node;
  ledger_.expect_sync(stage);
  link_shadow(stage);
}

void manager_state::copy_state(int stage, int node) {
  auto shadow = spec_.nodes->add_empty_shadow(self_, node, stage);
  if (!shadow)
    return;
  node_of_[shadow.address()] = node;
  copies_[stage] = pending_copy{shadow, node, {}, {}};
  const auto round = copy_round_;
  auto ask = [&](const stage_actor& who, bool sent) {
    self_
        ->request(who, std::chrono::seconds(120), copy_atom::value, plan_.generation,
                  step_)
        .then(
            [this, round, stage, sent](state_copy& c) { on_copy(round, stage, sent, c); },
            [this, round, stage](caf::error& err) {
              if (round == copy_round_)
                drop_copy(stage, describe(err));
            });
  };
  ask(shadow, false);
  ask(owner_actor_[stage], true);
}

void manager_state::on_copy(std::uint64_t round, int stage, bool sent,
                            const state_copy& c) {
  auto it = copies_.find(stage);
  if (round != copy_round_ || it == copies_.end())
    return;
  auto& p = it->second;
  (sent ? p.sent : p.loaded) = c;
  if (!p.sent || !p.loaded)
    return;
  if (p.sent->digest != p.loaded->digest || p.sent->bytes != p.loaded->bytes) {
    drop_copy(stage, fmt::format("the copy differs: {} bytes with digest {:016x} sent, "
                                 "{} bytes with digest {:016x} loaded",
                                 p.sent->bytes, p.sent->digest, p.loaded->bytes,
                                 p.loaded->digest));
    return;
  }
  logger_->info("stage {} has a shadow again, on node {}: {} bytes of state copied, "
                "digest {:016x} on both sides",
                stage, id(p.node), p.sent->bytes, p.sent->digest);
  auto shadow = p.shadow;
  const int node = p.node;
  copies_.erase(it);
  attach_shadow(stage, node, shadow);
  if (copies_.empty() && !recovering_ && !finished_)
    run_owners();
}

void manager_state::drop_copy(int stage, const std::string& why) {
  auto it = copies_.find(stage);
  if (it == copies_.end())
    return;
  logger_->warn("stage {}: no new shadow on node {} ({}); it stays unprotected until "
                "the next step boundary",
                stage, it->second.node, why);
  retire(it->second.shadow);
  copies_.erase(it);
  if (copies_.empty() && !recovering_ && !finished_)
    run_owners();
}

// A loss during the copies: the recovery's resume orders start the step, and
// the next boundary tries again.
void manager_state::abandon_copies() {
  ++copy_round_;
  for (auto& [stage, p] : copies_)
    retire(p.shadow);
  copies_.clear();
}

// A shadow the manager gives up on: not a loss of its node.
void manager_state::retire(const stage_actor& actor) {
  node_of_.erase(actor.address());
  self_->send_exit(actor, caf::exit_reason::user_shutdown);
}

} // namespace bamboo
