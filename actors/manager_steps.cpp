// The step cycle: run, report, clip, commit, shadow sync; and the hand-off of
// noticed nodes at a step boundary.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "actors/errors.hpp"
#include "actors/manager_state.hpp"
#include "actors/plan/failover_report.hpp"
#include "actors/plan/preemption.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/optimizer.hpp"

namespace bamboo {

namespace {

// torch.nn.utils.clip_grad_norm_'s rule, so runs compare with plain LibTorch.
double clip_coefficient(double max_norm, double norm) {
  if (max_norm <= 0)
    return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

// Where a failover's latency counts from: the kill when it is known (an
// injected one), the node's last heartbeat when it fell silent, else the
// moment the loss was detected.
std::string since_words(const failover_record& f) {
  if (f.detect_s < 0)
    return "its detection";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s (detected %.3f s later)",
                f.cause == failover_cause::missed_heartbeats ? "its last heartbeat"
                                                             : "the kill",
                f.detect_s);
  return buf;
}

std::vector<bool> live(const std::vector<stage_actor>& actors) {
  std::vector<bool> out;
  for (const auto& a : actors)
    out.push_back(static_cast<bool>(a));
  return out;
}

} // namespace

void manager_state::begin_step() {
  ledger_.begin(step_, coordinates(), live(shadow_actor_));
  resync_.clear();
  if (held())
    return; // paused: the ticks try again
  step_start_ = clock_type::now();
  say("running", "step " + std::to_string(step_));
  if (!held_losses_.empty()) { // lost while paused: they fail over now
    for (auto& l : std::exchange(held_losses_, {}))
      node_lost(l.node, l.cause, l.detail, /*at_boundary=*/true);
    return; // the recovery round's resume orders start the step
  }
  if (hand_off())
    return; // the re-plan's resume orders start the step
  if (replan())
    return; // this plan ends here, or the step starts when the state is saved
  start_owners();
}

void manager_state::start_owners() {
  reshadow();
  if (copies_.empty())
    run_owners();
}

// At a step boundary, when a standby node should join the plan (the planner's
// triggers): every owner writes its state for the next plan, which starts from
// those files on the members the runner chooses; this plan then ends. If a
// file cannot be written the step goes on under this plan; a loss meanwhile
// abandons the re-plan (its recovery round starts the step).
bool manager_state::replan() {
  if (!spec_.replans || replanning_)
    return false;
  auto why =
      replan_reason(plan_, resolve(spec_.depths, spec_.cfg.stages), standby_, ids());
  if (why.empty() && spec_.auto_pipelines)
    why = pipeline_reason(plan_, standby_, spec_.cfg.micro_batches(), ids());
  if (why.empty())
    why = redundancy_change();
  if (why.empty())
    return false;
  replanning_ = true;
  const auto round = ++replan_round_;
  logger_->info("a new plan before step {}: {}; every stage saves its state for it",
                step_, why);
  snapshot(spec_.replans, [this, round, why](bool written) {
    if (round != replan_round_ || finished_)
      return; // abandoned
    replanning_ = false;
    if (written) {
      end_plan(why);
      return;
    }
    logger_->warn("no new plan before step {}: a stage's state was not saved; the "
                  "step runs under this one",
                  step_);
    start_owners();
  });
  return true;
}

void manager_state::run_owners() {
  for (const auto& a : distinct_owners())
    self_->send(a, run_step_atom::value, plan_.generation, step_);
}

void manager_state::on_report(const schema::step_report& r) {
  if (!ledger_.report(r) && !ledger_.clip())
    return;
  if (!ledger_.clip()) {
    ledger_.set_clip(clip_coefficient(spec_.cfg.optim.clip_norm, ledger_.grad_norm()));
    for (int s = 0; s < coordinates(); ++s)
      if (!ledger_.committed(s))
        send_commit(s);
  } else if (!ledger_.committed(r.stage)) {
    // A stage that took over after the clip was set commits with the same factor.
    send_commit(static_cast<int>(r.stage));
  }
}

void manager_state::send_commit(int stage) {
  schema::commit c{plan_.generation, static_cast<std::uint64_t>(step_), *ledger_.clip()};
  self_->send(owner_actor_[stage], c);
  // Through the transport, the shadow receives the owner's gradients on commit.
  if (spec_.nodes->sync() == shadow_sync::transport && shadow_actor_[stage])
    self_->send(shadow_actor_[stage], c);
}

void manager_state::on_committed(std::int64_t k, int stage) {
  if (k != ledger_.step())
    return;
  ledger_.commit(stage);
  maybe_resync(stage);
  maybe_finish_step();
}

// A shadow's word about the current step, from the shadow itself.
bool manager_state::from_shadow(std::int64_t k, int stage) const {
  return stage >= 0 && stage < static_cast<int>(shadow_actor_.size()) &&
         from(shadow_actor_[stage]) && k == ledger_.step();
}

void manager_state::on_synced(std::int64_t k, int stage) {
  if (!from_shadow(k, stage))
    return;
  ledger_.synced(stage);
  maybe_finish_step();
}

void manager_state::on_sync_lost(std::int64_t k, int stage) {
  if (!from_shadow(k, stage))
    return;
  resync_.insert(stage);
  maybe_resync(stage);
}

// A shadow lost the owner's gradients with an ended generation: once the
// owner has committed, both try again in the current one.
void manager_state::maybe_resync(int s) {
  if (recovering_ || !resync_.count(s) || !ledger_.committed(s) || ledger_.is_synced(s) ||
      !shadow_actor_[s])
    return;
  resync_.erase(s);
  logger_->info("stage {}: its shadow gets step {}'s gradients again (generation {})", s,
                step_, plan_.generation);
  self_->send(owner_actor_[s], resync_atom::value, plan_.generation, step_);
  self_->send(shadow_actor_[s],
              schema::commit{plan_.generation, static_cast<std::uint64_t>(step_),
                             ledger_.clip().value_or(1.0)});
}

// At a step boundary: the first noticed node whose stages its shadows can
// take is failed over before the step starts, so no work is lost or redone,
// and told to leave. Returns true when it did.
bool manager_state::hand_off() {
  for (auto it = notices_.begin(); it != notices_.end();) {
    const int node = *it;
    if (!plan_.alive[node]) {
      it = notices_.erase(it);
      continue;
    }
    if (!plan_failover(plan_, node).fatal.empty()) {
      ++it; // not now: its neighbour is gone too
      continue;
    }
    notices_.erase(it);
    node_lost(node, failover_cause::preemption_notice, "", /*at_boundary=*/true);
    auto stop = [this](const auto& a) {
      if (a)
        self_->send_exit(a, caf::exit_reason::user_shutdown);
    };
    stop(nodes_[node].stage);
    stop(nodes_[node].shadow);
    stop(nodes_[node].detector);
    return true;
  }
  return false;
}

void manager_state::maybe_finish_step() {
  if (!ledger_.complete() || recovering_)
    return;
  const auto& cfg = spec_.cfg;
  const auto now = clock_type::now();
  step_record rec;
  rec.step = step_;
  rec.loss = ledger_.loss_sum() / cfg.micro_batches();
  rec.seconds = seconds_between(step_start_, now);
  rec.samples_per_s = rec.seconds > 0 ? cfg.global_batch / rec.seconds : 0;
  rec.generation = plan_.generation;
  rec.lr = learning_rate(cfg.optim, step_, cfg.steps);
  rec.grad_norm = ledger_.grad_norm();
  rec.work = ledger_.reports();
  for (int st = 0; st < coordinates(); ++st) {
    rec.owners.push_back(spec_.nodes->node_id(plan_.owner[st]));
    rec.shadows.push_back(shadow_actor_[st] ? spec_.nodes->node_id(plan_.shadow[st])
                                            : -1);
  }
  if (!open_failovers_.empty())
    close_failovers(rec, now);
  else if (degraded())
    rec.event = "degraded: " + unprotected();
  else if (step_ == spec_.first_step)
    rec.event = spec_.first_event;
  spec_.result->steps.push_back(rec);
  logger_->debug("step {} committed: loss {:.6f}", step_, rec.loss);
  if (spec_.on_step)
    spec_.on_step(rec);
  ++step_;
  if (step_ >= cfg.steps || stop_wanted()) {
    end_at_boundary(step_ >= cfg.steps ? 0 : stop_wanted());
    return;
  }
  maybe_checkpoint(spec_.checkpoint_every > 0 && step_ % spec_.checkpoint_every == 0);
  begin_step();
}

// The run ends at this boundary (the last step, or a stop signal): with a
// checkpoint of it wherever checkpoints go, so the end is always resumable.
void manager_state::end_at_boundary(int signal) {
  if (signal != 0) {
    logger_->warn("stopping after step {} on signal {}", step_ - 1, signal);
    spec_.result->stopped_by = signal;
  }
  if (spec_.checkpoints && last_checkpoint_ != step_) {
    last_checkpoint_ = step_;
    snapshot(spec_.checkpoints);
  }
  finish();
}

// A stop signal during a step: the step in flight gets stop_deadline to
// finish (its boundary then ends the run); one held at a boundary (paused)
// ends at once; past the deadline the step is abandoned, no checkpoint taken.
void manager_state::check_stop(clock_type::time_point now) {
  const int signal = stop_wanted();
  if (signal == 0 || finished_ || !promise_.pending())
    return;
  if (!stop_seen_) {
    stop_seen_ = now;
    logger_->info("signal {}: the run stops after step {} (waiting at most {} s for it)",
                  signal, step_, stop_deadline.count());
  }
  if (paused_ && !recovering_) {
    end_at_boundary(signal);
    return;
  }
  if (now - *stop_seen_ < stop_deadline)
    return;
  logger_->warn("step {} did not finish within {} s of signal {}: abandoned", step_,
                stop_deadline.count(), signal);
  spec_.result->stopped_by = signal;
  spec_.result->stopped_abandoned = true;
  end_generation("the run stops"); // unblock waiting stages
  finished_ = true;
  deliver_done();
}

// The boundary's checkpoint: every `checkpoint_every` steps, or when an
// operator asks (once per boundary).
void manager_state::maybe_checkpoint(bool periodic) {
  if (!spec_.checkpoints)
    return;
  const bool asked = spec_.controls && spec_.controls->take_checkpoint();
  if ((!periodic && !asked) || last_checkpoint_ == step_)
    return;
  if (asked)
    logger_->info("a checkpoint of step {} on an operator's command", step_);
  last_checkpoint_ = step_;
  snapshot(spec_.checkpoints);
}

// A checkpoint of the boundary before step_ into `writer`: each owner copies
// its state when asked, before the next run_step (one mailbox), and writes its
// file off its thread while training goes on; the manifest follows when every
// file is in. `then` learns whether every file was written.
void manager_state::snapshot(const std::shared_ptr<checkpoint_writer>& writer,
                             std::function<void(bool written)> then) {
  for (auto it = shard_waits_.begin(); it != shard_waits_.end();)
    it = *it->second.answered ? shard_waits_.erase(it) : std::next(it);
  auto g = std::make_shared<pending_checkpoint>();
  g->m.step = step_;
  g->m.config = checkpoint_config(spec_.cfg);
  g->m.seed = spec_.cfg.seed;
  g->m.cursor = step_ * spec_.cfg.global_batch;
  g->m.generation = plan_.generation;
  for (int s = 0; s < plan_.stages; ++s)
    g->m.plan += (s ? " " : "") + std::to_string(plan_.owner[s]);
  const auto owners = distinct_owners(/*first_pipeline=*/true); // all hold the same
  g->left = owners.size();
  ++snapshots_;
  // The run's checkpoints reach their writer in step order; a re-plan's state
  // (one at a time, waited for) goes at once.
  const bool in_order = writer == spec_.checkpoints;
  if (in_order)
    manifests_.push_back(g);
  const auto dir = checkpoint_step_dir(writer->dir(), step_);
  auto one_done = [this, g, writer, in_order, then = std::move(then)] {
    if (--g->left > 0)
      return;
    g->gathered = true;
    if (in_order)
      submit_manifests(*writer);
    else if (!g->failed)
      submit(*writer, std::move(g->m));
    --snapshots_;
    if (then)
      then(!g->failed);
    if (snapshots_ == 0 && failing_)
      end_failed_run();
    else if (snapshots_ == 0 && done_waiting_)
      deliver_done();
    else if (snapshots_ == 0 && plan_end_waiting_)
      end_plan(*plan_end_waiting_);
  };
  for (const auto& a : owners) {
    // A re-plan's state that is not saved is the re-plan's to report (`then`):
    // its writer counts only the files it failed to write itself.
    auto fail_shard = [g, writer, one_done, in_order](const std::string& why) {
      if (!g->failed && in_order)
        writer->failed(g->m.step, why);
      g->failed = true;
      one_done();
    };
    request_shard(
        a, dir, shadow_of(a),
        [g, one_done](checkpoint_shard& f) {
          g->m.files.push_back(std::move(f));
          one_done();
        },
        std::move(fail_shard));
  }
}

// One owner's file of a checkpoint. When the owner is lost after the last
// step, with this checkpoint the last step's, nothing changes the state any
// more: `fallback` (its shadow, which holds the same tensors) writes the file
// instead. Earlier, a shadow may already be past the checkpoint's step.
void manager_state::request_shard(const stage_actor& a, const std::string& dir,
                                  const stage_actor& fallback,
                                  std::function<void(checkpoint_shard&)> got,
                                  std::function<void(const std::string&)> failed) {
  auto answered = std::make_shared<bool>(false);
  auto fail_shard = [this, answered, dir, fallback, got, failed,
                     k = step_](const std::string& why) {
    if (std::exchange(*answered, true))
      return;
    if (finished_ && k == step_ && fallback && alive(fallback)) {
      logger_->info("a lost owner's file of the last checkpoint comes from its shadow");
      return request_shard(fallback, dir, {}, got, failed);
    }
    failed(why);
  };
  shard_waits_.emplace(a.address(), shard_wait{answered, fail_shard});
  self_->request(a, std::chrono::seconds(120), checkpoint_atom::value, dir, step_)
      .then(
          [got, answered](checkpoint_shard& f) {
            if (!std::exchange(*answered, true))
              got(f);
          },
          [fail_shard](caf::error& err) { fail_shard(describe(err)); });
}

// The shard requests to `node`'s actors fail now: it is lost, and its files
// will not come (a checkpoint without them is incomplete, and says so).
void manager_state::fail_shard_requests(int node) {
  std::vector<std::function<void(const std::string&)>> failing;
  for (auto it = shard_waits_.begin(); it != shard_waits_.end();) {
    auto n = node_of_.find(it->first);
    if (n != node_of_.end() && n->second == node) {
      failing.push_back(std::move(it->second.fail));
      it = shard_waits_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& f : failing) // may end the run: after the map is consistent
    f("node " + std::to_string(id(node)) + " was lost before its file was written");
}

void manager_state::submit(checkpoint_writer& writer, checkpoint_manifest m) {
  std::sort(m.files.begin(), m.files.end(),
            [](const auto& a, const auto& b) { return a.file < b.file; });
  writer.submit(std::move(m));
}

// Hands `writer` the checkpoints whose files are all in, oldest step first,
// stopping at one still being gathered.
void manager_state::submit_manifests(checkpoint_writer& writer) {
  while (!manifests_.empty() && manifests_.front()->gathered) {
    if (!manifests_.front()->failed)
      submit(writer, std::move(manifests_.front()->m));
    manifests_.pop_front();
  }
}

// The failovers of the step just completed: their latency and recomputed work.
void manager_state::close_failovers(step_record& rec, clock_type::time_point now) {
  rec.event = failover_event(open_failovers_);
  for (auto& f : open_failovers_) {
    f.latency_s = seconds_between(kill_time_[f.node], now);
    auto kill = spec_.injector ? spec_.injector->fired_for(f.node) : std::nullopt;
    account_failover(f, ledger_.reports()[f.stage],
                     kill ? std::optional<preempt_spec>(kill->spec) : std::nullopt,
                     spec_.cfg);
    logger_->info("step {} completed after losing node {}: {:.3f} s from {}, {} "
                  "forwards and {} backwards recomputed, {} taken over from FRC",
                  step_, id(f.node), f.latency_s, since_words(f), f.recomputed_forwards,
                  f.recomputed_backwards, f.inherited);
    f.node = id(f.node);
    f.heir = id(f.heir);
    spec_.result->failovers.push_back(f);
    if (spec_.on_failover)
      spec_.on_failover(f);
  }
  open_failovers_.clear();
  logger_->info("step {} work per stage (forwards/backwards):{}", step_,
                stage_work(rec.work));
}

bool manager_state::degraded() const {
  if (plan_.mode == redundancy_mode::off || plan_.stages < 2)
    return false; // nothing to protect with, so nothing lost
  return std::any_of(shadow_actor_.begin(), shadow_actor_.end(),
                     [](const stage_actor& a) { return !a; });
}

// "stage 2 unprotected; node 0 runs stages 0 1": what a degraded step lacks
// (no commas: it is a field of the metrics CSV).
std::string manager_state::unprotected() const {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  for (int s = 0; s < coordinates(); ++s)
    if (!shadow_actor_[s])
      add("stage " + std::to_string(s) + " unprotected");
  for (int n = 0; n < static_cast<int>(plan_.alive.size()); ++n) {
    auto stages = plan_.stages_of(n);
    if (plan_.alive[n] && stages.size() > 1) {
      std::string list;
      for (int s : stages)
        list += " " + std::to_string(s);
      add("node " + std::to_string(id(n)) + " runs stages" + list);
    }
  }
  return out;
}

} // namespace bamboo
