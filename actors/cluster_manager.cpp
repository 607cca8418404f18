#include "actors/cluster_manager.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/failover_accounting.hpp"
#include "actors/failure_detector.hpp"
#include "actors/node_agent.hpp"
#include "actors/planner.hpp"
#include "actors/preemption.hpp"
#include "actors/step_ledger.hpp"
#include "model/optimizer.hpp"
#include "model/schedule.hpp"
#include "transport/log.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

namespace {

using clock_type = std::chrono::steady_clock;
using failed_atom = caf::atom_constant<caf::atom("failed")>;

// torch.nn.utils.clip_grad_norm_'s rule, so runs compare with plain LibTorch.
double clip_coefficient(double max_norm, double norm) {
  if (max_norm <= 0)
    return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct manager_state {
  static inline const char* name = "bamboo.manager";

  explicit manager_state(caf::event_based_actor* self) : self_(self) {}

  void init(manager_spec spec) {
    spec_ = std::move(spec);
    logger_ = log::get("bamboo.manager");
    plan_ = cluster_plan::initial(spec_.cfg.stages, spec_.cfg.redundancy);
    self_->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  }

  caf::behavior make_behavior() {
    return {
        [this](train_atom) {
          promise_ = self_->make_response_promise();
          start();
          return promise_;
        },
        [this](const schema::step_report& r) {
          if (from_owner(static_cast<int>(r.stage)))
            on_report(r);
        },
        [this](committed_atom, std::uint64_t, std::int64_t k, int stage) {
          if (from_owner(stage) && k == ledger_.step()) {
            ledger_.commit(stage);
            maybe_resync(stage);
            maybe_finish_step();
          }
        },
        [this](sync_lost_atom, std::uint64_t, std::int64_t k, int stage) {
          if (from(shadow_actor_[stage]) && k == ledger_.step()) {
            resync_.insert(stage);
            maybe_resync(stage);
          }
        },
        [this](notice_atom, int node, std::int64_t deadline_ms) {
          if (node < 0 || node >= static_cast<int>(plan_.alive.size()) ||
              !plan_.alive[node] || finished_)
            return;
          logger_->info("node {} will be preempted in {} ms: its stages move to their "
                        "shadows at the next step boundary",
                        node, deadline_ms);
          notices_.insert(node);
        },
        [this](synced_atom, std::uint64_t, std::int64_t k, int stage) {
          if (from(shadow_actor_[stage]) && k == ledger_.step()) {
            ledger_.synced(stage);
            maybe_finish_step();
          }
        },
        [this](step_failed_atom, std::uint64_t gen, std::int64_t k, int stage,
               const std::string& why) {
          if (gen != plan_.generation || !from_owner(stage))
            return;
          // A transfer often fails because a peer died, before the control plane
          // says so: give it the time to declare a loss and re-plan first.
          const auto grace = spec_.heartbeat_period * (spec_.heartbeat_misses + 1);
          logger_->info("stage {} failed in step {} ({}); the run fails unless a node "
                        "is declared lost within {} ms",
                        stage, k, why, grace.count());
          self_->delayed_send(self_, grace, failed_atom::value, gen, k, stage, why);
        },
        [this](failed_atom, std::uint64_t gen, std::int64_t k, int stage,
               const std::string& why) {
          if (gen != plan_.generation || finished_)
            return;
          fail(make_error(errc::stage_failed, "stage " + std::to_string(stage) +
                                                  " in step " + std::to_string(k) + ": " +
                                                  why));
        },
        [this](const schema::heartbeat& hb) {
          tracker_.seen(static_cast<int>(hb.node), clock_type::now());
        },
        [this](tick_atom) { on_tick(); },
    };
  }

private:
  // --- set-up and the normal step cycle -------------------------------------

  void start() {
    const auto& cfg = spec_.cfg;
    logger_->info("{} run: {} stages, G={} m={} ({} micro-batches), {} steps, redundancy "
                  "{}; {}",
                  to_string(cfg.model.kind), cfg.stages, cfg.global_batch,
                  cfg.micro_batch, cfg.micro_batches(), cfg.steps,
                  to_string(cfg.redundancy), describe(spec_.parts));
    const auto now = clock_type::now();
    for (int n = 0; n < cfg.stages; ++n) {
      node_spec ns;
      ns.cfg = cfg;
      ns.node = n;
      ns.stage = n;
      ns.range = spec_.parts[n];
      const int successor = (n + 1) % cfg.stages;
      if (plan_.shadow[successor] == n) {
        ns.shadow_stage = successor;
        ns.shadow_range = spec_.parts[successor];
      }
      ns.corpus = spec_.corpus;
      ns.transports = spec_.transports;
      ns.injector = spec_.injector;
      ns.heartbeat_period = spec_.heartbeat_period;
      ns.sync_through_transport = spec_.sync_through_transport;
      auto h = spec_.make_node ? spec_.make_node(self_, ns) : spawn_node(self_, ns);
      for (auto* a : {&h.stage, &h.shadow, &h.detector})
        if (*a)
          node_of_[a->address()] = n;
      nodes_.push_back(h);
      if (h.detector) // else the process's own liveness is watched elsewhere
        tracker_.watch(n, now);
    }
    owner_actor_.resize(cfg.stages);
    shadow_actor_.resize(cfg.stages);
    for (int s = 0; s < cfg.stages; ++s) {
      owner_actor_[s] = nodes_[s].stage;
      if (plan_.shadow[s] >= 0)
        shadow_actor_[s] = nodes_[plan_.shadow[s]].shadow;
      self_->send(owner_actor_[s], shadow_atom::value, shadow_actor_[s]);
    }
    self_->delayed_send(self_, spec_.heartbeat_period, tick_atom::value);
    if (cfg.steps == 0)
      finish();
    else
      begin_step();
  }

  std::vector<bool> live_shadows() const {
    std::vector<bool> out;
    for (const auto& a : shadow_actor_)
      out.push_back(static_cast<bool>(a));
    return out;
  }

  void begin_step() {
    ledger_.begin(step_, spec_.cfg.stages, live_shadows());
    resync_.clear();
    step_start_ = clock_type::now();
    if (hand_off())
      return; // the re-plan's resume orders start the step
    reshadow();
    for (const auto& a : distinct_owners())
      self_->send(a, run_step_atom::value, plan_.generation, step_);
  }

  std::vector<caf::actor> distinct_owners() const {
    std::vector<caf::actor> out;
    for (const auto& a : owner_actor_)
      if (std::find(out.begin(), out.end(), a) == out.end())
        out.push_back(a);
    return out;
  }

  void on_report(const schema::step_report& r) {
    if (!ledger_.report(r) && !ledger_.clip())
      return;
    if (!ledger_.clip()) {
      ledger_.set_clip(clip_coefficient(spec_.cfg.optim.clip_norm, ledger_.grad_norm()));
      schema::commit c{plan_.generation, static_cast<std::uint64_t>(step_),
                       *ledger_.clip()};
      for (int s = 0; s < spec_.cfg.stages; ++s)
        if (!ledger_.committed(s)) {
          self_->send(owner_actor_[s], c);
          if (spec_.sync_through_transport && shadow_actor_[s])
            self_->send(shadow_actor_[s], c); // it receives the owner's gradients
        }
    } else if (!ledger_.committed(r.stage)) {
      // A stage that took over after the clip was set commits with the same factor.
      schema::commit c{plan_.generation, static_cast<std::uint64_t>(step_),
                       *ledger_.clip()};
      self_->send(owner_actor_[r.stage], c);
      if (spec_.sync_through_transport && shadow_actor_[r.stage])
        self_->send(shadow_actor_[r.stage], c);
    }
  }

  // A shadow lost the owner's gradients with an ended generation: once the
  // owner has committed, both try again in the current one.
  void maybe_resync(int s) {
    if (recovering_ || !resync_.count(s) || !ledger_.committed(s) ||
        ledger_.is_synced(s) || !shadow_actor_[s])
      return;
    resync_.erase(s);
    logger_->info("stage {}: its shadow gets step {}'s gradients again (generation {})",
                  s, step_, plan_.generation);
    self_->send(owner_actor_[s], resync_atom::value, plan_.generation, step_);
    self_->send(shadow_actor_[s],
                schema::commit{plan_.generation, static_cast<std::uint64_t>(step_),
                               ledger_.clip().value_or(1.0)});
  }

  // At a step boundary: the first noticed node whose stages its shadows can
  // take is failed over before the step starts, so no work is lost or redone,
  // and told to leave. Returns true when it did.
  bool hand_off() {
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
      at_boundary_ = true;
      node_lost(node, "preemption notice");
      at_boundary_ = false;
      for (auto* a : {&nodes_[node].stage, &nodes_[node].shadow, &nodes_[node].detector})
        if (*a)
          self_->send_exit(*a, caf::exit_reason::user_shutdown);
      return true;
    }
    return false;
  }

  void maybe_finish_step() {
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
    if (!open_failovers_.empty()) {
      rec.event = failover_event(open_failovers_);
      for (auto& f : open_failovers_) {
        f.latency_s = seconds_between(f_kill_time_[f.node], now);
        auto kill = spec_.injector ? spec_.injector->fired_for(f.node) : std::nullopt;
        account_failover(f, ledger_.reports()[f.stage],
                         kill ? std::optional<preempt_spec>(kill->spec) : std::nullopt,
                         cfg);
        logger_->info(
            "step {} completed after losing node {}: {:.3f} s from the kill "
            "(detected after {:.3f} s), {} forwards and {} backwards recomputed, "
            "{} taken over from FRC",
            step_, f.node, f.latency_s, f.detect_s, f.recomputed_forwards,
            f.recomputed_backwards, f.inherited);
        spec_.result->failovers.push_back(f);
      }
      open_failovers_.clear();
      logger_->info("step {} work per stage (forwards/backwards):{}", step_,
                    stage_work(rec.work));
    } else if (degraded()) {
      rec.event = "degraded";
    }
    spec_.result->steps.push_back(rec);
    logger_->debug("step {} committed: loss {:.6f}", step_, rec.loss);
    if (spec_.on_step)
      spec_.on_step(rec);
    if (++step_ >= cfg.steps)
      finish();
    else
      begin_step();
  }

  // At a step boundary after failovers: give each unprotected stage a new
  // shadow on its predecessor's node, cloned from the owner's exact state. The
  // owner handles the clone request before the next run_step (one mailbox), and
  // the manager hears of the clone before that step's report, so the shadow is
  // known to the owner before the step commits.
  void reshadow() {
    if (!spec_.reshadow)
      return;
    for (auto [stage, node] : plan_reshadow(plan_)) {
      auto owner = owner_actor_[stage];
      self_->request(owner, std::chrono::seconds(60), clone_atom::value)
          .then(
              [this, owner, stage = stage, node = node](replica_handle& r) {
                if (owner_actor_[stage] == owner && !shadow_actor_[stage])
                  add_shadow(stage, node, std::move(r));
              },
              [this](caf::error& err) {
                // The owner died meanwhile: its down message handles the loss.
                logger_->warn("no clone for a new shadow: {}", describe(err));
              });
    }
  }

  void add_shadow(int stage, int node, replica_handle r) {
    if (!plan_.alive[node] || finished_)
      return;
    stage_actor_spec sh;
    sh.cfg = spec_.cfg;
    sh.node = node;
    sh.executor = r.executor;
    sh.injector = spec_.injector;
    sh.group = nodes_[node].group;
    sh.transports = spec_.transports;
    auto actor = spawn_shadow_actor(self_, std::move(sh));
    nodes_[node].group->add(actor);
    node_of_[actor.address()] = node;
    extra_actors_.push_back(actor);
    shadow_actor_[stage] = actor;
    plan_.shadow[stage] = node;
    ledger_.expect_sync(stage);
    self_->send(owner_actor_[stage], shadow_atom::value, actor);
    const int pred = (stage + plan_.stages - 1) % plan_.stages;
    if (spec_.cfg.redundancy == redundancy_mode::eager && pred != plan_.stages - 1)
      self_->send(owner_actor_[pred], r);
    logger_->info("stage {} has a shadow again, on node {}", stage, node);
  }

  bool degraded() const {
    if (plan_.mode == redundancy_mode::off)
      return false;
    return std::any_of(shadow_actor_.begin(), shadow_actor_.end(),
                       [](const caf::actor& a) { return !a; });
  }

  // --- failures ---------------------------------------------------------------

  bool from(const caf::actor& a) const {
    return a && self_->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(a);
  }
  bool from_owner(int stage) const {
    if (stage < 0 || stage >= static_cast<int>(owner_actor_.size()))
      return false;
    if (from(owner_actor_[stage]))
      return true;
    logger_->debug(
        "dropped a message about stage {} from an actor that no longer owns it", stage);
    return false;
  }

  void on_down(const caf::down_msg& dm) {
    if (finished_)
      return;
    auto it = node_of_.find(dm.source);
    if (it == node_of_.end())
      return;
    std::string cause = "actor down: " + caf::to_string(dm.reason);
    if (dm.reason == caf::exit_reason::kill)
      cause = "preempted";
    else if (dm.reason.category() == error_category &&
             dm.reason.code() == static_cast<std::uint8_t>(errc::node_lost) &&
             dm.reason.context().match_elements<std::string>())
      cause = dm.reason.context().get_as<std::string>(0); // how the process went
    node_lost(it->second, cause);
  }

  void on_tick() {
    if (finished_)
      return;
    const auto timeout = spec_.heartbeat_period * spec_.heartbeat_misses;
    for (int n : tracker_.expired(clock_type::now(), timeout))
      node_lost(n, "missed heartbeats");
    self_->delayed_send(self_, spec_.heartbeat_period, tick_atom::value);
  }

  void node_lost(int node, const std::string& cause) {
    if (!plan_.alive[node])
      return;
    const auto now = clock_type::now();
    auto kill = spec_.injector ? spec_.injector->fired_for(node) : std::nullopt;
    f_kill_time_[node] = kill ? kill->at : now;
    tracker_.forget(node);
    auto decision = plan_failover(plan_, node);
    if (at_boundary_)
      logger_->info("node {} hands its stages over before step {} ({})", node, step_,
                    cause);
    else
      logger_->warn("node {} lost in step {} ({}), {:.1f} ms after the kill", node, step_,
                    cause, 1e3 * seconds_between(f_kill_time_[node], now));
    if (!decision.fatal.empty()) {
      fail(make_error(errc::unrecoverable_failure,
                      "node " + std::to_string(node) + " lost in step " +
                          std::to_string(step_) + ": " + decision.fatal +
                          "; shadows cannot cover it, a checkpoint is needed"));
      return;
    }
    // End the old generation: every transfer still waiting on the dead node
    // fails now, not at a transport timeout.
    end_generation("generation " + std::to_string(plan_.generation) + " ended: node " +
                   std::to_string(node) + " lost");
    for (int s = 0; s < plan_.stages; ++s)
      if (plan_.shadow[s] == node && decision.plan.shadow[s] < 0) {
        shadow_actor_[s] = caf::actor{};
        ledger_.shadow_lost(s);
        shadow_changed_.insert(s);
      }
    for (auto [stage, heir] : decision.promoted) {
      failover_record f;
      f.node = node;
      f.stage = stage;
      f.heir = heir;
      f.step = step_;
      f.cause = cause;
      f.detect_s = seconds_between(f_kill_time_[node], now);
      f.at_boundary = at_boundary_;
      open_failovers_.push_back(f);
      owner_actor_[stage] = shadow_actor_[stage];
      shadow_actor_[stage] = caf::actor{};
      ledger_.owner_lost(stage);
      restarted_.insert(stage);
      shadow_changed_.insert(stage);
      logger_->info("failover: stage {} moves to node {} (generation {})", stage, heir,
                    decision.plan.generation);
    }
    plan_ = decision.plan;
    start_recovery();
  }

  // Ask every surviving owner what it has done of the step, then re-plan it.
  void start_recovery() {
    recovering_ = true;
    const auto round = ++round_;
    progress_.assign(plan_.stages, std::nullopt);
    awaiting_.clear();
    for (int s = 0; s < plan_.stages; ++s) {
      if (restarted_.count(s))
        continue;
      awaiting_.insert(s);
      self_
          ->request(owner_actor_[s], std::chrono::seconds(30), progress_atom::value,
                    plan_.generation)
          .then(
              [this, round, s](stage_progress_msg& p) {
                if (round != round_)
                  return;
                progress_[s] = std::move(p);
                awaiting_.erase(s);
                if (awaiting_.empty())
                  finish_recovery();
              },
              [this, round, s](caf::error& err) {
                // The owner died too: its down message starts a new round.
                logger_->debug("no progress from stage {}: {}", s, caf::to_string(err));
                (void)round;
              });
    }
    if (awaiting_.empty())
      finish_recovery();
  }

  void finish_recovery() {
    const int stages = plan_.stages;
    const int m = spec_.cfg.micro_batches();
    std::vector<stage_done> done(stages);
    for (int s = 0; s < stages; ++s) {
      if (restarted_.count(s)) {
        if (ledger_.committed(s)) { // the replica already has the update
          for (int j = 0; j < m; ++j) {
            done[s].forwards.insert(j);
            done[s].backwards.insert(j);
          }
          continue;
        }
        done[s].restarted = true;
        // FRC run by the predecessor is the heir's inherited forward work.
        if (s > 0 && progress_[s - 1] && progress_[s - 1]->step == step_)
          done[s].forwards.insert(progress_[s - 1]->frc.begin(),
                                  progress_[s - 1]->frc.end());
        continue;
      }
      const auto& p = *progress_[s];
      if (p.step == step_) {
        done[s].forwards.insert(p.forwards.begin(), p.forwards.end());
        done[s].backwards.insert(p.backwards.begin(), p.backwards.end());
        if (p.complete)
          on_report(p.report);
      }
    }
    auto orders = plan_resume(done);
    for (int s : shadow_changed_)
      self_->send(owner_actor_[s], shadow_atom::value, shadow_actor_[s]);
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
      o.frc_enabled =
          next < stages && shadow_actor_[next] && plan_.shadow[next] == plan_.owner[s];
      self_->send(owner_actor_[s], o);
    }
    restarted_.clear();
    shadow_changed_.clear();
    recovering_ = false;
    for (int s : std::set<int>(resync_))
      maybe_resync(s);
    maybe_finish_step();
  }

  // --- the end ----------------------------------------------------------------

  void finish() {
    finished_ = true;
    for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
      spec_.result->heartbeat_max_gap_s.push_back(
          std::chrono::duration<double>(tracker_.max_gap(n)).count());
      spec_.result->heartbeats.push_back(tracker_.beats(n));
    }
    if (!spec_.collect_parameters) {
      deliver_done();
      return;
    }
    std::vector<std::pair<caf::actor, bool>> sources; // actor, is_shadow
    for (const auto& a : distinct_owners())
      sources.push_back({a, false});
    for (const auto& a : shadow_actor_)
      if (a)
        sources.push_back({a, true});
    auto remaining = std::make_shared<std::size_t>(sources.size());
    for (auto& [actor, is_shadow] : sources)
      self_->request(actor, std::chrono::seconds(60), params_atom::value)
          .then(
              [this, remaining, is_shadow = is_shadow](std::vector<param_blob>& blobs) {
                auto& all =
                    is_shadow ? spec_.result->shadow_state : spec_.result->parameters;
                std::move(blobs.begin(), blobs.end(), std::back_inserter(all));
                if (--*remaining == 0) {
                  for (auto* v : {&spec_.result->parameters, &spec_.result->shadow_state})
                    std::sort(v->begin(), v->end(), [](const auto& a, const auto& b) {
                      return a.name < b.name;
                    });
                  deliver_done();
                }
              },
              [this](caf::error& err) { fail(err); });
  }

  void deliver_done() {
    logger_->info("run complete: {} steps, {} failovers", spec_.result->steps.size(),
                  spec_.result->failovers.size());
    promise_.deliver(done_atom::value);
    shutdown();
  }

  void fail(const caf::error& err) {
    if (!promise_.pending())
      return;
    logger_->error("run failed: {}", describe(err));
    end_generation("run failed"); // unblock waiting stages
    promise_.deliver(err);
    shutdown();
  }

  void end_generation(const std::string& reason) {
    if (spec_.transports)
      spec_.transports->abort(plan_.generation, reason);
    if (spec_.end_generation)
      spec_.end_generation(plan_.generation, reason);
  }

  void shutdown() {
    finished_ = true;
    for (auto& n : nodes_)
      for (auto* a : {&n.stage, &n.shadow, &n.detector})
        if (*a)
          self_->send_exit(*a, caf::exit_reason::user_shutdown);
    for (auto& a : extra_actors_)
      self_->send_exit(a, caf::exit_reason::user_shutdown);
    extra_actors_.clear();
    nodes_.clear();
    owner_actor_.clear();
    shadow_actor_.clear();
    self_->quit();
  }

  caf::event_based_actor* self_;
  manager_spec spec_;
  std::shared_ptr<spdlog::logger> logger_;
  caf::response_promise promise_;
  cluster_plan plan_;
  std::vector<node_handles> nodes_;
  std::map<caf::actor_addr, int> node_of_;
  std::vector<caf::actor> owner_actor_;  // stage -> actor running it
  std::vector<caf::actor> shadow_actor_; // stage -> actor holding its replica
  std::vector<caf::actor> extra_actors_; // shadows created after failovers
  heartbeat_tracker tracker_;
  step_ledger ledger_;
  std::int64_t step_ = 0;
  clock_type::time_point step_start_;
  bool finished_ = false;
  // Recovery of the current step.
  bool recovering_ = false;
  std::uint64_t round_ = 0;
  std::set<int> restarted_, shadow_changed_, awaiting_;
  std::vector<std::optional<stage_progress_msg>> progress_;
  std::vector<failover_record> open_failovers_;
  std::set<int> resync_;  // stages whose shadow must get the gradients again
  std::set<int> notices_; // nodes with a preemption notice, to hand off
  bool at_boundary_ = false;
  std::map<int, clock_type::time_point> f_kill_time_;
};

caf::behavior manager_actor(caf::stateful_actor<manager_state>* self, manager_spec spec) {
  self->state.init(std::move(spec));
  return self->state.make_behavior();
}

} // namespace

caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec) {
  return sys.spawn(manager_actor, std::move(spec));
}

} // namespace bamboo
